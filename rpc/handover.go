package rpc

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// handOver, on the leader, hands leadership to the most up-to-date
// follower before the server stops (a SIGTERM, a rolling restart's step).
// The others then wait only for the transfer (the follower catches up, is
// told to call an election at once and wins it without a pre-vote), not
// for the leader to be found gone and an election after it; writes meanwhile
// are refused as in transfer and sent again to the new leader by the server
// that forwarded them, so no client of another server sees one fail. This
// server keeps serving its own clients during the transfer, as a follower
// after it, until Close ends their connections and they move.
//
// It waits at most twice the election timeout (hashicorp/raft gives up on
// a transfer after one, or after one more if the follower did not take
// over); a transfer that fails (no follower reachable) is logged, and the
// server stops anyway.
func (n *Node) handOver() {
	if !n.raftSet.Load() || n.raft.State() != raft.Leader || !n.hasOtherVoter() {
		return
	}
	start := time.Now()
	f := n.raft.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * n.cfg.ElectionTimeout):
		err = errHandOverTimeout
	}
	_, id := n.raft.LeaderWithID()
	if err != nil {
		n.log.Warn("stopping without handing leadership over", "err", err, "after", time.Since(start))
		return
	}
	n.log.Info("handed leadership over before stopping", "leader", id, "took", time.Since(start))
}

// errHandOverTimeout: the transfer did not end within twice the election
// timeout.
var errHandOverTimeout = errors.New("rpc: leadership transfer did not end in time")

// hasOtherVoter reports whether the configuration has a voter besides this
// server.
func (n *Node) hasOtherVoter() bool {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			return true
		}
	}
	return false
}
