package lockrecipe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/test/cluster"
)

// TestMutexLockUnlock: the lock node is an ephemeral sequential protected
// child of the lock path, whose missing parents become containers; tokens
// grow; a second Lock on a held Mutex is an error, as is an Unlock of a
// lock not held.
func TestMutexLockUnlock(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	s := lockrecipe.NewSession(cl)
	m := lockrecipe.NewMutex(s, "/app/locks/a")
	if err := m.Unlock(ctx); !errors.Is(err, lockrecipe.ErrNotHeld) {
		t.Fatalf("Unlock before Lock: %v", err)
	}
	var last lockrecipe.Token
	for i := 0; i < 3; i++ {
		tok, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tok <= last || m.Token() != tok {
			t.Fatalf("token %d after %d (Token() %d)", tok, last, m.Token())
		}
		last = tok
		if closed(m.Lost()) {
			t.Fatal("Lost closed while held")
		}
		kids := children(t, cl, "/app/locks/a")
		if len(kids) != 1 || !strings.HasPrefix(kids[0], "_c_") || !strings.Contains(kids[0], "-lock-") {
			t.Fatalf("lock children %v", kids)
		}
		st, _, err := cl.Exists(ctx, m.Node())
		if err != nil || st.EphemeralOwner != cl.SessionID() || st.Czxid != int64(tok) {
			t.Fatalf("lock node stat %+v (session %d, token %d): %v", st, cl.SessionID(), tok, err)
		}
		if _, err := m.Lock(ctx); !errors.Is(err, lockrecipe.ErrAlreadyHeld) {
			t.Fatalf("second Lock: %v", err)
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, lockrecipe.ErrAlreadyHeld) {
			t.Fatalf("TryLock while held: %v", err)
		}
		lost := m.Lost()
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if !closed(lost) {
			t.Fatal("Lost still open after Unlock")
		}
		if kids := children(t, cl, "/app/locks/a"); len(kids) != 0 {
			t.Fatalf("children after Unlock: %v", kids)
		}
	}
	for _, p := range []string{"/app", "/app/locks", "/app/locks/a"} {
		st, ok, err := cl.Exists(ctx, p)
		if err != nil || !ok || st.Kind != client.Container {
			t.Fatalf("%s: %+v %v %v, want a container", p, st, ok, err)
		}
	}
}

