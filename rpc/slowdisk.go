package rpc

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A slow disk (issue 37). Every write of the cluster waits for the leader's
// own append to its Raft log: the leader applies and answers nothing while
// that append (its fsync) runs, and its heartbeats, sent by other
// goroutines, go on, so the followers never elect another. A leader whose
// fsyncs take seconds would hold every write back for good. So an append
// that takes longer than the election timeout (and than minSlowAppend) is
// counted (coordd_raft_log_slow_appends_total) and logged ("slow disk"),
// and a leader then hands its leadership to a follower (Raft's leadership
// transfer, to the most up-to-date one). Its followers' disks are not
// waited for: the leader needs only a majority.

// slowLogRepeat is how often a server says again that its appends are
// slow, when it does not lead (a leader says so each time it hands over).
const slowLogRepeat = 10 * time.Second

// minSlowAppend is the least time an append must take to count as slow,
// whatever the election timeout: a loaded machine's fsync takes hundreds
// of milliseconds now and then, and is no reason to change leaders.
const minSlowAppend = time.Second

// transferTries is how many times a slow leader tries to hand its
// leadership over, one slow append after another.
const transferTries = 3

// slowDisk notes slow appends to the Raft log of n.
type slowDisk struct {
	n *Node

	transferring atomic.Bool // a handover is under way

	mu     sync.Mutex
	logged time.Time // when a follower last said so
}

// appended is told how long each append to the Raft log took (also those
// that failed: a write that fails after seconds is as slow).
func (s *slowDisk) appended(d time.Duration) {
	n := s.n
	limit := max(n.cfg.ElectionTimeout, minSlowAppend)
	if d <= limit {
		return
	}
	n.metrics.SlowLogAppend()
	leader := n.raftSet.Load() && n.raft.State() == raft.Leader
	if !leader {
		s.mu.Lock()
		say := time.Since(s.logged) >= slowLogRepeat
		if say {
			s.logged = time.Now()
		}
		s.mu.Unlock()
		if say {
			n.log.Warn("slow disk: an append to the Raft log took longer than the election timeout", "took", d, "limit", limit, "dir", n.cfg.DataDir)
		}
		return
	}
	if !s.transferring.CompareAndSwap(false, true) {
		return
	}
	n.log.Warn("slow disk: an append to the Raft log took longer than the election timeout; handing the leadership to another server", "took", d, "limit", limit, "dir", n.cfg.DataDir)
	// Not from here: Raft's leader loop is the caller, and a transfer is
	// its to run once this append has returned. A transfer that times out
	// (the follower did not catch up within the election timeout) is tried
	// again, a few times, while this server still leads.
	go func() {
		defer s.transferring.Store(false)
		for range transferTries {
			err := n.raft.LeadershipTransfer().Error()
			if err == nil || n.ctx.Err() != nil || n.raft.State() != raft.Leader {
				return
			}
			n.log.Warn("slow disk: handing the leadership over failed", "err", err)
		}
	}()
}
