package rpc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRoundGroupJoinsOnlyRoundsNotYetStarted: a caller that arrives while a
// round runs never gets that round's result (it was computed, at least in
// part, before the caller asked, so it could miss a write the caller saw
// acknowledged); it gets a later round's. While fewer than maxRounds run, a
// caller starts its own round at once; beyond that, callers share the next.
func TestRoundGroupJoinsOnlyRoundsNotYetStarted(t *testing.T) {
	started := make(chan int64, 4)
	release := make(chan struct{})
	var rounds atomic.Int64
	g := newRoundGroup(context.Background(), func(context.Context) (int64, error) {
		n := rounds.Add(1)
		started <- n
		<-release
		return n * 100, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type res struct {
		idx int64
		err error
	}
	call := func() chan res {
		ch := make(chan res, 1)
		go func() {
			idx, err := g.do(ctx)
			ch <- res{idx, err}
		}()
		return ch
	}
	first := call()
	if r := <-started; r != 1 {
		t.Fatalf("first round is %d", r)
	}
	// A caller arriving while round 1 runs starts round 2 at once.
	second := call()
	if r := <-started; r != 2 {
		t.Fatalf("second round is %d", r)
	}
	// With maxRounds (2) running, two more callers share the next round.
	third, fourth := call(), call()
	// Both must have joined the pending round before a slot frees; the one
	// arriving after round 3 started would wait for a round 4.
	waitFor(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.next != nil && g.next.callers == 2
	})
	select {
	case r := <-started:
		t.Fatalf("round %d started with %d running", r, maxRounds)
	default:
	}
	release <- struct{}{} // one of rounds 1 and 2 ends; round 3 starts
	if r := <-started; r != 3 {
		t.Fatalf("third round is %d", r)
	}
	release <- struct{}{}
	release <- struct{}{}
	// The first two callers had rounds 1 and 2 to themselves; the last two
	// shared round 3: none got a round that started before it asked.
	for i, want := range []int64{100, 200, 300, 300} {
		r := <-[]chan res{first, second, third, fourth}[i]
		if r.err != nil || r.idx != want {
			t.Fatalf("caller %d got %+v, want %d", i+1, r, want)
		}
	}
	if n := rounds.Load(); n != 3 {
		t.Fatalf("%d rounds for four callers, want 3", n)
	}
}

// TestRoundGroupCallerGivesUp: a caller whose context ends returns its error
// while the round goes on; the round's error reaches those still waiting.
func TestRoundGroupCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	boom := errors.New("boom")
	g := newRoundGroup(context.Background(), func(context.Context) (int64, error) {
		<-release
		return 0, boom
	})
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { _, err := g.do(ctx); gaveUp <- err }()
	waitFor(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.running > 0
	})
	waiting := make(chan error, 1)
	go func() { _, err := g.do(context.Background()); waiting <- err }()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v", err)
	}
	close(release)
	if err := <-waiting; !errors.Is(err, boom) {
		t.Fatalf("waiting caller got %v, want the round's error", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConfirmTermNeedsAMajorityInTheTerm: the leader's read-index round
// succeeds only when a majority, asked after the round began, is still in
// its term: not for an older term (the followers have moved on), and not
// once the followers are gone, even while Raft still calls it leader.
func TestConfirmTermNeedsAMajorityInTheTerm(t *testing.T) {
	nodes, leader, term := readableCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := leader.confirmTerm(ctx, term); err != nil {
		t.Fatalf("confirming the current term %d: %v", term, err)
	}
	if idx, err := leader.verifyCommitIndex(ctx); err != nil || idx < 1 {
		t.Fatalf("read-index round: %d, %v", idx, err)
	}
	if err := leader.confirmTerm(ctx, term-1); !errors.Is(err, errNoQuorum) {
		t.Fatalf("confirming the past term %d: %v, want errNoQuorum", term-1, err)
	}
	for _, n := range nodes {
		if n != leader {
			n.Close()
		}
	}
	if err := leader.confirmTerm(ctx, term); !errors.Is(err, errNoQuorum) {
		t.Fatalf("confirming with both followers gone: %v, want errNoQuorum", err)
	}
}

// TestReadIndexCountsTheAskingFollower: in a 3-server cluster a follower's
// ReadIndex call, carrying a term no later than the leader's, is the second
// confirmation the leader needs, so it is answered without asking anyone
// else (here the followers are gone by then: only the call's own evidence
// remains). A later term, or an id that is not a voter, gets no such credit.
func TestReadIndexCountsTheAskingFollower(t *testing.T) {
	nodes, leader, term := readableCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var follower string
	for _, n := range nodes {
		if n != leader {
			follower = n.ID()
			n.Close()
		}
	}
	if idx, err := leader.leaderReadIndexFor(ctx, follower, term); err != nil || idx < 1 {
		t.Fatalf("read index for follower %s in term %d: %d, %v", follower, term, idx, err)
	}
	if _, err := leader.leaderReadIndexFor(ctx, follower, term+1); !errors.Is(err, errNoQuorum) && !errors.Is(err, errNoLeader) {
		t.Fatalf("read index for a follower in a later term: %v, want no quorum", err)
	}
	if _, err := leader.leaderReadIndexFor(ctx, "not-a-voter", term); !errors.Is(err, errNoQuorum) && !errors.Is(err, errNoLeader) {
		t.Fatalf("read index for an unknown server: %v, want no quorum", err)
	}
}

// readableCluster starts a 3-node cluster and waits until its leader may
// serve read indexes; it returns the nodes, the leader and its term.
func readableCluster(t *testing.T) ([]*Node, *Node, uint64) {
	t.Helper()
	nodes, leader := threeNodes(t)
	waitFor(t, func() bool { return leader.leader.readableTerm() == leader.raft.CurrentTerm() })
	return nodes, leader, leader.raft.CurrentTerm()
}
