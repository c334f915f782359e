package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
)

// unconfirmedCluster is a logCluster whose leader fails to have its term
// confirmed for the first rounds of touches (a slow majority, a round
// that timed out), then confirms.
type unconfirmedCluster struct {
	*logCluster
	mu          sync.Mutex
	unconfirmed int       // rounds still to answer "recorded, not confirmed"
	rounds      [][]int64 // the ids of every round passed
}

func (c *unconfirmedCluster) PassTouches(_ context.Context, ids []int64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rounds = append(c.rounds, ids)
	if c.unconfirmed > 0 {
		c.unconfirmed--
		return false, nil
	}
	return true, nil
}

// TestUnconfirmedTouchesAreVouchedForLater: a round of touches that the
// leader recorded but could not have confirmed is passed again with the
// next round, and the session is vouched for once a round is confirmed.
// Before, an unconfirmed round was dropped: a client that sent nothing more
// (an idle client pings only every few vouch intervals) was never vouched
// for that request, and suspended its session while the leader had it.
func TestUnconfirmedTouchesAreVouchedForLater(t *testing.T) {
	f := fsm.New(fsm.Options{})
	c := &unconfirmedCluster{logCluster: newLogCluster(t, f), unconfirmed: 2}
	e := New(Config{ServerID: "1", FSM: f, Cluster: c, Tick: 20 * time.Millisecond,
		MinSessionTimeout: 40 * time.Millisecond, MaxSessionTimeout: 10 * time.Second})
	f.SetObserver(e)
	s := connectTest(t, e, ConnectRequest{Vouches: true})
	s.ok(Request{Op: OpPing})
	xid := s.xid

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.RunTouches(ctx) }()
	defer func() { cancel(); <-done }()
	for {
		m := s.next()
		if m.Final != nil {
			t.Fatalf("the session ended: %+v", m.Final)
		}
		if m.Vouch >= xid {
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rounds) < 3 {
		t.Fatalf("vouched after %d rounds, want the third (two unconfirmed first)", len(c.rounds))
	}
	for i, ids := range c.rounds[:3] {
		if len(ids) != 1 || ids[0] != s.s.ID() {
			t.Fatalf("round %d passed %v, want the session %d again", i+1, ids, s.s.ID())
		}
	}
}