// TestMutexExcludes: a second owner waits for the first and gets a larger
// token; the waiter watches the holder (its predecessor), not the parent.
func TestMutexExcludes(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	var rec recorder
	a := lockrecipe.NewMutex(session(t, c.Servers()...), "/l")
	b := lockrecipe.NewMutex(session(t, c.Servers()...), "/l", rec.option())
	ta, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := goLock(ctx, b.Lock)
	cluster.Eventually(t, 10*time.Second, "b to watch a", func() bool {
		ev, ok := rec.last(lockrecipe.LockWatching)
		return ok && ev.Watched == a.Node()
	})
	pending(t, res, "b.Lock")
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, res, "b.Lock")
	if r.err != nil || r.tok <= ta {
		t.Fatalf("b.Lock: token %d (a had %d): %v", r.tok, ta, r.err)
	}
	if n := rec.count(lockrecipe.LockWoken); n != 1 {
		t.Fatalf("b woke %d times", n)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMutexTryLock: TryLock fails at once while another holds, leaving no
// node, and succeeds once the lock is free.
func TestMutexTryLock(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	a := lockrecipe.NewMutex(session(t, c.Servers()...), "/try")
	b := lockrecipe.NewMutex(session(t, c.Servers()...), "/try")
	if _, err := a.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := b.TryLock(ctx); !errors.Is(err, lockrecipe.ErrLocked) {
		t.Fatalf("TryLock while held: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("TryLock took %v", d)
	}
	if kids := children(t, obs, "/try"); len(kids) != 1 {
		t.Fatalf("TryLock left nodes: %v", kids)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx); err != nil {
		t.Fatalf("TryLock on a free lock: %v", err)
	}
}

// TestMutexTryLockRace: when a TryLock passes the pre-check but finds an
// earlier node after creating its own, it deletes its node.
func TestMutexTryLockRace(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	holder := lockrecipe.NewMutex(session(t, c.Servers()...), "/race")
	var held lockrecipe.Token
	// The holder's Lock slips in between b's pre-check and b's create.
	b := lockrecipe.NewMutex(session(t, c.Servers()...), "/race", lockrecipe.WithFailCreate(func(string) error {
		if held == 0 {
			tok, err := holder.Lock(ctx)
			if err != nil {
				return err
			}
			held = tok
		}
		return nil
	}))
	if _, err := b.TryLock(ctx); !errors.Is(err, lockrecipe.ErrLocked) {
		t.Fatalf("TryLock: %v", err)
	}
	if kids := children(t, obs, "/race"); len(kids) != 1 || "/race/"+kids[0] != holder.Node() {
		t.Fatalf("children %v, want only the holder's %s", kids, holder.Node())
	}
}

// TestMutexLockTimeoutCleansUp: a Lock whose ctx times out (or is
// cancelled) returns the ctx error and leaves no node behind, and no watch:
// the waiter's watch on its predecessor is stopped, on the server too.
func TestMutexLockTimeoutCleansUp(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	a := lockrecipe.NewMutex(session(t, c.Servers()...), "/to")
	if _, err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// noWatchLeft: the waiter's session holds no watch on the server.
	noWatchLeft := func(waiter *lockrecipe.Session, what string) {
		t.Helper()
		data, child := c.Members[0].Node().Watches().Watches(waiter.Client().SessionID())
		if len(data)+len(child) != 0 {
			t.Fatalf("%s: the waiter's session still watches %v (data) %v (child)", what, data, child)
		}
	}
	sb := session(t, c.Servers()...)
	b := lockrecipe.NewMutex(sb, "/to")
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := b.Lock(tctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with timeout: %v", err)
	}
	if kids := children(t, obs, "/to"); len(kids) != 1 {
		t.Fatalf("nodes after the timeout: %v", kids)
	}
	noWatchLeft(sb, "after the timeout")
	cctx, cancel := context.WithCancel(ctx)
	var rec recorder
	sb2 := session(t, c.Servers()...)
	b2 := lockrecipe.NewMutex(sb2, "/to", rec.option())
	res := goLock(cctx, b2.Lock)
	cluster.Eventually(t, 10*time.Second, "b2 waiting", func() bool { return rec.count(lockrecipe.LockWatching) > 0 })
	cancel()
	if r := waitResult(t, res, "cancelled Lock"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v", r.err)
	}
	if kids := children(t, obs, "/to"); len(kids) != 1 {
		t.Fatalf("nodes after the cancel: %v", kids)
	}
	noWatchLeft(sb2, "after the cancel")
	// The Mutex can be used again.
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMutexOwnNodeVanishedWhileWaiting: a waiter whose node was deleted
// behind its back fails with ErrLockLost when it next looks, instead of
// acquiring without a node (go-zookeeper's hole).
func TestMutexOwnNodeVanishedWhileWaiting(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	admin := connect(t, c.Servers()...)
	a := lockrecipe.NewMutex(session(t, c.Servers()...), "/v")
	if _, err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	b := lockrecipe.NewMutex(session(t, c.Servers()...), "/v", rec.option())
	res := goLock(ctx, b.Lock)
	cluster.Eventually(t, 10*time.Second, "b waiting", func() bool { return rec.count(lockrecipe.LockWatching) > 0 })
	ev, _ := rec.last(lockrecipe.LockWatching)
	if err := admin.Delete(ctx, ev.Node, -1); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, res, "b.Lock")
	if !errors.Is(r.err, lockrecipe.ErrLockLost) {
		t.Fatalf("b.Lock after its node vanished: %v %v", r.tok, r.err)
	}
	if b.Token() != 0 || !closed(b.Lost()) {
		t.Fatal("b counts as holding")
	}
}

// TestMutexLostAndGuard: when the holder's node is deleted by someone else,
// Lost closes, GuardedMulti refuses to write, and Unlock reports the loss.
func TestMutexLostAndGuard(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	admin := connect(t, c.Servers()...)
	if _, err := admin.Create(ctx, "/res", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	m := lockrecipe.NewMutex(session(t, c.Servers()...), "/g")
	if _, err := m.GuardedMulti(ctx, client.SetOp("/res", []byte("x"), -1)); !errors.Is(err, lockrecipe.ErrNotHeld) {
		t.Fatalf("GuardedMulti before Lock: %v", err)
	}
	tok, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.GuardedMulti(ctx, client.SetOp("/res", []byte(fmt.Sprint(tok)), -1), client.CreateOp("/res/child", nil, client.CreateMode{}))
	if err != nil || len(res) != 2 || res[1].Path != "/res/child" {
		t.Fatalf("GuardedMulti while held: %+v %v", res, err)
	}
	// A failing op of the caller is reported as such, not as a loss.
	if _, err := m.GuardedMulti(ctx, client.CreateOp("/res/child", nil, client.CreateMode{})); !errors.Is(err, client.ErrNodeExists) || errors.Is(err, lockrecipe.ErrLockLost) {
		t.Fatalf("GuardedMulti with a failing op: %v", err)
	}
	if err := admin.Delete(ctx, m.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Lost():
	case <-ctx.Done():
		t.Fatal("Lost did not close after the node was deleted")
	}
	if _, err := m.GuardedMulti(ctx, client.SetOp("/res", []byte("stale"), -1)); !errors.Is(err, lockrecipe.ErrLockLost) {
		t.Fatalf("GuardedMulti after loss: %v", err)
	}
	if data, _, _ := admin.Get(ctx, "/res"); string(data) != fmt.Sprint(tok) {
		t.Fatalf("a stale holder wrote %q", data)
	}
	if err := m.Unlock(ctx); !errors.Is(err, lockrecipe.ErrLockLost) {
		t.Fatalf("Unlock after loss: %v", err)
	}
	if _, err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock again: %v", err)
	}
}

// TestMutexUnlockOnlyOwn: Unlock deletes only the caller's node; nobody
// can release another's lock.
func TestMutexUnlockOnlyOwn(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	s := session(t, c.Servers()...)
	a := lockrecipe.NewMutex(s, "/own")
	b := lockrecipe.NewMutex(s, "/own") // same session, another owner
	if _, err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx); !errors.Is(err, lockrecipe.ErrNotHeld) {
		t.Fatalf("b.Unlock: %v", err)
	}
	if _, err := b.TryLock(ctx); !errors.Is(err, lockrecipe.ErrLocked) {
		t.Fatalf("b.TryLock with one session: %v", err)
	}
	if closed(a.Lost()) {
		t.Fatal("a lost its lock")
	}
}

// TestReentrantMutex: reentrancy is explicit and counted.
func TestReentrantMutex(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	r := lockrecipe.NewReentrantMutex(session(t, c.Servers()...), "/re")
	t1, err := r.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t2, err := r.Lock(ctx)
	if err != nil || t2 != t1 || r.Count() != 2 {
		t.Fatalf("second Lock: %d %v count %d", t2, err, r.Count())
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if kids := children(t, obs, "/re"); len(kids) != 1 {
		t.Fatalf("released after one of two Unlocks: %v", kids)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if kids := children(t, obs, "/re"); len(kids) != 0 {
		t.Fatalf("held after two Unlocks: %v", kids)
	}
	if err := r.Unlock(ctx); !errors.Is(err, lockrecipe.ErrNotHeld) {
		t.Fatalf("third Unlock: %v", err)
	}
}

// TestReentrantMutexLockAfterLoss: once the lock is lost (its node deleted
// by someone else), a re-entry fails with ErrLockLost and resets the count
// instead of counting on a lock nobody holds; the next Lock queues afresh.
func TestReentrantMutexLockAfterLoss(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	admin := connect(t, c.Servers()...)
	const path = "/re-lost"
	r := lockrecipe.NewReentrantMutex(session(t, c.Servers()...), path)
	other := lockrecipe.NewMutex(session(t, c.Servers()...), path)
	tok, err := r.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if t2, err := r.Lock(ctx); err != nil || t2 != tok || r.Count() != 2 {
		t.Fatalf("re-entry while held: %d %v count %d", t2, err, r.Count())
	}
	kids := children(t, admin, path)
	if len(kids) != 1 {
		t.Fatalf("lock nodes %v", kids)
	}
	if err := admin.Delete(ctx, path+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Lost():
	case <-ctx.Done():
		t.Fatal("Lost did not close after the node was deleted")
	}
	if t3, err := r.Lock(ctx); !errors.Is(err, lockrecipe.ErrLockLost) || t3 != 0 {
		t.Fatalf("re-entry after the loss: token %d, err %v; want ErrLockLost", t3, err)
	}
	if n := r.Count(); n != 0 {
		t.Fatalf("count %d after a failed re-entry, want 0", n)
	}
	if !closed(r.Lost()) {
		t.Fatal("Lost reopened")
	}
	if err := r.Unlock(ctx); !errors.Is(err, lockrecipe.ErrNotHeld) {
		t.Fatalf("Unlock after the loss: %v", err)
	}
	// Nobody holds the lock: another owner takes it, and r waits behind it.
	otok, err := other.TryLock(ctx)
	if err != nil || otok <= tok {
		t.Fatalf("another owner's TryLock: %d %v", otok, err)
	}
	res := goLock(ctx, r.Lock)
	cluster.Eventually(t, 10*time.Second, "r queued behind the other owner", func() bool {
		return len(children(t, admin, path)) == 2
	})
	pending(t, res, "r.Lock while another owner holds")
	if n := r.Count(); n != 0 {
		t.Fatalf("count %d while waiting", n)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	got := waitResult(t, res, "r.Lock after the other owner's Unlock")
	if got.err != nil || got.tok <= otok || r.Count() != 1 {
		t.Fatalf("Lock afresh: %d %v count %d", got.tok, got.err, r.Count())
	}
	if closed(r.Lost()) {
		t.Fatal("the new hold is lost")
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if kids := children(t, admin, path); len(kids) != 0 {
		t.Fatalf("left behind: %v", kids)
	}
}

// TestReentrantMutexCountWhileWaiting: Count and Unlock answer at once
// while a Lock waits for the lock (no internal mutex is held across the
// wait).
func TestReentrantMutexCountWhileWaiting(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	const path = "/re-wait"
	holder := lockrecipe.NewMutex(session(t, c.Servers()...), path)
	if _, err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	r := lockrecipe.NewReentrantMutex(session(t, c.Servers()...), path, rec.option())
	res := goLock(ctx, r.Lock)
	cluster.Eventually(t, 10*time.Second, "r waiting for the holder", func() bool {
		return rec.count(lockrecipe.LockWatching) > 0
	})
	counted := make(chan int, 1)
	go func() { counted <- r.Count() }()
	select {
	case n := <-counted:
		if n != 0 {
			t.Fatalf("Count %d while waiting", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Count blocks while Lock waits")
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- r.Unlock(ctx) }()
	select {
	case err := <-unlocked:
		if !errors.Is(err, lockrecipe.ErrNotHeld) {
			t.Fatalf("Unlock while waiting: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Unlock blocks while Lock waits")
	}
	pending(t, res, "r.Lock while the holder holds")
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := waitResult(t, res, "r.Lock"); got.err != nil || r.Count() != 1 {
		t.Fatalf("Lock: %v count %d", got.err, r.Count())
	}
	if err := r.Unlock(ctx); err != nil || r.Count() != 0 {
		t.Fatalf("Unlock: %v count %d", err, r.Count())
	}
}

// TestMutexNoHerd: 50 waiters, each on its own client, queue behind a
// holder. Each watches its own predecessor (50 distinct nodes), and
// draining the whole queue wakes each waiter exactly once (a herd would
// deliver ~50*51/2 watch events). The wakes are counted per waiter and
// checked once every waiter's Lock has returned, when no wake can come any
// more: a release that woke a second waiter would show as that waiter's
// second wake, however late it came.
func TestMutexNoHerd(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	const waiters = 50
	var mu sync.Mutex
	watched := map[string]string{} // waiter node -> watched node
	woken := map[string]int{}      // waiter node -> wakes
	obs := lockrecipe.WithObserver(func(ev lockrecipe.LockEvent) {
		switch ev.Kind {
		case lockrecipe.LockWoken:
			mu.Lock()
			woken[ev.Node]++
			mu.Unlock()
		case lockrecipe.LockWatching:
			mu.Lock()
			watched[ev.Node] = ev.Watched
			mu.Unlock()
		}
	})
	holder := lockrecipe.NewMutex(session(t, c.Servers()...), "/herd")
	if _, err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	clients := make([]*client.Client, waiters)
	ms := make([]*lockrecipe.Mutex, waiters)
	results := make([]<-chan lockResult, waiters)
	for i := range ms {
		clients[i] = connect(t, c.Servers()...)
		ms[i] = lockrecipe.NewMutex(lockrecipe.NewSession(clients[i]), "/herd", obs)
		results[i] = goLock(ctx, ms[i].Lock)
	}
	cluster.Eventually(t, 20*time.Second, "50 waiters watching", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(watched) == waiters
	})
	seen := map[string]bool{}
	onHolder := 0
	for node, w := range watched {
		if seen[w] || w == node {
			t.Fatalf("%s watched by two waiters (or itself)", w)
		}
		seen[w] = true
		if w == holder.Node() {
			onHolder++
		}
	}
	if onHolder != 1 {
		t.Fatalf("%d waiters watch the holder", onHolder)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var next int
	cluster.Eventually(t, 10*time.Second, "the next holder", func() bool {
		for i := range ms {
			if ms[i].Token() != 0 {
				next = i
				return true
			}
		}
		return false
	})
	// Drain: each holder releases in turn.
	done := 0
	cur := next
	for done < waiters {
		r := waitResult(t, results[cur], "a waiter's Lock")
		if r.err != nil {
			t.Fatal(r.err)
		}
		done++
		if err := ms[cur].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if done == waiters {
			break
		}
		cluster.Eventually(t, 10*time.Second, "the next holder", func() bool {
			for i := range ms {
				if ms[i].Token() != 0 {
					cur = i
					return true
				}
			}
			return false
		})
	}
	// Every Lock has returned: the counts are final.
	mu.Lock()
	defer mu.Unlock()
	if len(woken) != waiters {
		t.Errorf("%d waiters woken, want %d: %v", len(woken), waiters, woken)
	}
	for node := range watched {
		if n := woken[node]; n != 1 {
			t.Errorf("waiter %s woken %d times, want once", node, n)
		}
	}
}

// TestMutexWatchesOnlyWhenAsked: a holder sets a watch on its own node only
// once the program asks for Lost (a holder that never looks spares the
// server a read and an event per acquisition, as go-zookeeper's and
// Curator's locks do); from then on, its node's deletion closes Lost.
func TestMutexWatchesOnlyWhenAsked(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	m := lockrecipe.NewMutex(lockrecipe.NewSession(cl), "/lazy")
	for range 3 {
		if _, err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		// A round trip on the same session: a watch the recipe had sent for
		// (before, it set one as soon as it held) is in place once this
		// returns.
		if _, _, err := cl.Exists(ctx, "/"); err != nil {
			t.Fatal(err)
		}
		if d, ch := c.Members[0].Node().Watches().Watches(cl.SessionID()); len(d)+len(ch) != 0 {
			t.Fatalf("the holder watches %v %v before anyone asked for Lost", d, ch)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lost := m.Lost()
	cluster.Eventually(t, 10*time.Second, "the holder to watch its node", func() bool {
		d, _ := c.Members[0].Node().Watches().Watches(cl.SessionID())
		return slices.Contains(d, m.Node())
	})
	admin := connect(t, c.Servers()...)
	if err := admin.Delete(ctx, m.Node(), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatal("Lost did not close after the node was deleted")
	}
}
