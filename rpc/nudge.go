package rpc

import (
	"github.com/hashicorp/raft"
)

// commitNudger makes the leader tell followers about a new commit index at
// once. hashicorp/raft sends the commit index only with the next
// AppendEntries, which comes with the next log entry or after CommitTimeout;
// a write a follower took, a sync it serves and a watch event due to its
// clients all wait for that. When the leader has applied an entry, or handed
// out a read index, the nudger appends a Raft barrier (an entry the FSM
// never sees), whose replication carries the new commit index. At most one
// barrier is outstanding; requests made meanwhile are served by the next
// one, so no commit is left waiting and none is nudged twice. Under load
// that is one small entry per replication round; when idle, one per write.
// (ZooKeeper's leader likewise sends every follower a COMMIT per proposal.)
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
