// SPDX-License-Identifier: MPL-2.0

package raft

// This file is coordd's addition to hashicorp/raft (FORK.md, patch part
// 9): a follower that sees its leader's connections close checks at once
// whether the leader is gone, and if it is, calls an election without
// waiting out the heartbeat timeout.

import (
	"context"
	"math/rand"
	"sort"
	"sync/atomic"
	"time"
)

// WithConnLoss is a transport that tells Raft when a connection on which a
// leader sent it AppendEntries closes, and can check whether a server
// still accepts connections. NetworkTransport is one.
type WithConnLoss interface {
	// SetConnLossHandler sets the function called, on the transport's
	// goroutine, when an inbound connection that carried AppendEntries
	// from the server id at addr closes (at its end or by an error; not
	// when this transport closes it).
	SetConnLossHandler(func(id ServerID, addr ServerAddress))
	// Probe opens a connection to the server id at addr and closes it: nil
	// means the server accepts connections.
	Probe(id ServerID, addr ServerAddress, timeout time.Duration) error
}

// ElectionCause says why a server became a candidate.
type ElectionCause uint8

const (
	// ElectionHeartbeatTimeout: a follower heard nothing from a leader for
	// the heartbeat timeout.
	ElectionHeartbeatTimeout ElectionCause = iota
	// ElectionLeaderGone: the leader's connections to this follower closed
	// and a new one to the leader was refused (or timed out).
	ElectionLeaderGone
	// ElectionLeadershipTransfer: the leader asked this server to take
	// over (TimeoutNow).
	ElectionLeadershipTransfer
)

func (c ElectionCause) String() string {
	switch c {
	case ElectionHeartbeatTimeout:
		return "heartbeat timeout"
	case ElectionLeaderGone:
		return "leader gone"
	case ElectionLeadershipTransfer:
		return "leadership transfer"
	}
	return "unknown"
}

// ElectionObservation is sent to observers when this server becomes a
// candidate, with the reason and the leader it last knew.
type ElectionObservation struct {
	Cause          ElectionCause
	LastLeaderAddr ServerAddress
	LastLeaderID   ServerID
}

// leaderGoneEvent is a probe's finding that the leader refuses connections.
type leaderGoneEvent struct {
	id   ServerID
	addr ServerAddress
	err  error
}

// leaderLoss is a follower's watch on its leader's connections.
type leaderLoss struct {
	trans   WithConnLoss // nil: the transport cannot tell
	probing atomic.Bool  // a probe runs
	gone    chan leaderGoneEvent

	// The main loop's alone: an election is pending (timer armed) for the
	// leader lastID at lastAddr, found gone when the last contact was
	// contact.
	timer    <-chan time.Time
	pending  bool
	lastID   ServerID
	lastAddr ServerAddress
	contact  time.Time
	// retryUntil: a candidate that called its election because the leader
	// was gone asks for the pre-vote again soon after a failed one, until
	// then.
	retryUntil time.Time
}

// initLeaderLoss hooks the follower's watch on its leader's connections to
// the transport, if it can tell.
func (r *Raft) initLeaderLoss(trans Transport) {
	r.leaderLoss.gone = make(chan leaderGoneEvent, 4)
	if t, ok := trans.(WithConnLoss); ok {
		r.leaderLoss.trans = t
		t.SetConnLossHandler(r.leaderConnClosed)
	}
}

// leaderConnClosed is the transport's report that a connection from the
// server id at addr closed. If that server is this follower's leader, it
// probes it: a leader that still accepts connections closed one of its own
// accord (its pool was full, a pipeline ended, it stepped down) and is
// left alone. One that does not is gone (its process died: every
// connection and its listener closed at once), which the main loop learns.
// A probe is at most half a heartbeat timeout, and one runs at a time.
func (r *Raft) leaderConnClosed(id ServerID, addr ServerAddress) {
	if r.getState() != Follower {
		return
	}
	leaderAddr, leaderID := r.LeaderWithID()
	if leaderAddr == "" || leaderAddr != addr || (id != "" && leaderID != id) {
		return
	}
	if !r.leaderLoss.probing.CompareAndSwap(false, true) {
		return
	}
	timeout := r.config().HeartbeatTimeout / 2
	go func() {
		err := r.leaderLoss.trans.Probe(id, addr, timeout)
		// Another connection's end may come once the main loop has taken
		// this finding (after the last AppendEntries on it was answered):
		// it must be able to probe again.
		r.leaderLoss.probing.Store(false)
		if err == nil {
			r.logger.Debug("a connection from the leader closed; the leader accepts new ones", "leader-id", id)
			return
		}
		select {
		case r.leaderLoss.gone <- leaderGoneEvent{id: id, addr: addr, err: err}:
		default: // findings are queued already
		}
	}()
}

// resetLeaderLoss forgets a pending election (on entering the follower
// state).
func (r *Raft) resetLeaderLoss() {
	r.leaderLoss.pending = false
	r.leaderLoss.timer = nil
}

