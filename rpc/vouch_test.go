package rpc

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// isolator cuts one server off from its peers: its dials fail and its open
// peer connections close, both ways, as in a partition.
type isolator struct {
	mu     sync.Mutex
	cut    map[string]bool // server id -> isolated
	conns  map[string][]net.Conn
	addrs  map[string]string           // peer address -> server id
	oneWay map[[2]string]bool          // (from, to) -> from's dials to to fail
	dialed map[[2]string][]net.Conn    // (from, to) -> connections from dialed to to
	held   map[[2]string]chan struct{} // (from, to) -> from's dials to to wait until closed
}

func newIsolator() *isolator {
	return &isolator{cut: map[string]bool{}, conns: map[string][]net.Conn{}, addrs: map[string]string{},
		oneWay: map[[2]string]bool{}, dialed: map[[2]string][]net.Conn{}, held: map[[2]string]chan struct{}{}}
}

func (is *isolator) dialer(id string) func(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, addr string) (net.Conn, error) {
		is.mu.Lock()
		to := is.addrs[addr]
		hold := is.held[[2]string{id, to}]
		is.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		is.mu.Lock()
		blocked := is.cut[id] || is.cut[to] || is.oneWay[[2]string{id, to}]
		is.mu.Unlock()
		if blocked {
			return nil, net.ErrClosed
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		is.mu.Lock()
		defer is.mu.Unlock()
		is.conns[id] = append(is.conns[id], c)
		is.conns[to] = append(is.conns[to], c)
		is.dialed[[2]string{id, to}] = append(is.dialed[[2]string{id, to}], c)
		return c, nil
	}
}

// cutDials makes server from's dials to server to fail and closes the
// connections it dialed there before: what from sends on its own
// connections (Raft's AppendEntries and votes, its peer calls) no longer
// reaches to, while to's own connections to from still work.
func (is *isolator) cutDials(from, to string) {
	is.mu.Lock()
	is.oneWay[[2]string{from, to}] = true
	conns := is.dialed[[2]string{from, to}]
	is.dialed[[2]string{from, to}] = nil
	is.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// holdDials makes server from's dials to server to wait, until release is
// called (once or more), and then go on as if they had just begun.
func (is *isolator) holdDials(from, to string) (release func()) {
	ch := make(chan struct{})
	is.mu.Lock()
	is.held[[2]string{from, to}] = ch
	is.mu.Unlock()
	return sync.OnceFunc(func() {
		is.mu.Lock()
		delete(is.held, [2]string{from, to})
		is.mu.Unlock()
		close(ch)
	})
}

// isolate cuts server id off; its existing peer connections close.
func (is *isolator) isolate(id string) {
	is.mu.Lock()
	is.cut[id] = true
	conns := is.conns[id]
	is.conns[id] = nil
	is.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// ping sends a ping on s and returns its xid.
func (s *rawSession) ping() int64 {
	s.t.Helper()
	s.xid++
	if err := s.stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: &apipb.Request{Xid: s.xid, Op: &apipb.Request_Ping{Ping: &apipb.PingRequest{}}}}}); err != nil {
		s.t.Fatal(err)
	}
	return s.xid
}

// vouchedAfter sends a ping and reads the stream until a vouch naming its
// xid or a later one arrives (true), the stream ends (false) or d passes
// (fatal).
func (s *rawSession) vouchedAfter(d time.Duration) bool {
	s.t.Helper()
	xid := s.ping()
	got := make(chan bool, 1)
	go func() {
		for {
			m, err := s.stream.Recv()
			if err != nil {
				s.ended = err
				got <- false
				return
			}
			if v := m.GetVouch(); v != nil && v.Xid >= xid {
				got <- true
				return
			}
		}
	}()
	select {
	case ok := <-got:
		return ok
	case <-time.After(d):
		s.t.Fatalf("neither a vouch nor the end of the stream within %v", d)
		return false
	}
}

// TestVouches: a session is vouched for on the leader and on a follower;
// a server cut off from the majority, follower or leader, vouches for
// nothing sent after the cut, up to the moment it closes the stream
// (it goes on answering pings until it notices it has no leader).
func TestVouches(t *testing.T) {
	for _, isolateLeader := range []bool{false, true} {
		name := map[bool]string{false: "follower", true: "leader"}[isolateLeader]
		t.Run(name, func(t *testing.T) {
			is := newIsolator()
			nodes, leader := threeNodes(t, func(c *Config) {
				is.mu.Lock()
				is.addrs[c.PeerAddr] = c.ID
				is.mu.Unlock()
				c.DialPeer = is.dialer(c.ID)
			})
			follower := followersOf(nodes, leader)[0]
			for _, n := range []*Node{leader, follower} {
				s, first := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 2000, Vouches: true})
				if got := first.GetConnected().GetVouchIntervalMs(); got != 50 {
					t.Fatalf("server %s: vouch interval %d ms, want 50 (tick / 2)", n.ID(), got)
				}
				if !s.vouchedAfter(5 * time.Second) {
					t.Fatalf("server %s did not vouch for a healthy session: the stream ended: %v", n.ID(), s.ended)
				}
			}
			// A client that does not ask gets no vouches (an older client
			// would end its stream on a message it does not know).
			old, first := dialRaw(t, follower.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 2000})
			if got := first.GetConnected().GetVouchIntervalMs(); got != 0 {
				t.Fatalf("vouch interval %d ms for a client that did not ask, want 0", got)
			}
			old.ping()
			// Two later batches vouched for on another session: the batch
			// holding old's ping was handled (and any vouch for it queued)
			// before the second was even taken, so before the reply below.
			asker, _ := dialRaw(t, follower.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 2000, Vouches: true})
			for range 2 {
				if !asker.vouchedAfter(5 * time.Second) {
					t.Fatal("no vouch for the asking session")
				}
			}
			xid := old.ping()
			for {
				m, err := old.stream.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if m.GetVouch() != nil {
					t.Fatal("a session that did not ask for vouches got one")
				}
				if r := m.GetResponse(); r != nil && r.Xid == xid {
					break
				}
			}
			cut := follower
			if isolateLeader {
				cut = leader
			}
			s, _ := dialRaw(t, cut.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 2000, Vouches: true})
			if !s.vouchedAfter(5 * time.Second) {
				t.Fatal("no vouch before the cut")
			}
			is.isolate(cut.ID())
			if s.vouchedAfter(10 * time.Second) {
				t.Fatalf("the %s, cut off from the majority, vouched for a session", name)
			}
		})
	}
}
