package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/rpc/peerpb"
)

// The read index of a sync (see DESIGN.md, "Read index").

// leaderReadIndex is the read index as the leader computes it (Raft's
// ReadIndex, section 6.4 of Ongaro's thesis): the commit index when the
// request arrived, once a majority has confirmed that no other leader
// existed by then. Every write acknowledged before the request is at or
// below it: it was committed either in this term (so this leader counted it)
// or in an earlier one (so this term's no-op, which the leader waits for
// before serving reads, committed after it). No log entry is written and no
// disk is touched; concurrent requests share one round.
func (n *Node) leaderReadIndex(ctx context.Context) (int64, error) {
	if n.raft.State() != raft.Leader {
		return 0, errNoLeader
	}
	if err := n.leader.waitReadable(ctx); err != nil {
		return 0, fmt.Errorf("rpc: read index: %w", err)
	}
	idx, err := n.verified.do(ctx)
	if err != nil {
		return 0, fmt.Errorf("rpc: read index: %w", err)
	}
	return idx, nil
}

// leaderReadIndexFor is leaderReadIndex for a follower that reported its
// term, read after the reads it asks for began. When that term is no later
// than the leader's, the follower counts towards the majority confirming the
// leader's term; in a 3-server cluster the two of them are a majority, and
// the read index needs no round at all.
func (n *Node) leaderReadIndexFor(ctx context.Context, id string, term uint64) (int64, error) {
	if n.raft.State() != raft.Leader {
		return 0, errNoLeader
	}
	if err := n.leader.waitReadable(ctx); err != nil {
		return 0, fmt.Errorf("rpc: read index: %w", err)
	}
	own := n.leader.readableTerm()
	if id == "" || id == n.cfg.ID || term > own {
		return n.leaderReadIndex(ctx)
	}
	voters, isVoter, err := n.voters(id)
	if err != nil {
		return 0, fmt.Errorf("rpc: read index: %w", err)
	}
	if need := len(voters)/2 + 1; !isVoter || need > 2 {
		return n.leaderReadIndex(ctx) // a round with the other voters
	}
	idx, err := n.commitIndexIn(ctx, own, func(context.Context, uint64) error { return nil })
	if err != nil {
		return 0, fmt.Errorf("rpc: read index: %w", err)
	}
	return idx, nil
}

// verifyCommitIndex is one read-index round on the leader: the commit index,
// then a majority's confirmation that this server's term is still current.
//
// Every index after this term's no-op is one the FSM applies (coordd
// appends no barriers, and hashicorp/raft's own no-op comes before ours),
// so a server that waits for its FSM to reach the index has applied
// everything up to it.
func (n *Node) verifyCommitIndex(ctx context.Context) (int64, error) {
	return n.commitIndexIn(ctx, n.leader.readableTerm(), n.confirmTerm)
}

// commitIndexIn reads the commit index while this server leads in term
// (whose no-op has applied here), has confirm establish that term is still
// current, and returns the read index: the commit index lowered past
// trailing no-ops once this server applied it.
func (n *Node) commitIndexIn(ctx context.Context, term uint64, confirm func(context.Context, uint64) error) (int64, error) {
	if term == 0 || term != n.raft.CurrentTerm() {
		return 0, errNotReadable
	}
	idx := int64(n.raft.CommitIndex())
	if err := confirm(ctx, term); err != nil {
		return 0, err
	}
	// Still the term whose no-op applied: the commit index was read in it,
	// after the no-op, while this server led.
	if n.raft.CurrentTerm() != term {
		return 0, errNoLeader
	}
	// Lower the index past trailing no-ops (the term's opening no-ops):
	// the state is the same, and a follower that applied the last change
	// need not wait for them.
	if !n.fsm.WaitApplied(ctx.Done(), idx) {
		return 0, ctx.Err()
	}
	return n.fsm.LastChange(), nil
}

// errNotReadable: this leader's term has not yet applied its no-op.
var errNotReadable = errors.New("rpc: the leader is not yet ready to serve reads")

// errNoQuorum: too few voters confirmed the leader's term in time.
var errNoQuorum = errors.New("rpc: a majority did not confirm the leader's term")

