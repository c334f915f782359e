package cluster

// ZooKeeper's client protocol on a 3-server cluster, driven by an unchanged
// ZooKeeper client library (github.com/go-zookeeper/zk): what a team moving
// from ZooKeeper to coordd relies on.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/zk/jute"
)

var zkACL = zk.WorldACL(zk.PermAll)

// zkClient is a go-zookeeper connection and its session's events.
type zkClient struct {
	*zk.Conn
	events <-chan zk.Event
	rec    *zkWire
}

type zkOpts struct {
	timeout time.Duration // requested session timeout (default 4s)
	record  bool          // record the wire (zkClient.rec)
	dial    zk.Dialer     // default net.DialTimeout
}

// zkConnect connects to servers and waits for a session.
func zkConnect(t testing.TB, servers []string, o zkOpts) *zkClient {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 4 * time.Second
	}
	dial := o.dial
	if dial == nil {
		dial = net.DialTimeout
	}
	var rec *zkWire
	if o.record {
		rec = &zkWire{reqs: map[int32]*apipb.Request{}}
		inner := dial
		dial = func(network, addr string, d time.Duration) (net.Conn, error) {
			c, err := inner(network, addr, d)
			if err != nil {
				return nil, err
			}
			return rec.wrap(c), nil
		}
	}
	conn, events, err := zk.Connect(servers, o.timeout, zk.WithLogInfo(false), zk.WithDialer(dial), zk.WithLogger(zkLogger{t}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	c := &zkClient{Conn: conn, events: events, rec: rec}
	c.waitState(t, zk.StateHasSession, 15*time.Second)
	return c
}

type zkLogger struct{ t testing.TB }

func (l zkLogger) Printf(format string, args ...any) { l.t.Logf("go-zookeeper: "+format, args...) }

// waitState waits for the session to reach state st.
func (c *zkClient) waitState(t testing.TB, st zk.State, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-c.events:
			if ev.State == st {
				return
			}
		case <-deadline:
			t.Fatalf("session never reached %v (now %v)", st, c.State())
		}
	}
}

// zkEvent waits for a watch event.
func zkEvent(t testing.TB, ch <-chan zk.Event, what string) zk.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no event: %s", what)
	}
	return zk.Event{}
}

// memberAt returns the index of the member serving addr.
func memberAt(c *Cluster, addr string) int {
	for i, m := range c.Members {
		if m.Cfg.ClientAddr == addr {
			return i
		}
	}
	return -1
}

// hasSession reports whether member i's state has session id.
func hasSession(c *Cluster, i int, id int64) bool {
	n := c.Members[i].Node()
	if n == nil {
		return false
	}
	var ok bool
	n.FSM().Read(func(v fsm.View) { _, ok = v.Sessions.Get(id) })
	return ok
}

