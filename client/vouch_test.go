package client

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/coordd/coordd/rpc/apipb"
)

// TestVouchClock: a vouch moves the confirmed time to the first send of
// the xid it names, never backwards; a vouch for an xid never sent, or
// already vouched for, changes nothing; when records are thinned, a vouch
// counts from a send no later than its own.
func TestVouchClock(t *testing.T) {
	var v vouchClock
	for xid := int64(1); xid <= 5; xid++ {
		v.record(xid, time.Duration(xid)*10*time.Millisecond)
	}
	v.record(3, time.Second) // a re-send: the first send counts
	steps := []struct {
		xid     int64
		advance bool
		want    time.Duration
	}{
		{3, true, 30 * time.Millisecond},
		{2, false, 30 * time.Millisecond}, // older
		{3, false, 30 * time.Millisecond}, // again
		{9, false, 30 * time.Millisecond}, // never sent
		{0, false, 30 * time.Millisecond},
		{5, true, 50 * time.Millisecond},
	}
	for _, s := range steps {
		if got := v.vouch(s.xid); got != s.advance || v.confirmed != s.want {
			t.Fatalf("vouch(%d): advanced %v, confirmed %v; want %v, %v", s.xid, got, v.confirmed, s.advance, s.want)
		}
	}
	if len(v.sent) != 0 {
		t.Fatalf("%d records left after vouching for every xid", len(v.sent))
	}

	// Far more sends than records: a vouch for any xid counts from a send
	// at or before its own, and the newest is never dropped.
	var w vouchClock
	const n = 5 * maxSentRecords
	for xid := int64(1); xid <= n; xid++ {
		w.record(xid, time.Duration(xid)*time.Millisecond)
	}
	if len(w.sent) > maxSentRecords {
		t.Fatalf("%d records kept, bound %d", len(w.sent), maxSentRecords)
	}
	for _, xid := range []int64{n / 3, n / 2, n - 1, n} {
		if w.vouch(xid) && w.confirmed > time.Duration(xid)*time.Millisecond {
			t.Fatalf("vouch(%d) confirmed %v, after the request was sent", xid, w.confirmed)
		}
	}
	if w.confirmed != n*time.Millisecond {
		t.Fatalf("vouch for the last xid confirmed %v, want %v", w.confirmed, n*time.Millisecond)
	}
}

// bubble is a set of fake servers on in-memory listeners, for tests in a
// synctest bubble, where time is fake and moves only when every goroutine
// waits: a request then reaches the server at the instant it was sent.
type bubble struct {
	t    *testing.T
	cl   *fakeCluster
	lis  map[string]*bufconn.Listener
	srvs []*fakeServer
}

func newBubble(t *testing.T) *bubble {
	return &bubble{t: t, cl: newFakeCluster(), lis: map[string]*bufconn.Listener{}}
}

// server starts a fake server that vouches every every, confirmDelay after
// taking its batch (every 0: it does not vouch).
func (b *bubble) server(name string, every, confirmDelay time.Duration) *fakeServer {
	l := bufconn.Listen(1 << 20)
	b.lis[name] = l
	s := b.cl.serve(name, l, "passthrough:///"+name, func(s *fakeServer) {
		s.vouchEvery, s.confirmDelay = every, confirmDelay
	})
	b.srvs = append(b.srvs, s)
	return s
}

// connect connects a client to servers, first to the first of them.
func (b *bubble) connect(timeout time.Duration, servers ...*fakeServer) *Client {
	b.t.Helper()
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.addr)
	}
	for _, s := range servers[1:] {
		s.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_UNAVAILABLE, "not yet" })
	}
	c, err := Connect(context.Background(), addrs, WithSessionTimeout(timeout), WithDialTimeout(time.Second),
		WithDialOptions(grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			l, ok := b.lis[addr]
			if !ok {
				return nil, fmt.Errorf("no server %q", addr)
			}
			return l.DialContext(ctx)
		})))
	if err != nil {
		b.t.Fatal(err)
	}
	for _, s := range servers[1:] {
		s.setRefuse(nil)
	}
	return c
}

// stop closes c and every server, so that the bubble's goroutines end.
func (b *bubble) stop(c *Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
	for _, s := range b.srvs {
		s.gs.Stop()
	}
}

// timedState is a state event and when it was reported.
type timedState struct {
	StateEvent
	at time.Time
}

// record collects c's state events with their times (exact in a bubble:
// the reader runs at the instant of the event).
func record(c *Client) func() []timedState {
	_, ch, stop := c.NotifyStates()
	var evs []timedState
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			evs = append(evs, timedState{ev, time.Now()})
		}
	}()
	return func() []timedState {
		stop()
		<-done
		return evs
	}
}

