package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
)

// countingMeter records what the engine tells its Meter.
type countingMeter struct {
	mu       sync.Mutex
	received int
	sent     int
	answered []Op
}

func (m *countingMeter) Received()  { m.mu.Lock(); m.received++; m.mu.Unlock() }
func (m *countingMeter) Sent(n int) { m.mu.Lock(); m.sent += n; m.mu.Unlock() }
func (m *countingMeter) Answered(op Op, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d < 0 {
		panic("negative latency")
	}
	m.answered = append(m.answered, op)
}

func (m *countingMeter) counts() (int, int, []Op) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.received, m.sent, slices.Clone(m.answered)
}

// TestMeter: the engine counts every request received (the connect
// included), every message handed to the front-end, and each request's
// answer with its operation; a request is outstanding from its arrival
// until its reply is queued, or until its session ends.
func TestMeter(t *testing.T) {
	f := fsm.New(fsm.Options{})
	hc := &heldCluster{f: f, cmds: make(chan *cmdpb.Command, 16)}
	m := &countingMeter{}
	e := New(Config{ServerID: "A", FSM: f, Cluster: hc, Tick: 200 * time.Millisecond, Meter: m,
		MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: 4 * time.Second})
	f.SetObserver(e)
	pw := []byte("0123456789abcdef")
	hc.apply(t, &cmdpb.Command{Cmd: &cmdpb.Command_OpenSession{OpenSession: &cmdpb.OpenSession{TimeoutMs: 4000, Password: pw, Server: "A"}}})
	s, err := e.Connect(context.Background(), ConnectRequest{SessionID: 1, Password: pw, TimeoutMs: 4000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Detach()

	s.Submit(&Request{Xid: 1, Op: OpGetData, Path: "/"})
	s.Submit(&Request{Xid: 2, LowestPendingXid: 2, Op: OpCreate, Path: "/x"})
	s.Submit(&Request{Xid: 3, Op: OpExists, Path: "/x"}) // waits behind the write
	s.Reject(&Request{Xid: 4, Op: OpSetACL}, MarshallingError, "bad")
	if got := e.Outstanding(); got != 3 {
		t.Fatalf("outstanding with a write and what follows it pending: %d, want 3", got)
	}
	if _, _, ops := m.counts(); !slices.Equal(ops, []Op{OpGetData}) {
		t.Fatalf("answered before the write applied: %v", ops)
	}
	hc.apply(t, hc.next(t))
	if got := e.Outstanding(); got != 0 {
		t.Fatalf("outstanding once the write applied: %d, want 0", got)
	}
	received, _, ops := m.counts()
	if received != 5 || !slices.Equal(ops, []Op{OpGetData, OpCreate, OpExists, OpSetACL}) {
		t.Fatalf("received %d (want 5: the connect and four requests), answered %v", received, ops)
	}

	// What the front-end takes is counted as sent: the connect's answer and
	// the four replies.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	taken := 0
	for taken < 5 {
		batch, ended := s.Next(ctx)
		taken += len(batch)
		if ended {
			t.Fatalf("the session ended after %d messages", taken)
		}
	}
	if _, sent, _ := m.counts(); sent != taken {
		t.Fatalf("sent %d, the front-end took %d", sent, taken)
	}

	// A write that will never be answered here stops being outstanding
	// when its session's connection ends.
	s.Submit(&Request{Xid: 5, LowestPendingXid: 5, Op: OpCreate, Path: "/y"})
	hc.next(t)
	if got := e.Outstanding(); got != 1 {
		t.Fatalf("outstanding with a write pending: %d, want 1", got)
	}
	s.End(nil)
	if got := e.Outstanding(); got != 0 {
		t.Fatalf("outstanding once the session ended: %d, want 0", got)
	}
	s.Submit(&Request{Xid: 6, Op: OpGetData, Path: "/"})
	if got := e.Outstanding(); got != 0 {
		t.Fatalf("a request of an ended session counts as outstanding: %d", got)
	}
}