// TestZKClient: go-zookeeper against a 3-server cluster, its clients spread
// over the servers: CRUD, compare-and-set, sequential and ephemeral nodes,
// containers, TTL nodes, multi with a failing op, watches in ZooKeeper's
// order, the Lock recipe under contention, the session listing, and the
// timeout negotiation.
func TestZKClient(t *testing.T) {
	c := New(t, 3, Options{})
	servers := c.Servers()
	a := zkConnect(t, servers[:1], zkOpts{})
	b := zkConnect(t, servers[1:2], zkOpts{})

	t.Run("crud", func(t *testing.T) {
		p, err := a.Create("/crud", []byte("one"), 0, zkACL)
		if err != nil || p != "/crud" {
			t.Fatalf("create: %q %v", p, err)
		}
		// b, on another server, reads its own view after a sync.
		if _, err := b.Sync("/crud"); err != nil {
			t.Fatal(err)
		}
		data, st, err := b.Get("/crud")
		if err != nil || string(data) != "one" || st.Version != 0 || st.DataLength != 3 || st.Czxid == 0 || st.Czxid != st.Mzxid {
			t.Fatalf("get: %q %+v %v", data, st, err)
		}
		st2, err := b.Set("/crud", []byte("two!"), 0)
		if err != nil || st2.Version != 1 || st2.Mzxid <= st.Mzxid || st2.Czxid != st.Czxid {
			t.Fatalf("set: %+v %v", st2, err)
		}
		if _, err := a.Create("/crud/k", nil, 0, zkACL); err != nil {
			t.Fatal(err)
		}
		kids, st3, err := a.Children("/crud")
		if err != nil || !slices.Equal(kids, []string{"k"}) || st3.NumChildren != 1 || st3.Cversion != 1 {
			t.Fatalf("children: %v %+v %v", kids, st3, err)
		}
		if err := a.Delete("/crud", -1); !errors.Is(err, zk.ErrNotEmpty) {
			t.Fatalf("delete of a parent: %v", err)
		}
		if _, err := a.Create("/crud", nil, 0, zkACL); !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create again: %v", err)
		}
		if err := a.Delete("/crud/k", -1); err != nil {
			t.Fatal(err)
		}
		if err := a.Delete("/crud", -1); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := a.Exists("/crud"); ok || err != nil {
			t.Fatalf("exists after delete: %v %v", ok, err)
		}
		if _, _, err := a.Get("/crud"); !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("get after delete: %v", err)
		}
	})

	t.Run("cas", func(t *testing.T) {
		if _, err := a.Create("/cas", []byte("0"), 0, zkACL); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Set("/cas", []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Set("/cas", []byte("x"), 0); !errors.Is(err, zk.ErrBadVersion) {
			t.Fatalf("set with a stale version: %v", err)
		}
		if err := b.Delete("/cas", 0); !errors.Is(err, zk.ErrBadVersion) {
			t.Fatalf("delete with a stale version: %v", err)
		}
		if err := b.Delete("/cas", 1); err != nil {
			t.Fatalf("delete with the right version: %v", err)
		}
	})

	t.Run("sequential", func(t *testing.T) {
		if _, err := a.Create("/seq", nil, 0, zkACL); err != nil {
			t.Fatal(err)
		}
		var names []string
		for i, cl := range []*zkClient{a, b, a} {
			p, err := cl.Create("/seq/n-", nil, zk.FlagSequence, zkACL)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("/seq/n-%010d", i); p != want {
				t.Fatalf("sequential create %d: %q, want %q", i, p, want)
			}
			names = append(names, p)
		}
		if err := a.Delete(names[2], -1); err != nil {
			t.Fatal(err)
		}
		// The counter counts creates, not the children there are.
		if p, err := b.Create("/seq/n-", nil, zk.FlagSequence, zkACL); err != nil || p != "/seq/n-0000000003" {
			t.Fatalf("after a delete: %q %v", p, err)
		}
	})

	t.Run("ephemeral", func(t *testing.T) {
		e := zkConnect(t, servers[2:], zkOpts{})
		if _, err := e.Create("/eph", nil, zk.FlagEphemeral, zkACL); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Create("/eph/child", nil, 0, zkACL); !errors.Is(err, zk.ErrNoChildrenForEphemerals) {
			t.Fatalf("child of an ephemeral: %v", err)
		}
		// a and b are on other servers: each syncs before it reads, so it
		// is at least as new as the write it looks for.
		if _, err := a.Sync("/eph"); err != nil {
			t.Fatal(err)
		}
		ok, st, ch, err := a.ExistsW("/eph")
		if err != nil || !ok || st.EphemeralOwner != e.SessionID() {
			t.Fatalf("exists: %v %+v %v (owner want %#x)", ok, st, err, e.SessionID())
		}
		e.Close()
		if ev := zkEvent(t, ch, "NodeDeleted of the closed session's ephemeral"); ev.Type != zk.EventNodeDeleted || ev.Path != "/eph" {
			t.Fatalf("event: %+v", ev)
		}
		if _, err := b.Sync("/eph"); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := b.Exists("/eph"); ok || err != nil {
			t.Fatalf("the ephemeral after close, on another server: %v %v", ok, err)
		}
	})

	t.Run("container", func(t *testing.T) {
		if _, err := a.CreateContainer("/box", nil, zk.FlagContainer, zkACL); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Create("/box/item", nil, 0, zkACL); err != nil {
			t.Fatal(err)
		}
		_, _, ch, err := a.ExistsW("/box")
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Delete("/box/item", -1); err != nil {
			t.Fatal(err)
		}
		// Emptied after it had a child: the leader's reaper deletes it.
		if ev := zkEvent(t, ch, "the emptied container reaped"); ev.Type != zk.EventNodeDeleted || ev.Path != "/box" {
			t.Fatalf("event: %+v", ev)
		}
		// One never used is kept.
		if _, err := a.CreateContainer("/unused", nil, zk.FlagContainer, zkACL); err != nil {
			t.Fatal(err)
		}
		// Wait for reaper passes (every 100ms) by other containers'
		// fate: two made, used and reaped after /unused was made.
		for i := 0; i < 2; i++ {
			p := fmt.Sprintf("/box%d", i)
			if _, err := a.CreateContainer(p, nil, zk.FlagContainer, zkACL); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Create(p+"/x", nil, 0, zkACL); err != nil {
				t.Fatal(err)
			}
			_, _, ch, _ := a.ExistsW(p)
			if err := a.Delete(p+"/x", -1); err != nil {
				t.Fatal(err)
			}
			zkEvent(t, ch, "a container reaped")
		}
		if ok, _, err := a.Exists("/unused"); !ok || err != nil {
			t.Fatalf("a container never used was reaped: %v %v", ok, err)
		}
	})

	t.Run("ttl", func(t *testing.T) {
		p, err := a.CreateTTL("/ttl", []byte("x"), zk.FlagTTL, zkACL, 300*time.Millisecond)
		if err != nil || p != "/ttl" {
			t.Fatalf("createTTL: %q %v", p, err)
		}
		if _, err := b.Sync("/ttl"); err != nil {
			t.Fatal(err)
		}
		if ok, st, err := b.Exists("/ttl"); err != nil || !ok || st.EphemeralOwner != 0 {
			t.Fatalf("a TTL node's stat: %+v %v", st, err)
		}
		if _, err := a.CreateTTL("/ttl0", nil, zk.FlagTTL, zkACL, 0); err == nil {
			t.Fatal("a TTL of 0 accepted")
		}
		_, _, ch, err := a.ExistsW("/ttl")
		if err != nil {
			t.Fatal(err)
		}
		if ev := zkEvent(t, ch, "the TTL node reaped"); ev.Type != zk.EventNodeDeleted {
			t.Fatalf("event: %+v", ev)
		}
	})

	t.Run("multi", func(t *testing.T) {
		if _, err := a.Create("/mx", []byte("0"), 0, zkACL); err != nil {
			t.Fatal(err)
		}
		res, err := a.Multi(
			&zk.CreateRequest{Path: "/mx/a", Acl: zkACL},
			&zk.SetDataRequest{Path: "/mx", Data: []byte("1"), Version: 0},
			&zk.CheckVersionRequest{Path: "/mx", Version: 7},
			&zk.DeleteRequest{Path: "/mx/none", Version: -1})
		if !errors.Is(err, zk.ErrBadVersion) || len(res) != 4 {
			t.Fatalf("failed multi: %v %+v", err, res)
		}
		if res[0].Error != nil || res[1].Error != nil || !errors.Is(res[2].Error, zk.ErrBadVersion) || res[3].Error == nil || res[3].Error.Error() != "unknown error: -2" {
			t.Fatalf("failed multi's per-op results: %+v", res)
		}
		if ok, _, _ := b.Exists("/mx/a"); ok {
			t.Fatal("a failed multi's create applied")
		}
		res, err = a.Multi(
			&zk.CreateRequest{Path: "/mx/a", Acl: zkACL},
			&zk.SetDataRequest{Path: "/mx", Data: []byte("1"), Version: 0},
			&zk.CheckVersionRequest{Path: "/mx", Version: 1},
			&zk.DeleteRequest{Path: "/mx/a", Version: -1})
		if err != nil || len(res) != 4 || res[0].String != "/mx/a" || res[1].Stat == nil || res[1].Stat.Version != 1 {
			t.Fatalf("multi: %v %+v", err, res)
		}
	})

	t.Run("watch order", func(t *testing.T) {
		w := zkConnect(t, servers[2:], zkOpts{record: true})
		if _, err := a.Create("/w", nil, 0, zkACL); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Create("/w/d", []byte("0"), 0, zkACL); err != nil {
			t.Fatal(err)
		}
		var events atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			// The writer, on another server, for as long as the watcher
			// watches (bounded).
			defer wg.Done()
			for i := 0; i < 5000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = b.Set("/w/d", []byte(fmt.Sprint(i)), -1)
				p := fmt.Sprintf("/w/c%d", i%3)
				if _, err := b.Create(p, nil, 0, zkACL); errors.Is(err, zk.ErrNodeExists) {
					_ = b.Delete(p, -1)
				}
			}
		}()
		if _, err := w.Sync("/w/d"); err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 25; round++ {
			_, _, dch, err := w.GetW("/w/d")
			if err != nil {
				t.Fatal(err)
			}
			_, _, cch, err := w.ChildrenW("/w")
			if err != nil {
				t.Fatal(err)
			}
			_, _, ech, err := w.ExistsW("/w/c1")
			if err != nil {
				t.Fatal(err)
			}
			// Reads meanwhile: none may show a change before its event.
			for i := 0; i < 3; i++ {
				_, _, _ = w.Get("/w/d")
				_, _, _ = w.Children("/w")
				_, _, _ = w.Exists("/w/c1")
			}
			for _, ch := range []<-chan zk.Event{dch, cch, ech} {
				zkEvent(t, ch, "a watch of the round")
				events.Add(1)
			}
		}
		close(stop)
		wg.Wait()
		msgs := w.rec.snapshot()
		if bad := checkWire(msgs); len(bad) > 0 {
			t.Fatalf("%d violations of the watch rules, first: %s", len(bad), strings.Join(bad[:min(5, len(bad))], "; "))
		}
		var wireEvents int
		for _, m := range msgs {
			if m.event != nil {
				wireEvents++
			}
		}
		if wireEvents < int(events.Load()) {
			t.Fatalf("%d events on the wire, %d delivered", wireEvents, events.Load())
		}
	})

	t.Run("lock", func(t *testing.T) {
		const workers, rounds = 4, 5
		var holders, entries atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for i := 0; i < workers; i++ {
			cl := zkConnect(t, servers[i%3:i%3+1], zkOpts{})
			wg.Add(1)
			go func(cl *zkClient) {
				defer wg.Done()
				l := zk.NewLock(cl.Conn, "/lock", zkACL)
				for r := 0; r < rounds; r++ {
					if err := l.Lock(); err != nil {
						errs <- err
						return
					}
					if n := holders.Add(1); n != 1 {
						errs <- fmt.Errorf("%d holders at once", n)
					}
					entries.Add(1)
					// Hold it across a round trip to the cluster, so that
					// overlapping holders would be seen.
					_, _, _ = cl.Get("/lock")
					holders.Add(-1)
					if err := l.Unlock(); err != nil {
						errs <- err
						return
					}
				}
			}(cl)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if entries.Load() != workers*rounds {
			t.Fatalf("%d entries, want %d", entries.Load(), workers*rounds)
		}
		// The last unlock may have been on another server.
		if _, err := a.Sync("/lock"); err != nil {
			t.Fatal(err)
		}
		if kids, _, err := a.Children("/lock"); err != nil || len(kids) != 0 {
			t.Fatalf("lock nodes left: %v %v", kids, err)
		}
	})

	t.Run("sessions", func(t *testing.T) {
		cc, err := grpc.NewClient(servers[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := apipb.NewCoordClient(cc).Sessions(ctx, &apipb.SessionsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		found := map[int64]*apipb.SessionInfo{}
		for _, s := range resp.Sessions {
			found[s.Id] = s
		}
		for _, tc := range []struct {
			cl     *zkClient
			server string
		}{{a, c.Members[0].ID}, {b, c.Members[1].ID}} {
			s := found[tc.cl.SessionID()]
			if s == nil || s.Server != tc.server || s.TimeoutMs != 4000 {
				t.Errorf("session %#x in the listing: %+v, want on server %s with 4000ms", tc.cl.SessionID(), s, tc.server)
			}
		}
	})

	t.Run("timeout negotiation", func(t *testing.T) {
		// Tick 200ms: the test cluster's [2, 20] x tick is [400ms, 4s].
		for _, tc := range []struct{ ask, want time.Duration }{
			{100 * time.Millisecond, 400 * time.Millisecond},
			{time.Second, time.Second},
			{time.Minute, 4 * time.Second},
		} {
			z := dialZKRaw(t, servers[1])
			resp := z.connect(jute.ConnectRequest{TimeOut: int32(tc.ask.Milliseconds())})
			if time.Duration(resp.TimeOut)*time.Millisecond != tc.want {
				t.Errorf("asked %v: negotiated %dms, want %v", tc.ask, resp.TimeOut, tc.want)
			}
			var info apipb.SessionInfo
			c.Eventually(10*time.Second, "the session replicated", func() bool { return hasSession(c, 0, resp.SessionID) })
			c.Members[0].Node().FSM().Read(func(v fsm.View) {
				s, _ := v.Sessions.Get(resp.SessionID)
				info.TimeoutMs = s.TimeoutMs
			})
			if time.Duration(info.TimeoutMs)*time.Millisecond != tc.want {
				t.Errorf("asked %v: replicated timeout %dms, want %v", tc.ask, info.TimeoutMs, tc.want)
			}
			z.c.Close()
		}
	})
}

// TestZKSessionMovesOnServerDeath: when a go-zookeeper client's server is
// killed, its session moves to another server with its ephemeral node and
// its watches; a watch set before the move fires after it.
func TestZKSessionMovesOnServerDeath(t *testing.T) {
	c := New(t, 3, Options{})
	servers := c.Servers()
	cl := zkConnect(t, servers, zkOpts{})
	other := zkConnect(t, servers, zkOpts{})
	id := cl.SessionID()
	if _, err := cl.Create("/eph", nil, zk.FlagEphemeral, zkACL); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create("/data", []byte("0"), 0, zkACL); err != nil {
		t.Fatal(err)
	}
	// other may be on another server: cl syncs before it reads /data.
	if _, err := cl.Sync("/data"); err != nil {
		t.Fatal(err)
	}
	_, _, dch, err := cl.GetW("/data")
	if err != nil {
		t.Fatal(err)
	}
	_, _, ech, err := cl.ExistsW("/created-later")
	if err != nil {
		t.Fatal(err)
	}
	dead := memberAt(c, cl.Server())
	if dead < 0 {
		t.Fatalf("connected to %q, not a member", cl.Server())
	}
	c.Stop(dead)
	cl.waitState(t, zk.StateDisconnected, 10*time.Second)
	cl.waitState(t, zk.StateHasSession, 20*time.Second)
	if cl.SessionID() != id || memberAt(c, cl.Server()) == dead {
		t.Fatalf("after the kill: session %#x on %s, want %#x elsewhere", cl.SessionID(), cl.Server(), id)
	}
	c.WaitLeader(15 * time.Second)
	ok, st, err := other.Exists("/eph")
	if err != nil || !ok || st.EphemeralOwner != id {
		t.Fatalf("the moved session's ephemeral: %v %+v %v", ok, st, err)
	}
	if _, err := other.Set("/data", []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := zkEvent(t, dch, "the data watch after the move"); ev.Type != zk.EventNodeDataChanged || ev.Path != "/data" {
		t.Fatalf("data watch: %+v", ev)
	}
	if _, err := other.Create("/created-later", nil, 0, zkACL); err != nil {
		t.Fatal(err)
	}
	if ev := zkEvent(t, ech, "the exists watch after the move"); ev.Type != zk.EventNodeCreated {
		t.Fatalf("exists watch: %+v", ev)
	}
	// The moved session writes on its new server.
	if _, err := cl.Create("/after", nil, 0, zkACL); err != nil {
		t.Fatalf("a write after the move: %v", err)
	}
}

// blockDialer dials until blocked; blocking closes its connections.
type blockDialer struct {
	mu      sync.Mutex
	blocked bool
	conns   []net.Conn
}

func (d *blockDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.blocked {
		return nil, errors.New("blocked by the test")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *blockDialer) block(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.blocked = on
	if on {
		for _, c := range d.conns {
			c.Close()
		}
		d.conns = nil
	}
}

// TestZKSessionExpiry: a go-zookeeper client cut off for longer than its
// session timeout finds its session expired when it comes back (session id
// 0 in the ConnectResponse): it reports StateExpired, its ephemeral is
// gone, and it goes on with a new session.
func TestZKSessionExpiry(t *testing.T) {
	c := New(t, 3, Options{})
	servers := c.Servers()
	d := &blockDialer{}
	cl := zkConnect(t, servers, zkOpts{timeout: time.Second, dial: d.dial})
	watcher := zkConnect(t, servers, zkOpts{})
	id := cl.SessionID()
	if _, err := cl.Create("/eph", nil, zk.FlagEphemeral, zkACL); err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.Sync("/eph"); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := watcher.ExistsW("/eph")
	if err != nil {
		t.Fatal(err)
	}
	d.block(true)
	if ev := zkEvent(t, ch, "the expired session's ephemeral deleted"); ev.Type != zk.EventNodeDeleted {
		t.Fatalf("event: %+v", ev)
	}
	c.Eventually(10*time.Second, "the session gone everywhere", func() bool {
		for i := range c.Members {
			if hasSession(c, i, id) {
				return false
			}
		}
		return true
	})
	d.block(false)
	cl.waitState(t, zk.StateExpired, 20*time.Second)
	cl.waitState(t, zk.StateHasSession, 20*time.Second)
	if cl.SessionID() == id || cl.SessionID() == 0 {
		t.Fatalf("session after expiry: %#x (was %#x)", cl.SessionID(), id)
	}
	if _, err := cl.Create("/eph", nil, zk.FlagEphemeral, zkACL); err != nil {
		t.Fatalf("the new session's create: %v", err)
	}
}

// zkRaw is a ZooKeeper connection made of the codec, frame by frame.
type zkRaw struct {
	t   testing.TB
	c   net.Conn
	xid int32
}

func dialZKRaw(t testing.TB, addr string) *zkRaw {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &zkRaw{t: t, c: c}
}

func (z *zkRaw) connect(req jute.ConnectRequest) jute.ConnectResponse {
	z.t.Helper()
	z.send(jute.AppendFrame(nil, &req))
	f, err := z.frame(10 * time.Second)
	if err != nil {
		z.t.Fatal(err)
	}
	var resp jute.ConnectResponse
	if err := jute.Unmarshal(f, &resp); err != nil {
		z.t.Fatal(err)
	}
	return resp
}

func (z *zkRaw) send(b []byte) {
	_ = z.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, _ = z.c.Write(b) // a closed connection shows when reading
}

func (z *zkRaw) frame(d time.Duration) ([]byte, error) {
	_ = z.c.SetReadDeadline(time.Now().Add(d))
	return jute.ReadFrame(z.c, 1<<20)
}

// create sends a create and returns its reply's error, or the read error
// (the connection closed) if no reply came.
func (z *zkRaw) create(p string) (jute.Code, error) {
	z.xid++
	z.send(jute.AppendFrame(nil, &jute.RequestHeader{Xid: z.xid, Type: jute.OpCreate}, &jute.CreateRequest{Path: p, ACL: jute.OpenACL()}))
	for {
		f, err := z.frame(10 * time.Second)
		if err != nil {
			return 0, err
		}
		var h jute.ReplyHeader
		if err := h.Decode(jute.NewReader(f)); err != nil {
			z.t.Fatal(err)
		}
		if h.Xid == z.xid {
			return h.Err, nil
		}
	}
}

// grpcSession is a session stream of the public API, message by message.
type grpcSession struct {
	t      testing.TB
	stream apipb.Coord_SessionClient
	xid    int64
}

func dialGRPCSession(t testing.TB, addr string, id int64, pw []byte) (*grpcSession, *apipb.ConnectResponse) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := apipb.NewCoordClient(cc).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Connect{Connect: &apipb.ConnectRequest{SessionId: id, Password: pw, TimeoutMs: 4000}}}); err != nil {
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil || m.GetConnected() == nil {
		t.Fatalf("connect: %v %v", m, err)
	}
	return &grpcSession{t: t, stream: stream}, m.GetConnected()
}

// create sends a create and returns what the stream says until the reply:
// the reply's code, or the final message's code and the end of the stream.
func (g *grpcSession) create(p string) (reply apipb.ErrorCode, final apipb.ErrorCode, err error) {
	g.xid++
	_ = g.stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: &apipb.Request{
		Xid: g.xid, LowestPendingXid: g.xid, Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: p}}}}})
	final = -1
	for {
		m, err := g.stream.Recv()
		if err != nil {
			return -1, final, err
		}
		r := m.GetResponse()
		switch {
		case r == nil:
		case r.Xid == g.xid:
			return r.Error, final, nil
		case r.Xid == 0:
			final = r.Error
		}
	}
}

