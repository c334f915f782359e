package rpc

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm/cmdpb"
)

// commitNudger makes the leader tell followers about a new commit index
// soon. hashicorp/raft sends the commit index only with the next
// AppendEntries, which comes with the next log entry or after CommitTimeout;
// a write a follower took, a sync it serves and a watch event due to its
// clients all wait for that.
//
// When a forwarded write has been applied here, or a read index handed out,
// a follower is waiting: the nudger appends a no-op command at once, whose
// replication carries the new commit index. At most one nudge is
// outstanding; requests made meanwhile are served by the next one, so no
// commit is left waiting and none is nudged twice. The no-op is a command
// the FSM applies, not a Raft barrier: every index after a term's first
// no-op must be one the FSM applies (see verifyCommitIndex).
//
// A write of the leader's own clients has no follower waiting for its
// reply, only perhaps watchers on followers. For those the nudge is lazy: a
// nudge only if no new entry was appended within lazyNudgeDelay (a new
// entry's AppendEntries carries the commit index anyway). Nudging at once
// for these too would put a no-op between every two writes of a client.
type commitNudger struct {
	n    *Node
	wake chan struct{}
	lazy chan struct{}

	mu      sync.Mutex
	term    uint64 // the term of the last nudge
	carried int64  // a commit index the last nudge's replication carries
}

// lazyNudgeDelay is how long a lazy nudge waits for an entry that would carry
// the commit index anyway.
const lazyNudgeDelay = 2 * time.Millisecond

func newCommitNudger(n *Node) *commitNudger {
	return &commitNudger{n: n, wake: make(chan struct{}, 1), lazy: make(chan struct{}, 1)}
}

// request asks for a nudge once what was applied so far is committed.
func (c *commitNudger) request() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// requestFor asks for a nudge that tells followers index idx (committed)
// is committed, unless a nudge already sent in this term does.
func (c *commitNudger) requestFor(idx int64) {
	c.mu.Lock()
	covered := c.term == c.n.raft.CurrentTerm() && c.carried >= idx
	c.mu.Unlock()
	if !covered {
		c.request()
	}
}

// requestLazy asks for a nudge unless a new entry is appended soon.
func (c *commitNudger) requestLazy() {
	select {
	case c.lazy <- struct{}{}:
	default:
	}
}

// runLazy turns lazy requests into nudges when no entry follows. A request
// made while one waits is kept (the channel holds one) and checked after.
func (c *commitNudger) runLazy() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-c.n.ctx.Done():
			return
		case <-c.lazy:
		}
		last := c.n.raft.LastIndex()
		t.Reset(lazyNudgeDelay)
		select {
		case <-c.n.ctx.Done():
			return
		case <-t.C:
		}
		if c.n.raft.LastIndex() == last {
			c.request()
		}
	}
}

func (c *commitNudger) run() {
	for {
		select {
		case <-c.n.ctx.Done():
			return
		case <-c.wake:
		}
		if c.n.raft.State() != raft.Leader {
			continue
		}
		// The no-op's AppendEntries leave after it is appended, so they
		// carry at least the commit index read before proposing it.
		term, commit := c.n.raft.CurrentTerm(), int64(c.n.raft.CommitIndex())
		f := c.n.leader.proposeOwn(&cmdpb.Command{Cmd: &cmdpb.Command_Noop{Noop: &cmdpb.Noop{}}})
		c.mu.Lock()
		c.term, c.carried = term, commit
		c.mu.Unlock()
		done := make(chan struct{})
		go func() { _ = f.Error(); close(done) }()
		select {
		case <-done:
		case <-c.n.ctx.Done():
			return
		}
	}
}
