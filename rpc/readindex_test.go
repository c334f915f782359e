package rpc

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRoundGroupJoinsOnlyRoundsNotYetStarted: a caller that arrives while a
// round runs never gets that round's result (it was computed, at least in
// part, before the caller asked, so it could miss a write the caller saw
// acknowledged); it gets the next round's, which it shares with everyone
// else who arrived meanwhile.
func TestRoundGroupJoinsOnlyRoundsNotYetStarted(t *testing.T) {
	started := make(chan int64, 4)
	release := make(chan struct{})
	var rounds int64
	g := newRoundGroup(context.Background(), func(context.Context) (int64, error) {
		rounds++
		started <- rounds
		<-release
		return rounds * 100, nil
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
	// Two callers arrive while round 1 runs: both wait for round 2.
	second, third := call(), call()
	waitFor(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.next != nil
	})
	release <- struct{}{} // round 1 ends
	if r := <-first; r.err != nil || r.idx != 100 {
		t.Fatalf("first caller got %+v, want round 1's 100", r)
	}
	if r := <-started; r != 2 {
		t.Fatalf("second round is %d", r)
	}
	// Both callers are still waiting on round 2 (round 1's result is not theirs).
	select {
	case r := <-second:
		t.Fatalf("second caller got %+v before round 2 ended", r)
	case r := <-third:
		t.Fatalf("third caller got %+v before round 2 ended", r)
	default:
	}
	release <- struct{}{}
	for _, ch := range []chan res{second, third} {
		if r := <-ch; r.err != nil || r.idx != 200 {
			t.Fatalf("caller got %+v, want round 2's 200", r)
		}
	}
	if rounds != 2 {
		t.Fatalf("%d rounds for three callers, want 2", rounds)
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
		return g.running
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

// threeNodes starts a 3-node cluster and returns its nodes and leader.
func threeNodes(t *testing.T) ([]*Node, *Node) {
	t.Helper()
	cfgs := []Config{testConfig(t, "1"), testConfig(t, "2"), testConfig(t, "3")}
	var peers []Peer
	for _, c := range cfgs {
		peers = append(peers, Peer{ID: c.ID, Addr: c.PeerAddr})
	}
	var nodes []*Node
	for _, c := range cfgs {
		c.Peers = peers
		n, err := NewNode(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	return nodes, waitLeader(t, nodes...)
}

// TestConfirmTermNeedsAMajorityInTheTerm: the leader's read-index round
// succeeds only when a majority, asked after the round began, is still in
// its term: not for an older term (the followers have moved on), and not
// once the followers are gone, even while Raft still calls it leader.
func TestConfirmTermNeedsAMajorityInTheTerm(t *testing.T) {
	nodes, leader := threeNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	waitFor(t, func() bool { return leader.leader.readableTerm() == leader.raft.CurrentTerm() })
	term := leader.raft.CurrentTerm()
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