// TestZKSessionMoved: two connections of one session, the second resuming
// it on another server, through either protocol: the first connection is
// closed (ZooKeeper closes it; gRPC first says SESSION_MOVED), and a write
// sent on it after the move is never applied; the second writes.
func TestZKSessionMoved(t *testing.T) {
	c := New(t, 3, Options{})
	servers := c.Servers()
	check := zkConnect(t, servers[2:], zkOpts{})
	absent := func(p string) {
		t.Helper()
		if _, err := check.Sync(p); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		if ok, _, err := check.Exists(p); ok || err != nil {
			t.Fatalf("%s was written by the old connection after the move: %v %v", p, ok, err)
		}
	}
	// opened returns a session on servers[0] of the given protocol, with
	// a function that writes p on it after the move and checks that the
	// write failed.
	type old struct {
		id        int64
		pw        []byte
		writeMove func(p string)
	}
	openOld := func(t *testing.T, proto string) old {
		if proto == "zk" {
			z := dialZKRaw(t, servers[0])
			resp := z.connect(jute.ConnectRequest{TimeOut: 4000})
			if code, err := z.create("/" + fmt.Sprintf("%x", resp.SessionID)); err != nil || code != jute.CodeOK {
				t.Fatalf("a write before the move: %v %v", code, err)
			}
			return old{resp.SessionID, resp.Passwd, func(p string) {
				code, err := z.create(p)
				if err == nil && code != jute.CodeSessionMoved {
					t.Fatalf("the old ZooKeeper connection's write after the move: %v", code)
				}
			}}
		}
		g, cr := dialGRPCSession(t, servers[0], 0, nil)
		if code, _, err := g.create("/" + fmt.Sprintf("%x", cr.SessionId)); err != nil || code != apipb.ErrorCode_OK {
			t.Fatalf("a write before the move: %v %v", code, err)
		}
		return old{cr.SessionId, cr.Password, func(p string) {
			code, final, err := g.create(p)
			if err == nil && code != apipb.ErrorCode_SESSION_MOVED {
				t.Fatalf("the old gRPC stream's write after the move: %v", code)
			}
			if final != apipb.ErrorCode_SESSION_MOVED && code != apipb.ErrorCode_SESSION_MOVED {
				t.Fatalf("the old gRPC stream ended without SESSION_MOVED (final %v, reply %v, %v)", final, code, err)
			}
		}}
	}
	resume := func(t *testing.T, proto string, o old) func(p string) {
		if proto == "zk" {
			z := dialZKRaw(t, servers[1])
			resp := z.connect(jute.ConnectRequest{SessionID: o.id, Passwd: o.pw, TimeOut: 4000})
			if resp.SessionID != o.id {
				t.Fatalf("resume: session %#x, want %#x", resp.SessionID, o.id)
			}
			return func(p string) {
				if code, err := z.create(p); err != nil || code != jute.CodeOK {
					t.Fatalf("the new connection's write: %v %v", code, err)
				}
			}
		}
		g, cr := dialGRPCSession(t, servers[1], o.id, o.pw)
		if cr.SessionId != o.id {
			t.Fatalf("resume: session %#x, want %#x", cr.SessionId, o.id)
		}
		// coordd's client numbers its requests once per session: the new
		// stream goes on from the old one's xids (a reused xid is refused).
		g.xid = 100
		return func(p string) {
			if code, _, err := g.create(p); err != nil || code != apipb.ErrorCode_OK {
				t.Fatalf("the new stream's write: %v %v", code, err)
			}
			if _, err := check.Sync(p); err != nil {
				t.Fatal(err)
			}
			if ok, _, err := check.Exists(p); !ok || err != nil {
				t.Fatalf("the new stream's write of %s was answered OK but did not apply: %v", p, err)
			}
		}
	}
	for _, from := range []string{"zk", "grpc"} {
		for _, to := range []string{"zk", "grpc"} {
			t.Run(from+" to "+to, func(t *testing.T) {
				o := openOld(t, from)
				write := resume(t, to, o)
				p := fmt.Sprintf("/late-%s-%s", from, to)
				o.writeMove(p)
				write(fmt.Sprintf("/new-%s-%s", from, to))
				absent(p)
			})
		}
	}
}

