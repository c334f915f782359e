package rpc

import (
	"context"
	"net"

	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/peerpb"
)

// ZooKeeper's reconfig, made of coordd's membership changes
// (membership.go). The engine has checked the request (its version, its
// syntax, what it would make of the membership) and the caller's rights
// before it gets here.

// Reconfig makes a ZooKeeper reconfig's membership changes, one at a time:
// each joining server is added as AddMember adds one (an observer as a
// non-voter for good), with what the reconfig gave beyond its peer address
// recorded for /zookeeper/config (recordSpec), then each leaving id is
// removed. It returns an index this server applies once it has applied
// the whole change, so that the answer shows the new configuration on a
// follower too.
func (c cluster) Reconfig(ctx context.Context, r engine.Reconfig) (int64, error) {
	n := c.n
	joining, leaving, err := r.Parse()
	if err != nil {
		return 0, &engine.Error{Code: engine.BadArguments, Message: "reconfig: " + err.Error()}
	}
	do := func(req *peerpb.ChangeMembersRequest) error {
		if _, err := n.changeMembers(ctx, req); err != nil {
			code := engine.NewConfigNoQuorum
			switch reasonOf(err) {
			case reasonBadArguments, reasonMemberExists, reasonNoMember, reasonLastVoter, reasonNotJoining:
				code = engine.BadArguments
			case reasonInProgress:
				code = engine.ReconfigInProgress
			}
			return &engine.Error{Code: code, Message: status.Convert(err).Message()}
		}
		return nil
	}
	for _, s := range joining {
		add := &apipb.AddMemberRequest{Id: s.ID, PeerAddress: s.PeerAddress, NonVoter: s.Observer}
		spec := &peerpb.ZooKeeperSpec{ClientAddress: s.ClientAddress, ElectionPort: s.ElectionPort}
		if err := do(&peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Add{Add: add}, ZkSpec: spec}); err != nil {
			return 0, err
		}
	}
	for _, id := range leaving {
		if err := do(&peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Remove{Remove: &apipb.RemoveMemberRequest{Id: id}}}); err != nil {
			return 0, err
		}
	}
	if idx, err := n.readIndex(ctx.Done()); err == nil {
		return idx, nil
	}
	// No read index now (the leader just changed): the latest
	// configuration this server knows, which the change made if it led.
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return 0, err
	}
	return int64(cf.Index()), nil
}

// recordSpec records, on the leader, what a reconfig gave for server id,
// just added, beyond its peer address and role: its client address, and
// its election port once every server records one (cluster level 2; a
// server before it would ignore the port and show another text). A
// ClientAddress command of the leader's own, as a registration; if it
// fails (the leadership lost), the member stays, and its line gets the
// client address it registers.
func (n *Node) recordSpec(id string, spec *peerpb.ZooKeeperSpec) {
	c := &cmdpb.ClientAddress{ServerId: id, Address: spec.GetClientAddress()}
	if n.clusterLevelAtLeast(2) {
		c.ElectionPort = spec.GetElectionPort()
	}
	if c.Address == "" && c.ElectionPort == "" {
		return
	}
	if err := n.leader.proposeOwn(&cmdpb.Command{Cmd: &cmdpb.Command_ClientAddress{ClientAddress: c}}).Error(); err != nil {
		n.log.Warn("could not record the client address and election port a reconfig gave", "server", id, "err", err)
	}
}

// clientAddrAgrees reports whether a member's client address as
// /zookeeper/config lists it agrees with the one the member says it
// listens on: the same, or the same port where either host is a wildcard
// (ZooKeeper's 0.0.0.0:PORT, for a bare port in a reconfig). The leader
// registers the member's own only where they do not agree, so that what
// a reconfig gave stays shown while it is true.
func clientAddrAgrees(listed, actual string) bool {
	if listed == actual {
		return true
	}
	lh, lp, err1 := net.SplitHostPort(listed)
	ah, ap, err2 := net.SplitHostPort(actual)
	return err1 == nil && err2 == nil && lp == ap && (wildcard(lh) || wildcard(ah))
}

// wildcard reports whether host is the unspecified address (all of a
// machine's).
func wildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}
