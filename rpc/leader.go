package rpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/peerpb"
	"github.com/coordd/coordd/session"
)

// leaderDuties is what only the leader does: a no-op at the start of its
// term, then session deadlines (soft state: a new leader gives every session
// a fresh full timeout once its no-op applied; a demoted one forgets them),
// proposing CloseSession for sessions whose deadline passed, reaping, and
// releasing the nodes kept for a lock-delay (lockdelay.go).
type leaderDuties struct {
	n *Node

	mu       sync.Mutex
	tracker  *session.Tracker
	active   bool // promoted: deadlines are being kept
	noopSent bool

	reapCursor string    // where the next reaper pass starts
	lastReap   time.Time // when the last pass ran
	// releasing is set while a release of lock-delays is in flight
	// (releasePass).
	releasing atomic.Bool

	// upkeep is set while configUpkeep runs; addrsAsked is when it last
	// asked the members for their client addresses (its goroutine only).
	upkeep     atomic.Bool
	addrsAsked time.Time
	// levelAsked is when configUpkeep last asked the members which
	// command level they apply (its goroutine only); levelAsks counts the
	// times it did.
	levelAsked time.Time
	levelAsks  atomic.Int64

	// readable is the term whose no-op of this server's has applied here
	// while it led (0: none): from then on, within that term, the commit
	// index covers every write acknowledged anywhere, so reads may be
	// served at it (leaderReadIndex).
	readable atomic.Uint64
}

// reapBatch bounds one reaper pass, so that a million candidates never
// stall the log: each pass proposes at most this many conditional deletes.
const reapBatch = 256

func newLeaderDuties(n *Node) *leaderDuties {
	return &leaderDuties{n: n, tracker: session.NewTracker()}
}

func (l *leaderDuties) run() {
	tick := l.n.cfg.Tick / 2
	tk := time.NewTicker(tick)
	defer tk.Stop()
	last := time.Now()
	for {
		select {
		case <-l.n.ctx.Done():
			return
		case <-l.n.raft.LeaderCh():
		case <-tk.C:
		}
		now := time.Now()
		gap := now.Sub(last)
		stalled := gap > 3*tick
		last = now
		isLeader := l.n.raft.State() == raft.Leader
		term := l.n.raft.CurrentTerm()

		// Decide under l.mu; act (Raft, FSM) after releasing it: the FSM
		// calls applied() with its lock held, and applied() takes l.mu.
		l.mu.Lock()
		sendNoop := isLeader && !l.noopSent
		if sendNoop {
			l.noopSent = true
		}
		if !isLeader && (l.noopSent || l.active) {
			l.demoteLocked()
		}
		if l.active && stalled {
			// This process did not run for a while (a long GC pause, a
			// SIGSTOP, an overloaded host): the touches of that time were
			// not processed, so the deadlines say nothing. Start afresh, as
			// a new leader does, instead of expiring healthy sessions.
			l.n.log.Warn("leader stalled; giving every session a fresh timeout", "gap", gap)
			l.tracker.Refresh(now)
		}
		var expired []int64
		reap := false
		active := l.active
		if l.active {
			expired = l.tracker.Expired(now, 1024)
			if now.Sub(l.lastReap) >= l.n.cfg.ReapInterval {
				l.lastReap = now
				reap = true
			}
		}
		l.mu.Unlock()

		if sendNoop {
			f := l.proposeOwn(&cmdpb.Command{Cmd: &cmdpb.Command_Noop{Noop: &cmdpb.Noop{LeaderId: l.n.cfg.ID}}})
			go func() {
				if f.Error() != nil {
					l.mu.Lock()
					l.noopSent = false // try again at the next tick if still leader
					l.mu.Unlock()
				}
			}()
		}
		if reap {
			l.reapPass()
		}
		if active {
			l.releasePass()
		}
		if active && l.upkeep.CompareAndSwap(false, true) {
			go func() {
				defer l.upkeep.Store(false)
				l.configUpkeep()
			}()
		}
		var lockDelays []*cmdpb.LockDelay
		if len(expired) > 0 {
			lockDelays = l.n.lockDelayRules()
		}
		for _, id := range expired {
			l.n.log.Info("session expired", "session", id)
			// If this fails (leadership lost), the next leader decides
			// afresh; the tracker re-offers the id if this leader goes on.
			l.proposeOwn(&cmdpb.Command{Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: id, Expired: true, Term: term, LockDelays: lockDelays}}})
		}
	}
}

// configUpkeep keeps the replicated record of the cluster complete: the
// command level raised as far as every member allows, the membership
// stated again if the FSM has no record of it, the members' client
// addresses registered.
func (l *leaderDuties) configUpkeep() {
	l.raiseLevel()
	if !l.n.restateConfiguration() {
		l.registerClientAddrs()
	}
}