func statesOf(evs []timedState) []State {
	var out []State
	for _, e := range evs {
		out = append(out, e.State)
	}
	return out
}

// suspendBound is the moment the session must be suspended at, at the
// latest, after s's last vouch: when the vouched request was sent (here:
// received, the same instant in a bubble) + T - V - M.
func suspendBound(s *fakeServer, timeout time.Duration) time.Time {
	v := s.lastVouch()
	at, _ := s.receivedAt(v.xid)
	return s.start.Add(at + timeout - s.vouchEvery - max(timeout/50, 50*time.Millisecond))
}

// TestSuspendsAtTheBound: a server that stops vouching (cut off from its
// leader) but goes on answering: the session is suspended exactly at
// sent(last vouched request) + T - V - M, still connected; vouches coming
// back lift the suspension (StateReconnected).
func TestSuspendsAtTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 2 * time.Second
		b := newBubble(t)
		s := b.server("s1", 500*time.Millisecond, 0)
		c := b.connect(timeout, s)
		defer b.stop(c)
		if got := s.connectRequests()[0]; !got.Vouches {
			t.Fatal("the client did not ask for vouches")
		}
		states := record(c)
		time.Sleep(5 * time.Second)
		if c.State() != StateConnected {
			t.Fatalf("state %v after 5s of vouches", c.State())
		}
		s.noVouch.Store(true)
		time.Sleep(5 * time.Second)
		bound := suspendBound(s, timeout)
		if c.State() != StateSuspended {
			t.Fatalf("state %v 5s after the last vouch", c.State())
		}
		conf := c.Confirmation()
		if !conf.Vouched || !conf.Suspended || !conf.SuspendAt().Equal(bound) || conf.VouchInterval != 500*time.Millisecond || conf.Margin != 50*time.Millisecond {
			t.Fatalf("confirmation %+v, want suspended at %v", conf, bound)
		}
		s.noVouch.Store(false)
		time.Sleep(2 * time.Second)
		evs := states()
		if got := statesOf(evs); !slices.Equal(got, []State{StateSuspended, StateReconnected}) {
			t.Fatalf("states %v, want suspended then reconnected", got)
		}
		if !evs[0].at.Equal(bound) {
			t.Fatalf("suspended at %v, want exactly %v (sent + T - V - M)", evs[0].at.Sub(s.start), bound.Sub(s.start))
		}
		if evs[0].Err == nil || evs[0].Server != s.addr {
			t.Fatalf("suspension event %+v", evs[0].StateEvent)
		}
		if s.activeStreams() != 1 || s.acceptedStreams() != 1 {
			t.Fatalf("%d streams accepted: a suspension is not a disconnect", s.acceptedStreams())
		}
		if c.Confirmation().Suspended {
			t.Fatal("still suspended after a vouch")
		}
	})
}

// TestHealthySessionNeverSuspends: with the session timeout at its floor
// (2 ticks, 4 vouch intervals) and a leader round of half a vouch interval,
// an idle session pings often enough that it is never suspended (with the
// plain T/3 pings it would be, every few seconds); nor is a busy one.
func TestHealthySessionNeverSuspends(t *testing.T) {
	for _, tc := range []struct {
		timeout, every, confirm time.Duration
	}{
		{2 * time.Second, 500 * time.Millisecond, 300 * time.Millisecond},
		{4 * time.Second, 100 * time.Millisecond, 50 * time.Millisecond},
		{10 * time.Second, 500 * time.Millisecond, 400 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(tc.timeout), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBubble(t)
				s := b.server("s1", tc.every, tc.confirm)
				c := b.connect(tc.timeout, s)
				defer b.stop(c)
				states := record(c)
				time.Sleep(time.Minute)
				for i := range 50 {
					if err := c.Sync(context.Background(), "/"); err != nil {
						t.Fatal(err)
					}
					time.Sleep(time.Duration(i) * 37 * time.Millisecond)
				}
				if got := states(); len(got) != 0 {
					t.Fatalf("states %v of a healthy session (first: %v)", statesOf(got), got[0].Err)
				}
			})
		})
	}
}

