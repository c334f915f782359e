package rpc

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/peerpb"
)

// cluster is what the session engine needs of this server (engine.Cluster):
// the way into the log, read indexes and the leader's session deadlines.
type cluster struct{ n *Node }

// Submit queues a command for the log, forwarded to the leader if need be.
func (c cluster) Submit(cmd *cmdpb.Command) { c.n.prop.submit(cmd) }

// ReadIndex returns the read index of a sync (see readindex.go).
func (c cluster) ReadIndex(done <-chan struct{}) (int64, error) { return c.n.readIndex(done) }

// Serving reports whether this server knows a leader.
func (c cluster) Serving() (bool, string) { return c.n.serving() }

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
// leader registered for the members, and what a reconfig gave for them
// (fsm/zkconfig.go, reconfig.go).

// clientAddrRecheck is how often the leader asks every member for its
// client address even when /zookeeper/config lists one for each (a
// server restarted with another --client-addr).
const clientAddrRecheck = 10 * time.Second

// registerClientAddrs, on the leader, registers (a ClientAddress command
// of its own) the client address of each member that /zookeeper/config
// lists without one or with one that does not agree with what the
// member's Info says (clientAddrAgrees: its first start, a new
// --client-addr, a restored backup, just added). It
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
		if info.ClientAddress == "" || clientAddrAgrees(listed[id], info.ClientAddress) {
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
