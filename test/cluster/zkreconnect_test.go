package cluster

// Issue 35: a ZooKeeper client's session through reconnects — the socket
// dropped with the same server, the session's server killed, many
// reconnects in a row, the leader killed with writes in flight — with
// go-zookeeper (which keeps numbering its xids across connections) and with
// a client of the codec that numbers them from 1 on every connection, as
// kazoo does. After each, writes, creates of every kind, multi and watches
// work, every write applies exactly once, and no reply is another
// request's.

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// dropDialer dials as net.DialTimeout and keeps the last connection, so a
// test can drop it under the client.
type dropDialer struct {
	mu   sync.Mutex
	last net.Conn
}

func (d *dropDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.mu.Lock()
		d.last = c
		d.mu.Unlock()
	}
	return c, err
}

// drop closes the client's connection, as a broken network would.
func (d *dropDialer) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last != nil {
		d.last.Close()
	}
}

// exerciseZK checks, after a reconnect (round r), that writes, creates of
// every kind, a multi and watches work, and that each write applied once.
func exerciseZK(t *testing.T, cl *zkClient, r int) {
	t.Helper()
	base := fmt.Sprintf("/rc/%d", r)
	if p, err := cl.Create(base, []byte("x"), 0, zkACL); err != nil || p != base {
		t.Fatalf("round %d: create %s: %q %v", r, base, p, err)
	}
	seq, err := cl.Create(base+"/seq-", nil, zk.FlagSequence, zkACL)
	if err != nil || !strings.HasPrefix(seq, base+"/seq-") || seq == base+"/seq-" {
		t.Fatalf("round %d: sequential create: %q %v", r, seq, err)
	}
	eph, err := cl.Create(base+"/eph", nil, zk.FlagEphemeral, zkACL)
	if err != nil || eph != base+"/eph" {
		t.Fatalf("round %d: ephemeral create: %q %v", r, eph, err)
	}
	_, _, ch, err := cl.GetW(base)
	if err != nil {
		t.Fatalf("round %d: getW: %v", r, err)
	}
	// Compare-and-set on the version: a write applied twice, or answered
	// with another's reply, would leave another version.
	for v := int32(0); v < 5; v++ {
		st, err := cl.Set(base, []byte(fmt.Sprint(v)), v)
		if err != nil || st.Version != v+1 {
			t.Fatalf("round %d: set at version %d: %+v %v", r, v, st, err)
		}
		if v == 0 {
			if ev := zkEvent(t, ch, "data watch after a reconnect"); ev.Type != zk.EventNodeDataChanged || ev.Path != base {
				t.Fatalf("round %d: event %+v", r, ev)
			}
		}
	}
	res, err := cl.Multi(
		&zk.CreateRequest{Path: base + "/m", Data: []byte("m"), Acl: zkACL},
		&zk.SetDataRequest{Path: base, Data: []byte("m"), Version: 5},
		&zk.CheckVersionRequest{Path: base, Version: 6},
	)
	if err != nil || len(res) != 3 || res[0].String != base+"/m" {
		t.Fatalf("round %d: multi: %+v %v", r, res, err)
	}
	kids, st, err := cl.Children(base)
	slices.Sort(kids)
	if err != nil || st.Version != 6 || len(kids) != 3 || kids[0] != "eph" || kids[1] != "m" {
		t.Fatalf("round %d: %s now has version %d and children %v (%v)", r, base, st.Version, kids, err)
	}
}

// TestZKReconnects: go-zookeeper's session through a dropped socket (same
// server), many drops in a row, and the death of its server.
func TestZKReconnects(t *testing.T) {
	c := New(t, 3, Options{})
	servers := c.Servers()
	d := &dropDialer{}
	one := zkConnect(t, servers[1:2], zkOpts{dial: d.dial, timeout: 8 * time.Second})
	if _, err := one.Create("/rc", nil, 0, zkACL); err != nil {
		t.Fatal(err)
	}
	id := one.SessionID()
	exerciseZK(t, one, 0)
	for r := 1; r <= 20; r++ {
		d.drop()
		one.waitState(t, zk.StateHasSession, 15*time.Second)
		if one.SessionID() != id {
			t.Fatalf("round %d: a new session %#x", r, one.SessionID())
		}
		if r == 1 || r == 20 {
			exerciseZK(t, one, r)
		} else if _, err := one.Set("/rc", []byte(fmt.Sprint(r)), int32(r-2)); err != nil {
			t.Fatalf("round %d: set right after the reconnect: %v", r, err)
		}
	}

	// The session's server dies: the client moves with its session.
	all := zkConnect(t, servers, zkOpts{timeout: 8 * time.Second})
	dead := memberAt(c, all.Server())
	c.Stop(dead)
	all.waitState(t, zk.StateHasSession, 20*time.Second)
	c.WaitLeader(15 * time.Second)
	exerciseZK(t, all, 100)
	c.Start(dead)
}

