package rpc

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/peerpb"
	"github.com/coordd/coordd/tree"
)

// cluster is what the session engine needs of this server (engine.Cluster):
// the way into the log, read indexes and the leader's session deadlines.
type cluster struct{ n *Node }

// Submit queues a command for the log, forwarded to the leader if need be.
func (c cluster) Submit(cmd *cmdpb.Command) { c.n.prop.submit(cmd) }

// ReadIndex returns the read index of a sync (see readindex.go).
func (c cluster) ReadIndex(done <-chan struct{}) (int64, error) { return c.n.readIndex(done) }

// Serving reports whether this server knows a leader.
func (c cluster) Serving() bool { return c.n.serving() }

// PassTouches refreshes the sessions' deadlines on the leader (this server
// or another) and reports whether the leader then had its term confirmed
// by a majority asked after that, so that the sessions may be vouched for
// (rpc/DESIGN.md, "Vouching for sessions").
func (c cluster) PassTouches(ctx context.Context, ids []int64) (bool, error) {
	n := c.n
	if n.leader.touch(ids) {
		// The round starts after the touches were recorded: a majority then
		// confirms that no later leader existed when they were.
		if _, err := n.leaderReadIndex(ctx); err != nil {
			return false, nil // recorded, but not confirmed: no vouch
		}
		return true, nil
	}
	return n.peers.touchLeader(ctx, ids)
}

// observer is the FSM's observer: the leader's duties learn of promotions,
// opens and closes, then the engine routes replies and events.
type observer struct{ n *Node }

// Applied implements fsm.Observer.
func (o observer) Applied(a *fsm.Applied) {
	o.n.leader.applied(a)
	o.n.engine.Applied(a)
	if cs := a.Cmd.GetCloseSession(); cs != nil && cs.Expired && len(a.Closed) > 0 {
		o.n.metrics.SessionExpired()
	}
	if len(a.LockDelayed) > 0 || a.LockDelaysReleased > 0 || a.LockDelaysDeleted > 0 {
		o.n.metrics.LockDelays(len(a.LockDelayed), a.LockDelaysReleased, a.LockDelaysDeleted)
	}
}

// Restored implements fsm.Observer.
func (o observer) Restored() {
	o.n.leader.restored()
	o.n.engine.Restored()
}

// ZooKeeper's /zookeeper/config is replicated: the FSM renders it from
// each configuration entry it applies, with the client addresses the
// leader registered for the members (fsm/zkconfig.go).

// clientAddrRecheck is how often the leader asks every member for its
// client address even when /zookeeper/config lists one for each (a
// server restarted with another --client-addr).
const clientAddrRecheck = 10 * time.Second

// registerClientAddrs, on the leader, registers (a ClientAddress command
// of its own) the client address of each member that /zookeeper/config
// lists without one or with another than the member's Info says (its
// first start, a new --client-addr, a restored backup, just added). It
// asks the members (Info) at most once a second while an address is
// missing, and otherwise every clientAddrRecheck. The leader registers them, rather than each server
// its own, so that a follower never forwards a command an older leader
// would refuse during a rolling upgrade. (ClientAddress is of command
// level 1: every server that may be a member applies it.)
func (l *leaderDuties) registerClientAddrs() {
	n := l.n
	listed := map[string]string{}
	members := 0
	n.fsm.Read(func(v fsm.View) {
		for _, id := range fsm.ConfigMembers(v.Tree) {
			members++
			if addr, _ := fsm.ClientAddressOf(v.Tree, id); addr != "" {
				listed[id] = addr
			}
		}
	})
	since := time.Since(l.addrsAsked)
	if members == 0 || since < time.Second || (len(listed) == members && since < clientAddrRecheck) {
		return
	}
	l.addrsAsked = time.Now()
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	_, infos := n.memberInfos(ctx, &peerpb.InfoRequest{})
	for id, info := range infos {
		if info.ClientAddress == "" || info.ClientAddress == listed[id] {
			continue
		}
		n.log.Debug("registering a client address", "server", id, "address", info.ClientAddress)
		l.proposeOwn(&cmdpb.Command{Cmd: &cmdpb.Command_ClientAddress{ClientAddress: &cmdpb.ClientAddress{ServerId: id, Address: info.ClientAddress}}})
	}
}

