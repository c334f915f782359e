package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc"
)

var (
	container = client.CreateMode{Kind: client.Container}
	persist   = client.CreateMode{}
)

func ttlMode(d time.Duration) client.CreateMode { return client.CreateMode{Kind: client.TTL, TTL: d} }

func exists(t *testing.T, cl *client.Client, p string) bool {
	t.Helper()
	_, ok, err := cl.Exists(context.Background(), p)
	if err != nil {
		t.Fatalf("exists %s: %v", p, err)
	}
	return ok
}

// TestContainerReaping: a container is reaped once its last child goes, and
// kept while it never had one; nested containers go one level per pass.
func TestContainerReaping(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	for _, p := range []string{"/unused", "/used", "/used/nested"} {
		if _, err := cl.Create(ctx, p, nil, container); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Create(ctx, "/used/nested/leaf", nil, persist); err != nil {
		t.Fatal(err)
	}
	st, _, _ := cl.Exists(ctx, "/used")
	if st.Kind != client.Container || st.EphemeralOwner != 0 {
		t.Fatalf("container stat: %+v", st)
	}
	// Reaping a container fires the usual watches, for any session.
	watcher := connect(t, c.Servers()...)
	_, _, nestedW, err := watcher.GetW(ctx, "/used/nested")
	if err != nil {
		t.Fatal(err)
	}
	_, _, usedW, err := watcher.ChildrenW(ctx, "/used")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, "/used/nested/leaf", -1); err != nil {
		t.Fatal(err)
	}
	c.Eventually(5*time.Second, "the emptied containers to be reaped", func() bool {
		return !exists(t, cl, "/used/nested") && !exists(t, cl, "/used")
	})
	for name, ch := range map[string]<-chan client.Event{"/used/nested": nestedW, "/used": usedW} {
		select {
		case ev := <-ch:
			if ev.Type != client.EventNodeDeleted && ev.Type != client.EventNodeChildrenChanged {
				t.Fatalf("watch on %s: %v", name, ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no watch event for reaped %s", name)
		}
	}
	// Several reaper passes later the unused container is still there.
	zx := cl.LastZxid()
	c.Eventually(5*time.Second, "more reaper passes", func() bool {
		_, err := cl.Create(ctx, "/tick-", nil, client.CreateMode{Sequential: true})
		return err == nil && cl.LastZxid() > zx+5
	})
	if !exists(t, cl, "/unused") {
		t.Fatal("a container that never had a child was reaped")
	}
}

// TestContainerCreateRacesReaper: a child created while the reaper is about
// to delete its empty container either fails with NoNode (the container
// went first) or survives with its container — it is never lost.
func TestContainerCreateRacesReaper(t *testing.T) {
	c := New(t, 1, Options{ReapInterval: 5 * time.Millisecond})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	survived, lost := 0, 0
	for i := 0; i < 60; i++ {
		p := fmt.Sprintf("/race%d", i)
		if _, err := cl.Create(ctx, p, nil, container); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Create(ctx, p+"/a", nil, persist); err != nil {
			t.Fatal(err)
		}
		if err := cl.Delete(ctx, p+"/a", -1); err != nil {
			t.Fatal(err)
		}
		// The container is now reapable; race a create against the reaper.
		_, err := cl.Create(ctx, p+"/b", nil, persist)
		switch {
		case err == nil:
			survived++
			// Many reaper passes later, the child and its container stand.
			zx := cl.LastZxid()
			c.Eventually(5*time.Second, "reaper passes", func() bool {
				_, _ = cl.Create(ctx, "/x-", nil, client.CreateMode{Sequential: true, Kind: client.Ephemeral})
				return cl.LastZxid() > zx+3
			})
			if !exists(t, cl, p+"/b") || !exists(t, cl, p) {
				t.Fatalf("iteration %d: acknowledged child or its container was reaped", i)
			}
		case errors.Is(err, client.ErrNoNode):
			lost++
		default:
			t.Fatal(err)
		}
	}
	t.Logf("create won %d times, reaper won %d times", survived, lost)
}

// TestTTLReaping: a TTL node goes once childless and unmodified for its
// TTL; setData and children keep it; sequential TTL nodes work too.
func TestTTLReaping(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	const ttl = 600 * time.Millisecond
	for _, p := range []string{"/short", "/touched", "/parent"} {
		if _, err := cl.Create(ctx, p, nil, ttlMode(ttl)); err != nil {
			t.Fatal(err)
		}
	}
	seq, err := cl.Create(ctx, "/seq-", nil, client.CreateMode{Kind: client.TTL, TTL: ttl, Sequential: true})
	if err != nil || seq != "/seq-0000000003" { // the fourth child of /
		t.Fatalf("sequential TTL: %q %v", seq, err)
	}
	if _, err := cl.Create(ctx, "/parent/kid", nil, persist); err != nil {
		t.Fatal(err)
	}
	st, _, _ := cl.Exists(ctx, "/short")
	if st.Kind != client.TTL || st.TTL != ttl || st.EphemeralOwner != 0 {
		t.Fatalf("TTL stat: %+v", st)
	}
	created := time.Now()
	// Keep /touched alive by writing to it more often than its TTL.
	deadline := created.Add(3 * ttl)
	for time.Now().Before(deadline) {
		if _, err := cl.Set(ctx, "/touched", []byte("x"), -1); err != nil {
			t.Fatalf("touched node reaped while written: %v", err)
		}
		time.Sleep(ttl / 4) // pacing the writes, not synchronisation
	}
	if exists(t, cl, "/short") || exists(t, cl, seq) {
		t.Fatal("TTL nodes outlived three TTLs")
	}
	if !exists(t, cl, "/parent") || !exists(t, cl, "/parent/kid") {
		t.Fatal("a TTL node with a child was reaped")
	}
	c.Eventually(5*time.Second, "/touched to go once left alone", func() bool { return !exists(t, cl, "/touched") })
	if err := cl.Delete(ctx, "/parent/kid", -1); err != nil {
		t.Fatal(err)
	}
	c.Eventually(5*time.Second, "/parent to go once childless", func() bool { return !exists(t, cl, "/parent") })
}

// TestTTLRejectedCombinations: TTL bounds, ephemeral+TTL, TTL on a server
// with TTL nodes switched off.
func TestTTLRejectedCombinations(t *testing.T) {
	c := New(t, 1, Options{})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	for _, tc := range []struct {
		name string
		mode client.CreateMode
	}{
		{"zero", client.CreateMode{Kind: client.TTL}},
		{"too long", client.CreateMode{Kind: client.TTL, TTL: (1 << 40) * time.Millisecond}},
		{"negative", client.CreateMode{Kind: client.TTL, TTL: -time.Millisecond}},
		{"ephemeral with ttl", client.CreateMode{Kind: client.Ephemeral, TTL: time.Second}},
		{"persistent with ttl", client.CreateMode{Kind: client.Persistent, TTL: time.Second}},
	} {
		if _, err := cl.Create(ctx, "/bad", nil, tc.mode); !errors.Is(err, client.ErrBadArguments) {
			t.Errorf("%s: %v, want ErrBadArguments", tc.name, err)
		}
	}
	if _, err := cl.Create(ctx, "/max", nil, ttlMode((1<<40-1)*time.Millisecond)); err != nil {
		t.Errorf("largest TTL: %v", err)
	}
	if _, err := cl.Multi(ctx, client.CreateOp("/m", nil, ttlMode(time.Hour)), client.CreateOp("/m/c", nil, container)); err != nil {
		t.Errorf("multi creating TTL and container nodes: %v", err)
	}
	if st, _, _ := cl.Exists(ctx, "/m/c"); st.Kind != client.Container {
		t.Errorf("container made by multi: %+v", st)
	}

	off := New(t, 1, Options{DisableTTL: true})
	cl2 := connect(t, off.Servers()...)
	if _, err := cl2.Create(ctx, "/t", nil, ttlMode(time.Second)); !errors.Is(err, client.ErrUnimplemented) {
		t.Errorf("TTL on a server with TTL nodes off: %v", err)
	}
}

// TestReapingContinuesAfterLeaderKill: the new leader resumes reaping, and
// a server cut off from the majority reaps nothing on its own.
func TestReapingContinuesAfterLeaderKill(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	if _, err := cl.Create(ctx, "/c", nil, container); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Create(ctx, "/c/x", nil, persist); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Create(ctx, "/ttl", nil, ttlMode(time.Hour)); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(5*time.Second, cl.LastZxid())
	old := c.LeaderIndex()
	c.Stop(old)
	c.WaitLeader(10 * time.Second)
	if err := cl.Delete(ctx, "/c/x", -1); err != nil {
		t.Fatal(err)
	}
	c.Eventually(5*time.Second, "the new leader to reap the container", func() bool { return !exists(t, cl, "/c") })

	// A lone server (no quorum) never reaps locally, even past a TTL. The
	// TTL outlasts cutting the server off, which the check below confirms.
	const ttl = 3 * time.Second
	if _, err := cl.Create(ctx, "/soon", nil, ttlMode(ttl)); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	c.WaitConverged(5*time.Second, cl.LastZxid())
	lone := c.LeaderIndex()
	c.Stop((lone + 1) % 3)
	if (lone+1)%3 == old {
		c.Stop((lone + 2) % 3)
	}
	n := c.Members[lone].Node()
	before := n.FSM().AppliedIndex()
	if !hasNode(n, "/soon") {
		t.Fatalf("/soon was reaped before the server was cut off (%v after its creation): the TTL is too short for this machine", time.Since(created))
	}
	// Wait until the TTL has passed and the server has noticed it lost its
	// quorum (it steps down). The applied index only grows, so reading it
	// last thing before the quorum comes back covers the whole time
	// without one: no apply, however late, can slip past it.
	c.Eventually(30*time.Second, "the TTL to pass on the cut-off server, no longer leader", func() bool {
		return time.Since(created) > ttl && !n.IsLeader()
	})
	if !hasNode(n, "/soon") {
		t.Error("a server without a quorum reaped /soon")
	}
	if got := n.FSM().AppliedIndex(); got != before {
		t.Fatalf("a server without a quorum applied entries %d..%d", before+1, got)
	}
	c.Start(old)
	c.Eventually(10*time.Second, "reaping once the quorum is back", func() bool {
		nn := c.Members[lone].Node()
		var gone bool
		cl2 := connect(t, nn.ClientAddr())
		_, ok, err := cl2.Exists(context.Background(), "/soon")
		gone = err == nil && !ok
		return gone
	})
}

// hasNode reports whether path is in n's own tree.
func hasNode(n *rpc.Node, path string) bool {
	found := false
	n.FSM().Read(func(v fsm.View) {
		_, err := v.Tree.Exists(path)
		found = err == nil
	})
	return found
}
