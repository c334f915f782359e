package rpc

import (
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// commitNudger makes the leader tell followers about a new commit index at
// once. hashicorp/raft sends the commit index only with the next
// AppendEntries, which comes with the next log entry or after CommitTimeout;
// a write acknowledged by a follower waits for that. Whenever the leader's
// FSM advances, the nudger appends a Raft barrier (a log entry the FSM never
// sees), which triggers replication carrying the new commit index. At most
// one barrier is outstanding, so under load this costs about one small entry
// per replication round, and nothing when idle.
type commitNudger struct {
	n           *Node
	outstanding atomic.Bool
}

func (c *commitNudger) run() {
	for {
		ch := c.n.fsm.Changed()
		select {
		case <-c.n.ctx.Done():
			return
		case <-ch:
		}
		if c.n.raft.State() != raft.Leader || !c.outstanding.CompareAndSwap(false, true) {
			continue
		}
		f := c.n.raft.Barrier(0)
		go func() {
			_ = f.Error()
			c.outstanding.Store(false)
		}()
	}
}