// restateConfiguration appends the current configuration again, unchanged,
// when this server leads and its /zookeeper/config records no membership:
// the state came from a snapshot taken before the FSM recorded it, and no
// configuration entry has applied since. It is a membership change that
// changes nothing, made as any other (one at a time, against the latest
// configuration's index); it reports whether the configuration was
// appended.
func (n *Node) restateConfiguration() bool {
	recorded := true
	n.fsm.Read(func(v fsm.View) { recorded = fsm.ConfigRecorded(v.Tree) })
	if recorded || n.raft.State() != raft.Leader || !n.memberMu.TryLock() {
		return false
	}
	defer n.memberMu.Unlock()
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == n.cfg.ID && s.Suffrage == raft.Voter {
			n.log.Info("stating the configuration again for /zookeeper/config", "index", cf.Index())
			return n.raft.AddVoter(s.ID, s.Address, cf.Index(), n.cfg.ElectionTimeout).Error() == nil
		}
	}
	return false
}

// Reconfig makes a ZooKeeper reconfig's membership changes, one at a time:
// each joining server ("server.ID=HOST:PORT[:PORT][:ROLE][;CLIENT]",
// observers as non-voters) is added as AddMember adds one, then each
// leaving id is removed. It returns the new configuration's index.
func (c cluster) Reconfig(ctx context.Context, r engine.Reconfig) (int64, error) {
	n := c.n
	if r.NewMembers != "" {
		return 0, &engine.Error{Code: engine.BadArguments, Message: "coordd takes incremental reconfigurations only (joining and leaving servers), not a new member list"}
	}
	var adds []*apipb.AddMemberRequest
	for _, line := range splitComma(r.Joining) {
		add, err := parseServerLine(line)
		if err != nil {
			return 0, &engine.Error{Code: engine.BadArguments, Message: err.Error()}
		}
		adds = append(adds, add)
	}
	if r.FromConfig != -1 {
		// The version a getConfig here shows: /zookeeper/config's mzxid,
		// the index of its last change (a membership change, or a
		// member's client address).
		var version int64
		n.fsm.Read(func(v fsm.View) {
			st, _ := v.Tree.Exists(tree.ConfigPath)
			version = st.Mzxid
		})
		if version != r.FromConfig {
			return 0, &engine.Error{Code: engine.BadVersion, Message: fmt.Sprintf("the configuration is version %x, not %x", version, r.FromConfig)}
		}
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
	for _, add := range adds {
		if err := do(&peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Add{Add: add}}); err != nil {
			return 0, err
		}
	}
	for _, id := range splitComma(r.Leaving) {
		if err := do(&peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Remove{Remove: &apipb.RemoveMemberRequest{Id: strings.TrimSpace(id)}}}); err != nil {
			return 0, err
		}
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return 0, err
	}
	return int64(cf.Index()), nil
}

// parseServerLine parses one server of ZooKeeper's dynamic configuration:
// "server.ID=HOST:PORT[:PORT][:participant|observer][;[CLIENTHOST:]CLIENTPORT]"
// (the first port is the peer port; coordd has no second one).
func parseServerLine(line string) (*apipb.AddMemberRequest, error) {
	key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
	id, isServer := strings.CutPrefix(key, "server.")
	if !ok || !isServer || id == "" {
		return nil, fmt.Errorf("%q is not a server line (server.ID=HOST:PORT:PORT:ROLE;CLIENTPORT)", line)
	}
	value, _, _ = strings.Cut(value, ";")
	parts := strings.Split(value, ":")
	if len(parts) < 2 {
		return nil, fmt.Errorf("%q has no HOST:PORT", line)
	}
	add := &apipb.AddMemberRequest{Id: id, PeerAddress: net.JoinHostPort(parts[0], parts[1])}
	for _, p := range parts[2:] {
		switch p {
		case "observer":
			add.NonVoter = true
		case "participant":
		default:
			if _, err := strconv.Atoi(p); err != nil {
				return nil, fmt.Errorf("%q: unknown role %q", line, p)
			}
		}
	}
	return add, nil
}