// leaderGone handles a probe's finding that the leader refuses connections
// (main loop, follower state). If it is still the leader this follower
// knows, the follower forgets it, so that it grants another's pre-vote and
// vote at once, and arms its own election after leaderGoneDelay.
func (r *Raft) leaderGone(ev leaderGoneEvent) {
	leaderAddr, leaderID := r.LeaderWithID()
	if leaderAddr != ev.addr || (ev.id != "" && leaderID != ev.id) {
		return
	}
	r.setLeader("", "")
	delay := r.leaderGoneDelay(ev.id)
	r.leaderLoss.pending = true
	r.leaderLoss.lastID, r.leaderLoss.lastAddr = ev.id, ev.addr
	r.leaderLoss.contact = r.LastContact()
	r.leaderLoss.timer = time.After(delay)
	r.logger.Info("the leader's connections closed and it accepts no new one",
		"leader-id", ev.id, "leader-address", ev.addr, "error", ev.err, "election-in", delay)
}

// leaderGoneElect reports whether the election armed by leaderGone should
// start now (main loop, follower state): not if meanwhile a leader made
// contact or this follower granted a vote (both set the last contact), so
// that the followers of a dead leader do not compete once one of them has
// started. If the leader that made contact is the lost one, it is probed
// again.
func (r *Raft) leaderGoneElect() (bool, ServerAddress, ServerID) {
	l := &r.leaderLoss
	l.timer = nil
	if !l.pending {
		return false, "", ""
	}
	l.pending = false
	addr, id := r.LeaderWithID()
	if addr == l.lastAddr && (id == "" || id == l.lastID) {
		// The lost leader made contact again: an AppendEntries it sent
		// before its connections closed, answered after the finding, or
		// it lives. Probe it again; a refusal arms a new election.
		r.leaderConnClosed(l.lastID, l.lastAddr)
		return false, "", ""
	}
	if addr != "" || r.LastContact().After(l.contact) {
		r.logger.Debug("not calling an election: another server took over", "leader-address", addr)
		return false, "", ""
	}
	return true, l.lastAddr, l.lastID
}

// leaderGoneDelay is how long a follower that found its leader gone waits
// before it calls an election: a twentieth of the heartbeat timeout, so
// that the other followers, which saw the same connections close, have
// found the leader gone too and grant the pre-vote; then a quarter of the
// heartbeat timeout more for each voter that comes before this one in the
// order of their ids (the lost leader left out). The first calls its
// election alone, and the next calls one only if no leader appeared and no
// vote was asked of it meanwhile: no split vote, and no waiting out an
// election timeout after one.
func (r *Raft) leaderGoneDelay(lost ServerID) time.Duration {
	hb := r.config().HeartbeatTimeout
	var ids []ServerID
	for _, s := range r.configurations.latest.Servers {
		if s.Suffrage == Voter && s.ID != lost {
			ids = append(ids, s.ID)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	rank := sort.Search(len(ids), func(i int) bool { return ids[i] >= r.localID })
	return hb/20 + time.Duration(rank)*(hb/4)
}

// SetConnLossHandler implements WithConnLoss.
func (n *NetworkTransport) SetConnLossHandler(cb func(id ServerID, addr ServerAddress)) {
	n.connLossFnLock.Lock()
	defer n.connLossFnLock.Unlock()
	n.connLossFn = cb
}

// Probe implements WithConnLoss: it dials the server as an RPC would, and
// closes the connection at once.
func (n *NetworkTransport) Probe(id ServerID, addr ServerAddress, timeout time.Duration) error {
	conn, err := n.stream.Dial(n.getProviderAddressOrFallback(id, addr), timeout)
	if err != nil {
		return err
	}
	return conn.Close()
}

// connClosed tells the handler that an inbound connection closed, if it
// carried AppendEntries (from is their header) and this transport did not
// close it itself.
func (n *NetworkTransport) connClosed(connCtx context.Context, from RPCHeader) {
	if len(from.Addr) == 0 || connCtx.Err() != nil || n.IsShutdown() {
		return
	}
	n.connLossFnLock.Lock()
	fn := n.connLossFn
	n.connLossFnLock.Unlock()
	if fn != nil {
		fn(ServerID(from.ID), n.DecodePeer(from.Addr))
	}
}

// leaderGoneElecting notes that this server became a candidate for cause
// (main loop): for a leader gone, a failed pre-vote is asked again soon,
// for a heartbeat timeout.
func (r *Raft) leaderGoneElecting(cause ElectionCause) {
	r.leaderLoss.retryUntil = time.Time{}
	if cause == ElectionLeaderGone {
		r.leaderLoss.retryUntil = time.Now().Add(r.config().HeartbeatTimeout)
	}
}

// leaderGoneRetry is when a candidate whose pre-vote failed asks for it
// again (main loop, candidate state): nil (at the election timeout, as
// upstream) unless the candidate called its election because the leader
// was gone, within a heartbeat timeout of that. Then it is a tenth of a
// heartbeat timeout later, and up to as much again at random: a follower
// that also saw the leader's connections close but had not found it gone
// yet refused the first pre-vote, and grants the next; one whose log is
// longer refused it, and has called its own election meanwhile or grants
// the next vote. A pre-vote changes no term, so asking again disturbs no
// one; a leader that is not gone makes the candidate a follower with its
// next heartbeat.
func (r *Raft) leaderGoneRetry() <-chan time.Time {
	if time.Now().After(r.leaderLoss.retryUntil) {
		return nil
	}
	d := r.config().HeartbeatTimeout / 10
	return time.After(d + time.Duration(rand.Int63n(int64(d)+1)))
}
