package bench

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

// fakeProtocol opens fake sessions: place chooses the server of the k-th
// open (0, 1, ...) among the servers offered (it may block); an open fails
// with fail once k reaches failAt (when set).
type fakeProtocol struct {
	place  func(k int, servers []string) string
	fail   error
	failAt int

	mu             sync.Mutex
	opened, closed int
}

func (p *fakeProtocol) open(_ context.Context, servers []string) (session, error) {
	p.mu.Lock()
	if p.fail != nil && p.opened >= p.failAt {
		p.mu.Unlock()
		return nil, p.fail
	}
	k := p.opened
	p.opened++
	p.mu.Unlock()
	return &fakeSession{p: p, addr: p.place(k, servers)}, nil
}

func (p *fakeProtocol) admin(ctx context.Context, servers []string) (session, error) {
	return p.open(ctx, servers)
}

func (p *fakeProtocol) close() {}

// fakeSession is on addr; only server, close, losses (lost) and exists
// (existsErr) work.
type fakeSession struct {
	session
	p         *fakeProtocol
	addr      string
	closed    bool
	lost      []sessionLoss
	existsErr error
}

func (s *fakeSession) losses() []sessionLoss {
	l := s.lost
	s.lost = nil
	return l
}

func (s *fakeSession) exists(context.Context, string) error { return s.existsErr }

func (s *fakeSession) server() string { return s.addr }

func (s *fakeSession) close(context.Context) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.closed++
	s.closed = true
	return nil
}

func fakeBench(p protocol, servers ...string) *Bench {
	return &Bench{ctx: context.Background(), proto: p, cfg: Config{Servers: servers, Timeout: time.Second}}
}

// TestConnectBalancedPinned: sessions that stay on the first server
// offered (ZooKeeper's) are spread i modulo the servers at once.
func TestConnectBalancedPinned(t *testing.T) {
	p := &fakeProtocol{place: func(_ int, servers []string) string { return servers[0] }}
	b := fakeBench(p, "a", "b", "c")
	var recorded int
	sessions, spread, err := b.connectBalanced(7, func(time.Duration) { recorded++ })
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sessions {
		if want := b.cfg.Servers[i%3]; s.server() != want {
			t.Errorf("session %d on %s, want %s", i, s.server(), want)
		}
	}
	if want := map[string]int{"a": 3, "b": 2, "c": 2}; !reflect.DeepEqual(spread, want) {
		t.Errorf("spread %v, want %v", spread, want)
	}
	if p.opened != 7 || p.closed != 0 || recorded != 7 {
		t.Errorf("%d opened, %d closed, %d recorded; want 7, 0, 7", p.opened, p.closed, recorded)
	}
}

// TestConnectBalancedRetries: a session that lands on a server holding
// its share already is closed and opened again, until the spread is even;
// one that keeps landing there is kept after connectTries.
func TestConnectBalancedRetries(t *testing.T) {
	// Sessions 0 and 2 are offered a first and stay there. Sessions 1 and 3
	// are offered b first, but the first two opens offered b land on a,
	// once a has its share (both of a's sessions recorded as kept).
	aFull := make(chan struct{})
	var mu sync.Mutex
	offeredB, kept := 0, 0
	p := &fakeProtocol{place: func(_ int, servers []string) string {
		if servers[0] == "a" {
			return "a"
		}
		mu.Lock()
		offeredB++
		misplaced := offeredB <= 2
		mu.Unlock()
		if !misplaced {
			return "b"
		}
		<-aFull
		return "a"
	}}
	b := fakeBench(p, "a", "b")
	// record is called under the loop's lock as each session is kept.
	sessions, spread, err := b.connectBalanced(4, func(time.Duration) {
		if kept++; kept == 2 {
			close(aFull)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"a": 2, "b": 2}; !reflect.DeepEqual(spread, want) {
		t.Errorf("spread %v, want %v", spread, want)
	}
	for i, s := range sessions {
		if want := []string{"a", "b"}[i%2]; s.server() != want || s.(*fakeSession).closed {
			t.Errorf("session %d on %s (closed %v), want open on %s", i, s.server(), s.(*fakeSession).closed, want)
		}
	}
	if p.opened != 6 || p.closed != 2 {
		t.Errorf("%d opened, %d closed: want the two misplaced ones closed and opened again", p.opened, p.closed)
	}

	// All on a: the quota cannot be met; a session is kept after
	// connectTries opens.
	p = &fakeProtocol{place: func(int, []string) string { return "a" }}
	b = fakeBench(p, "a", "b")
	if _, spread, err = b.connectBalanced(4, nil); err != nil || spread["a"] != 4 {
		t.Fatalf("spread %v (%v), want all 4 on a", spread, err)
	}
	if want := 2 + 2*connectTries; p.opened != want || p.closed != want-4 {
		t.Errorf("%d opened, %d closed; want %d and %d", p.opened, p.closed, want, want-4)
	}
}

// TestConnectBalancedFails: when a session cannot be opened the loop
// returns that error and closes every session it opened.
func TestConnectBalancedFails(t *testing.T) {
	refused := errors.New("cannot connect to b: connection refused")
	p := &fakeProtocol{place: func(_ int, servers []string) string { return servers[0] }, fail: refused, failAt: 5}
	b := fakeBench(p, "a", "b", "c")
	sessions, _, err := b.connectBalanced(8, nil)
	if !errors.Is(err, refused) || sessions != nil {
		t.Fatalf("%v, %v; want the open's error and no sessions", sessions, err)
	}
	if p.opened != 5 || p.closed != 5 {
		t.Errorf("%d opened, %d closed; want every opened session closed", p.opened, p.closed)
	}
}