// zkWire records a go-zookeeper connection's frames as the watch checker
// (checkWire) reads them: requests as sent, replies and events as received,
// in the public API's terms.
type zkWire struct {
	mu      sync.Mutex
	reqs    map[int32]*apipb.Request
	ops     map[int32]jute.OpCode
	msgs    []wireMsg
	in, out []byte
	inConn  bool // the ConnectResponse of the current connection was read
	outConn bool
}

func (w *zkWire) wrap(c net.Conn) net.Conn {
	w.mu.Lock()
	w.in, w.out, w.inConn, w.outConn = nil, nil, false, false
	w.mu.Unlock()
	return &zkWireConn{Conn: c, w: w}
}

type zkWireConn struct {
	net.Conn
	w *zkWire
}

func (c *zkWireConn) Write(p []byte) (int, error) {
	c.w.sent(p)
	return c.Conn.Write(p)
}

func (c *zkWireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.w.received(p[:n])
	return n, err
}

// frames cuts the complete frames off buf.
func frames(buf *[]byte) [][]byte {
	var out [][]byte
	for len(*buf) >= 4 {
		n := int(uint32((*buf)[0])<<24 | uint32((*buf)[1])<<16 | uint32((*buf)[2])<<8 | uint32((*buf)[3]))
		if len(*buf) < 4+n {
			break
		}
		out = append(out, (*buf)[4:4+n])
		*buf = (*buf)[4+n:]
	}
	return out
}