// raiseLevel proposes the highest command level that every member of the
// configuration applies (cmdpb.SetLevel), when it is above the cluster's:
// so a rolling upgrade switches the new commands on once its last server
// runs the new version, and never before. Every member must answer: one
// that does not may be older. It asks at most once a second, and not at
// all once the cluster is at this server's level.
func (l *leaderDuties) raiseLevel() {
	n := l.n
	cur := n.fsm.ClusterLevel()
	if cur >= fsm.Level || time.Since(l.levelAsked) < time.Second {
		return
	}
	l.levelAsked = time.Now()
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	servers, infos := n.memberInfos(ctx, &peerpb.InfoRequest{})
	defer l.levelAsks.Add(1)
	level := int64(fsm.Level)
	for _, s := range servers {
		in, ok := infos[string(s.ID)]
		if !ok {
			return
		}
		level = min(level, max(in.Level, 1))
	}
	if len(servers) == 0 || level <= cur {
		return
	}
	n.log.Info("raising the cluster's command level: every member applies it", "from", cur, "to", level)
	l.proposeOwn(&cmdpb.Command{Cmd: &cmdpb.Command_SetLevel{SetLevel: &cmdpb.SetLevel{Level: level}}})
}

// reapPass proposes conditional deletes of the containers and TTL nodes
// that are reapable now; the FSM re-checks each condition when it applies
// them, so a create or write that lands in between wins.
func (l *leaderDuties) reapPass() {
	now := time.Now().UnixMilli()
	var paths []string
	l.n.fsm.Read(func(v fsm.View) {
		paths, l.reapCursor = v.Tree.ReapCandidates(now, l.reapCursor, reapBatch)
	})
	if len(paths) == 0 {
		return
	}
	l.n.log.Debug("reaping", "nodes", len(paths))
	l.proposeOwn(&cmdpb.Command{Cmd: &cmdpb.Command_Reap{Reap: &cmdpb.Reap{Paths: paths}}})
}

// proposeOwn appends a leader-duty command (term no-op, expiry, reaping,
// lock-delay release) straight to this server's Raft log. It is never
// forwarded and never retried by the proposer: a decision made by a leader
// that has lost its term must die with that term. (A leader waking from a
// pause with stale deadlines would otherwise have its successor commit its
// expiries.)
func (l *leaderDuties) proposeOwn(cmd *cmdpb.Command) raft.ApplyFuture {
	cmd.TimeMs = time.Now().UnixMilli()
	data, err := proto.Marshal(cmd)
	if err != nil {
		panic(fmt.Sprintf("rpc: marshalling a leader command: %v", err)) // a bug, not input
	}
	return l.n.raft.Apply(data, l.n.cfg.ElectionTimeout)
}

func (l *leaderDuties) demoteLocked() {
	l.noopSent = false
	l.active = false
	l.reapCursor = ""
	l.tracker.Demote()
}

// applied follows the log (FSM write lock held): promotion when this
// leader's no-op applies, and session opens and closes.
func (l *leaderDuties) applied(a *fsm.Applied) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if noop := a.Cmd.GetNoop(); noop != nil {
		// Only this term's no-op counts: one of an earlier term of this
		// server's, committed late by a successor, says nothing about what
		// committed since. Before NewRaft has returned this server cannot
		// have proposed a no-op (leader duties start after it), and
		// n.raft is not yet safe to read.
		if noop.LeaderId != l.n.cfg.ID || !l.n.raftSet.Load() ||
			a.Term != l.n.raft.CurrentTerm() || l.n.raft.State() != raft.Leader {
			return
		}
		l.readable.Store(a.Term)
		if l.noopSent && !l.active {
			l.active = true
			l.tracker.Promote(a.Sessions.List(), time.Now())
			l.n.log.Info("leading", "sessions", l.tracker.Len())
		}
		return
	}
	if !l.active {
		return
	}
	if a.Opened != nil {
		l.tracker.Add(a.Opened.ID, time.Duration(a.Opened.TimeoutMs)*time.Millisecond, time.Now())
	}
	for _, id := range a.Closed {
		l.tracker.Remove(id)
	}
}

// readableTerm returns the term in which this server, as leader, may serve
// reads at its commit index (0: none yet).
func (l *leaderDuties) readableTerm() uint64 { return l.readable.Load() }

// waitReadable waits until this server, leading, has applied its no-op of
// the current term (a new leader's first few milliseconds).
func (l *leaderDuties) waitReadable(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		changed := l.n.fsm.Changed()
		if l.n.raft.State() != raft.Leader {
			return errNoLeader
		}
		if l.readable.Load() == l.n.raft.CurrentTerm() {
			return nil
		}
		select {
		case <-changed:
		case <-t.C: // leadership may have moved on without an entry applied
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// restored re-promotes after a snapshot restore replaced the sessions.
func (l *leaderDuties) restored() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active {
		l.active = false
		l.noopSent = false
		l.tracker.Demote()
	}
}

// touch refreshes deadlines; it reports false when this server is not an
// active leader (the caller then passes the touches to the leader).
func (l *leaderDuties) touch(ids []int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active {
		return l.n.raft.State() == raft.Leader // promoted soon: fresh timeouts anyway
	}
	now := time.Now()
	for _, id := range ids {
		l.tracker.Touch(id, now)
	}
	return true
}