// confirmTerm returns nil once a majority of the voters, this server
// included, reported a current term no later than term, each asked after
// the call began. A leader of a later term needs a majority that moved to
// that term, and one of them would be among these: so no later leader
// existed when the call began, and nothing was committed without this
// leader. (hashicorp/raft's VerifyLeader would do the same round, but
// counts any successful response that arrives after the request was
// registered, including one to an AppendEntries sent before it: a leader
// paused with such a response in flight could confirm itself on stale
// evidence. Each of these calls is made after the read began.)
func (n *Node) confirmTerm(ctx context.Context, term uint64) error {
	voters, self, err := n.voters(n.cfg.ID)
	if err != nil {
		return err
	}
	var others []raft.Server
	have := 0
	if self {
		have++
	}
	for _, s := range voters {
		if string(s.ID) != n.cfg.ID {
			others = append(others, s)
		}
	}
	need := len(voters)/2 + 1
	if have >= need {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ElectionTimeout)
	defer cancel()
	yes := make(chan bool, len(others))
	for _, s := range others {
		go func() {
			a, err := n.peers.asker(string(s.Address))
			if err != nil {
				yes <- false
				return
			}
			t, err := a.term(ctx)
			yes <- err == nil && t <= term
		}()
	}
	for range others {
		if <-yes {
			if have++; have >= need {
				return nil
			}
		}
	}
	return errNoQuorum
}

// voters returns the voters of the latest configuration and whether id is
// one of them.
func (n *Node) voters(id string) ([]raft.Server, bool, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, false, err
	}
	var voters []raft.Server
	found := false
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s)
			found = found || string(s.ID) == id
		}
	}
	return voters, found, nil
}

// askLeaderReadIndex is one read-index round on a follower: a ReadIndex call
// to the leader.
func (n *Node) askLeaderReadIndex(ctx context.Context) (int64, error) {
	a, err := n.peers.leaderAsker()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	// The term is read now, after every read this round serves began (see
	// leaderReadIndexFor).
	idx, err := a.readIndex(ctx, &peerpb.ReadIndexRequest{ServerId: n.cfg.ID, Term: n.raft.CurrentTerm()})
	if err != nil {
		return 0, err
	}
	return int64(idx), nil
}

// readIndex returns an index this server must apply so that its next read
// reflects every write committed before the call.
func (n *Node) readIndex(done <-chan struct{}) (int64, error) {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		var idx int64
		var err error
		if n.raft.State() == raft.Leader {
			idx, err = n.leaderReadIndex(ctx)
		} else {
			idx, err = n.asked.do(ctx)
		}
		if err == nil {
			return idx, nil
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// roundGroup shares rounds of an index-returning operation among the
// callers that arrive while they are not yet running: a caller joins the
// next round to start, never one already under way, so the round's result
// was computed after the caller asked. At most maxRounds run at a time; a
// caller that finds fewer running starts one at once. It is how concurrent
// syncs share a leader's confirmation round, and a follower's call to the
// leader.
type roundGroup struct {
	ctx   context.Context // ends every round when the node stops
	round func(ctx context.Context) (int64, error)
	// observe, if set, is told each round's duration and error (metrics).
	observe func(d time.Duration, err error)

	mu      sync.Mutex
	running int
	next    *roundResult // the round the next callers join, nil if none yet
}

// maxRounds bounds the rounds of a group running at once. Two let a caller
// that arrives during a round start its own instead of waiting for that one
// to end (about half a round less latency), while a burst still shares.
const maxRounds = 2

type roundResult struct {
	done    chan struct{}
	idx     int64
	err     error
	callers int // joined so far, under roundGroup.mu
}

func newRoundGroup(ctx context.Context, round func(context.Context) (int64, error)) *roundGroup {
	return &roundGroup{ctx: ctx, round: round}
}

// do joins the next round and returns its result, or ctx's error.
func (g *roundGroup) do(ctx context.Context) (int64, error) {
	g.mu.Lock()
	if g.next == nil {
		g.next = &roundResult{done: make(chan struct{})}
	}
	r := g.next
	r.callers++
	if g.running < maxRounds {
		g.startLocked()
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.idx, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (g *roundGroup) startLocked() {
	g.running++
	r := g.next
	g.next = nil
	go func() {
		start := time.Now()
		r.idx, r.err = g.round(g.ctx)
		if g.observe != nil {
			g.observe(time.Since(start), r.err)
		}
		close(r.done)
		g.mu.Lock()
		g.running--
		if g.next != nil {
			g.startLocked()
		}
		g.mu.Unlock()
	}()
}