func (w *zkWire) sent(p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out = append(w.out, p...)
	for _, f := range frames(&w.out) {
		if !w.outConn {
			w.outConn = true // the ConnectRequest
			continue
		}
		r := jute.NewReader(f)
		var h jute.RequestHeader
		if h.Decode(r) != nil {
			continue
		}
		rec, err := jute.DecodeRequest(h.Type, f[jute.RequestHeaderSize:])
		if err != nil {
			continue
		}
		if w.ops == nil {
			w.ops = map[int32]jute.OpCode{}
		}
		w.ops[h.Xid] = h.Type
		req := &apipb.Request{Xid: int64(h.Xid)}
		switch x := rec.(type) {
		case *jute.GetDataRequest:
			req.Op = &apipb.Request_GetData{GetData: &apipb.GetDataRequest{Path: x.Path, Watch: x.Watch}}
		case *jute.ExistsRequest:
			req.Op = &apipb.Request_Exists{Exists: &apipb.ExistsRequest{Path: x.Path, Watch: x.Watch}}
		case *jute.GetChildren2Request:
			req.Op = &apipb.Request_GetChildren{GetChildren: &apipb.GetChildrenRequest{Path: x.Path, Watch: x.Watch}}
		case *jute.SetDataRequest:
			req.Op = &apipb.Request_SetData{SetData: &apipb.SetDataRequest{Path: x.Path}}
		case *jute.CreateRequest:
			req.Op = &apipb.Request_Create{Create: &apipb.CreateRequest{Path: x.Path}}
		case *jute.DeleteRequest:
			req.Op = &apipb.Request_Delete{Delete: &apipb.DeleteRequest{Path: x.Path}}
		default:
			continue
		}
		w.reqs[h.Xid] = req
	}
}

