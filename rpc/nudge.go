package rpc

import (
	"github.com/hashicorp/raft"
)

// commitNudger makes the leader tell followers about a new commit index at
// once, when a follower is waiting for it. hashicorp/raft sends the commit
// index only with the next AppendEntries, which comes with the next log
// entry or after CommitTimeout; a write a follower took (or a sync it
// serves) waits for that. When a forwarded write has been applied here, or a
// read index handed out, the nudger appends a Raft barrier (an entry the FSM
// never sees), whose replication carries the new commit index. At most one
// barrier is outstanding; requests made meanwhile are served by the next
// one, so no commit is left waiting and none is nudged twice. Writes of
// clients connected to the leader itself cost nothing extra.
type commitNudger struct {
	n    *Node
	wake chan struct{}
}

func newCommitNudger(n *Node) *commitNudger {
	return &commitNudger{n: n, wake: make(chan struct{}, 1)}
}

// request asks for a nudge once what was applied so far is committed.
func (c *commitNudger) request() {
	select {
	case c.wake <- struct{}{}:
	default:
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
		f := c.n.raft.Barrier(0)
		done := make(chan struct{})
		go func() { _ = f.Error(); close(done) }()
		select {
		case <-done:
		case <-c.n.ctx.Done():
			return
		}
	}
}