// TestZKRenumberingClientThroughFailures: a client that numbers its xids
// from 1 on every connection (kazoo's way) keeps a session through a dropped
// socket and through the death of its server; every write it makes is
// applied, once, and each reply is its own.
func TestZKRenumberingClientThroughFailures(t *testing.T) {
	c := New(t, 3, Options{})
	servers := c.Servers()
	i := c.Follower()
	z := dialZKRaw(t, servers[i])
	conn := z.connect(jute.ConnectRequest{TimeOut: 8000})
	create := func(round, k int) {
		t.Helper()
		p := fmt.Sprintf("/k%d-%d", round, k)
		code, got, err := z.createPath(p)
		if err != nil || code != jute.CodeOK || got != p {
			t.Fatalf("create %s at xid %d: %v %q %v", p, z.xid, code, got, err)
		}
	}
	for k := 0; k < 10; k++ {
		create(0, k)
	}
	for round := 1; round <= 6; round++ {
		z.c.Close()
		if round == 4 {
			// The session's server dies; the client goes to another.
			c.Stop(i)
			i = (i + 1) % len(servers)
			c.WaitLeader(15 * time.Second)
		}
		z = dialZKRaw(t, servers[i])
		if resp := z.connect(jute.ConnectRequest{SessionID: conn.SessionID, Passwd: conn.Passwd, TimeOut: 8000}); resp.SessionID != conn.SessionID {
			t.Fatalf("round %d: resumed %#x, want %#x", round, resp.SessionID, conn.SessionID)
		}
		for k := 0; k < 10; k++ {
			create(round, k)
		}
	}
	// Every create exists, once.
	c.Members[i].Node().FSM().Read(func(v fsm.View) {
		kids, _, _ := v.Tree.Children("/")
		got := 0
		for _, k := range kids {
			if strings.HasPrefix(k, "k") {
				got++
			}
		}
		if got != 7*10 {
			t.Fatalf("%d nodes created, want 70: %v", got, kids)
		}
	})
}

// TestZKWritesThroughLeaderDeath: ZooKeeper-protocol clients on the
// followers write while the leader is killed; the followers keep their
// connections and send their pending writes to the new leader again. Each
// acknowledged write is applied exactly once, and none twice.
func TestZKWritesThroughLeaderDeath(t *testing.T) {
	c := New(t, 3, Options{})
	servers := c.Servers()
	leader := c.LeaderIndex()
	var clients []*zkClient
	for i := range servers {
		if i != leader {
			clients = append(clients, zkConnect(t, servers[i:i+1], zkOpts{timeout: 8 * time.Second}))
		}
	}
	if _, err := clients[0].Create("/lk", nil, 0, zkACL); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		cl := clients[w%len(clients)]
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := 0; k < 400; k++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d-", w, k)
				p, err := cl.Create("/lk/"+name, nil, zk.FlagSequence, zkACL)
				if err == nil {
					if !strings.HasPrefix(p, "/lk/"+name) {
						t.Errorf("create of %s answered %q", name, p)
					}
					mu.Lock()
					acked[name] = true
					mu.Unlock()
				}
			}
		}(w)
	}
	c.Eventually(10*time.Second, "writes under way", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 50
	})
	c.Stop(leader)
	c.WaitLeader(15 * time.Second)
	c.Eventually(20*time.Second, "writes after the new leader", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 400
	})
	close(stop)
	wg.Wait()
	c.Start(leader)
	c.WaitConverged(20*time.Second, 0)
	counts := map[string]int{}
	c.Members[c.LeaderIndex()].Node().FSM().Read(func(v fsm.View) {
		kids, _, _ := v.Tree.Children("/lk")
		for _, k := range kids {
			counts[k[:strings.LastIndexByte(k, '-')+1]]++
		}
	})
	for name, n := range counts {
		if n > 1 {
			t.Errorf("%s applied %d times", name, n)
		}
	}
	for name := range acked {
		if counts[name] != 1 {
			t.Errorf("acknowledged %s applied %d times", name, counts[name])
		}
	}
}

// createPath sends a create and returns its reply's error and path, or the
// read error if no reply came.
func (z *zkRaw) createPath(p string) (jute.Code, string, error) {
	z.xid++
	z.send(jute.AppendFrame(nil, &jute.RequestHeader{Xid: z.xid, Type: jute.OpCreate}, &jute.CreateRequest{Path: p, ACL: jute.OpenACL()}))
	for {
		f, err := z.frame(10 * time.Second)
		if err != nil {
			return 0, "", err
		}
		r := jute.NewReader(f)
		var h jute.ReplyHeader
		if err := h.Decode(r); err != nil {
			z.t.Fatal(err)
		}
		if h.Xid != z.xid {
			continue
		}
		var cr jute.CreateResponse
		if h.Err == jute.CodeOK {
			if err := cr.Decode(r); err != nil {
				z.t.Fatal(err)
			}
		}
		return h.Err, cr.Path, nil
	}
}