// TestSuspensionSurvivesReconnect: moving to another server does not
// restart the clock (that server may be cut off too): the session is
// suspended at the bound of the first server's last vouch. Reconnecting
// while suspended reports StateSuspended again, with the new server; the
// first vouch lifts it.
func TestSuspensionSurvivesReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 3 * time.Second
		b := newBubble(t)
		a := b.server("a", 500*time.Millisecond, 0)
		z := b.server("z", 500*time.Millisecond, 0)
		z.noVouch.Store(true)
		c := b.connect(timeout, a, z)
		defer b.stop(c)
		states := record(c)
		time.Sleep(2 * time.Second)
		a.noVouch.Store(true)
		a.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_UNAVAILABLE, "cut off" })
		a.killStreams()
		time.Sleep(5 * time.Second)
		bound := suspendBound(a, timeout)
		evs := states()
		if got := statesOf(evs); !slices.Equal(got, []State{StateDisconnected, StateReconnected, StateSuspended}) {
			t.Fatalf("states %v", got)
		}
		if evs[1].Server != z.addr || evs[2].Server != z.addr || !evs[2].at.Equal(bound) {
			t.Fatalf("suspended on %s at %v, want on %s at %v", evs[2].Server, evs[2].at.Sub(a.start), z.addr, bound.Sub(a.start))
		}

		// Suspended, it moves back to a, which vouches again.
		states = record(c)
		a.noVouch.Store(false)
		z.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_UNAVAILABLE, "cut off" })
		z.killStreams()
		time.Sleep(100 * time.Millisecond)
		// Disconnected, and still suspended (what lockrecipe.NewSession
		// looks at).
		if st, conf := c.State(), c.Confirmation(); st != StateDisconnected || !conf.Suspended {
			t.Fatalf("state %v, suspended %v; want disconnected and suspended", st, conf.Suspended)
		}
		a.setRefuse(nil)
		time.Sleep(2 * time.Second)
		evs = states()
		if got := statesOf(evs); !slices.Equal(got, []State{StateDisconnected, StateSuspended, StateReconnected}) {
			t.Fatalf("states %v", got)
		}
		if evs[1].Server != a.addr || evs[2].Server != a.addr {
			t.Fatalf("events %+v", evs)
		}
		if d := evs[2].at.Sub(evs[1].at); d <= 0 || d > time.Second {
			t.Fatalf("suspension lifted %v after reconnecting, vouch interval 500ms", d)
		}
	})
}

// TestVouchCountsFromFirstSend: a request sent on one stream and re-sent
// on another counts from its first send, the earliest the servers could
// have heard of it (a server vouches for the highest xid of the session it
// received, whichever stream brought it).
func TestVouchCountsFromFirstSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 10 * time.Second // idle pings every 3.3s
		b := newBubble(t)
		s := b.server("s1", time.Second, 0)
		c := b.connect(timeout, s)
		defer b.stop(c)
		time.Sleep(2500 * time.Millisecond)
		// The server takes a write and holds it, not vouching (its leader
		// is away); then its stream breaks, and the client re-sends the
		// write on a new stream, where it is vouched for.
		s.noVouch.Store(true)
		held := make(chan int64, 1)
		s.setOnRequest(func(r *apipb.Request) hookResult {
			if r.GetCreate() != nil {
				select {
				case held <- r.Xid:
				default:
				}
				return hookResult{act: actHold}
			}
			return hookResult{}
		})
		done := make(chan error, 1)
		go func() { _, err := c.Create(context.Background(), "/x", nil, CreateMode{}); done <- err }()
		xid := <-held
		first, _ := s.receivedAt(xid)
		time.Sleep(1500 * time.Millisecond)
		s.setOnRequest(nil)
		s.noVouch.Store(false)
		s.killStreams()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		if v := s.lastVouch(); v.xid != xid || s.acceptedStreams() != 2 {
			t.Fatalf("last vouch %+v after %d streams, want one for the re-sent xid %d", v, s.acceptedStreams(), xid)
		}
		if got, want := c.Confirmation().Sent, s.start.Add(first); !got.Equal(want) {
			t.Fatalf("confirmed as sent at %v, want its first send at %v", got.Sub(s.start), first)
		}
	})
}

// TestOlderServerSuspendsOnDisconnect: a server that does not vouch
// (vouch_interval_ms 0) leaves the rule of older servers: the session is
// suspended when its connection breaks, and StateReconnected lifts it.
// The client asks for vouches on connect and on resume.
func TestOlderServerSuspendsOnDisconnect(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s}, WithSessionTimeout(time.Second))
	if conf := c.Confirmation(); conf.Vouched || conf.Suspended {
		t.Fatalf("confirmation %+v from a server that does not vouch", conf)
	}
	_, sub, stop := c.NotifyStates()
	defer stop()
	waitFor(t, "the stream", func() bool { return s.activeStreams() == 1 })
	s.killStreams()
	for _, want := range []State{StateDisconnected, StateSuspended, StateReconnected} {
		select {
		case ev := <-sub:
			if ev.State != want {
				t.Fatalf("state %v, want %v", ev.State, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %v", want)
		}
	}
	reqs := s.connectRequests()
	if len(reqs) != 2 || !reqs[0].Vouches || !reqs[1].Vouches || reqs[1].SessionId == 0 {
		t.Fatalf("connect requests %v: want a connect and a resume, both asking for vouches", reqs)
	}
	if c.Confirmation().Suspended {
		t.Fatal("suspended after reconnecting")
	}
}