func statPB(s jute.Stat) *apipb.Stat {
	return &apipb.Stat{Czxid: s.Czxid, Mzxid: s.Mzxid, Pzxid: s.Pzxid, Version: s.Version, Cversion: s.Cversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength, NumChildren: s.NumChildren}
}

func (w *zkWire) received(p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.in = append(w.in, p...)
	for _, f := range frames(&w.in) {
		if !w.inConn {
			w.inConn = true
			w.msgs = append(w.msgs, wireMsg{connected: &apipb.ConnectResponse{}})
			continue
		}
		r := jute.NewReader(f)
		var h jute.ReplyHeader
		if h.Decode(r) != nil {
			continue
		}
		switch h.Xid {
		case jute.XidNotification:
			var ev jute.WatcherEvent
			if ev.Decode(r) == nil {
				w.msgs = append(w.msgs, wireMsg{event: &apipb.WatchEvent{Type: apipb.EventType(ev.Type), Path: ev.Path, Zxid: h.Zxid}})
			}
			continue
		case jute.XidPing:
			continue
		}
		resp := &apipb.Response{Xid: int64(h.Xid), Zxid: h.Zxid, Error: apipb.ErrorCode(-int32(h.Err))}
		if h.Err == jute.CodeOK {
			switch w.ops[h.Xid] {
			case jute.OpGetData:
				var x jute.GetDataResponse
				if x.Decode(r) == nil {
					resp.Result = &apipb.Response_GetData{GetData: &apipb.GetDataResponse{Stat: statPB(x.Stat)}}
				}
			case jute.OpExists:
				var x jute.ExistsResponse
				if x.Decode(r) == nil {
					resp.Result = &apipb.Response_Exists{Exists: &apipb.ExistsResponse{Stat: statPB(x.Stat)}}
				}
			case jute.OpGetChildren2:
				var x jute.GetChildren2Response
				if x.Decode(r) == nil {
					resp.Result = &apipb.Response_GetChildren{GetChildren: &apipb.GetChildrenResponse{Stat: statPB(x.Stat)}}
				}
			case jute.OpSetData:
				var x jute.SetDataResponse
				if x.Decode(r) == nil {
					resp.Result = &apipb.Response_SetData{SetData: &apipb.SetDataResponse{Stat: statPB(x.Stat)}}
				}
			case jute.OpCreate:
				var x jute.CreateResponse
				if x.Decode(r) == nil {
					resp.Result = &apipb.Response_Create{Create: &apipb.CreateResponse{Path: x.Path, Stat: &apipb.Stat{}}}
				}
			}
		}
		w.msgs = append(w.msgs, wireMsg{resp: resp, req: w.reqs[h.Xid]})
	}
}

func (w *zkWire) snapshot() []wireMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}
