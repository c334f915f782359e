package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/test/cluster"
)

// TestLockLostBeforeTakeoverPausedServer: the server of a lock holder is
// frozen (SIGSTOP, a real process, like a long GC pause or a stalled VM).
// The holder, connected to that server only, must learn that it may have
// lost the lock (Lost closes) strictly before the leader expires its
// session and a waiter on the other servers takes the lock. Times come from
// this process's clock.
func TestLockLostBeforeTakeoverPausedServer(t *testing.T) {
	e := bootCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := e.c.leader()
	if l < 0 {
		t.Fatal("no leader")
	}
	f := (l + 1) % len(e.c.nodes)
	connect := func(servers ...string) *client.Client {
		t.Helper()
		cl, err := client.Connect(ctx, servers, client.WithSessionTimeout(4*time.Second), client.WithDialTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = cl.Close(cctx)
		})
		return cl
	}
	var others []string
	for i, n := range e.c.nodes {
		if i != f {
			others = append(others, n.clientAddr)
		}
	}
	const path = "/locks/paused"
	holderCl := connect(e.c.nodes[f].clientAddr)
	holder := lockrecipe.NewMutex(lockrecipe.NewSession(holderCl), path)
	tok, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obs := connect(others...)
	waiter := lockrecipe.NewMutex(lockrecipe.NewSession(connect(others...)), path)
	type acq struct {
		tok lockrecipe.Token
		err error
		at  time.Time
	}
	acquired := make(chan acq, 1)
	go func() {
		tok, err := waiter.Lock(ctx)
		acquired <- acq{tok, err, time.Now()}
	}()
	node := ""
	cluster.Eventually(t, 10*time.Second, "the waiter in line", func() bool {
		kids, _, _ := obs.Children(ctx, path)
		for _, k := range kids {
			if st, ok, err := obs.Exists(ctx, path+"/"+k); err == nil && ok && st.EphemeralOwner == holderCl.SessionID() && len(kids) == 2 {
				node = path + "/" + k
			}
		}
		return node != ""
	})
	_, _, watch, err := obs.ExistsW(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	deleted := make(chan time.Time, 1)
	go func() {
		if ev := <-watch; ev.Type == client.EventNodeDeleted {
			deleted <- time.Now()
		}
	}()
	lost := make(chan time.Time, 1)
	go func() {
		select {
		case <-holder.Lost():
			lost <- time.Now()
		case <-ctx.Done():
		}
	}()
	cluster.Eventually(t, 10*time.Second, "a vouch for the holder", func() bool {
		conf := holderCl.Confirmation()
		return conf.Vouched && time.Since(conf.Sent) < time.Second
	})

	start := time.Now()
	e.logf("SIGSTOP node %s, the holder's server", e.c.nodes[f].id)
	e.c.pause(f)
	defer e.c.resume(f)
	var a acq
	select {
	case a = <-acquired:
	case <-ctx.Done():
		t.Fatal("the waiter never acquired")
	}
	if a.err != nil || a.tok <= tok {
		t.Fatalf("waiter: token %d (holder had %d): %v", a.tok, tok, a.err)
	}
	var del, lostAt time.Time
	select {
	case del = <-deleted:
	case <-ctx.Done():
		t.Fatal("the observer never saw the holder's node deleted")
	}
	select {
	case lostAt = <-lost:
	default:
		t.Fatalf("the waiter acquired %v after the pause, the holder's Lost is still open (state %v)", a.at.Sub(start), holderCl.State())
	}
	t.Logf("after SIGSTOP: holder lost at %v, node deleted at %v, waiter acquired at %v (holder now %v)",
		lostAt.Sub(start).Round(time.Millisecond), del.Sub(start).Round(time.Millisecond), a.at.Sub(start).Round(time.Millisecond), holderCl.State())
	if !lostAt.Before(del) || !lostAt.Before(a.at) {
		t.Fatalf("the holder learnt of its loss %v after its node was deleted, %v after the waiter acquired", lostAt.Sub(del), lostAt.Sub(a.at))
	}
}
