package lockrecipe_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/test/cluster"
)

// TestRWMutexReadersShare: readers hold together; a writer waits for them
// and TryLock fails meanwhile.
func TestRWMutexReadersShare(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	r1 := lockrecipe.NewRWMutex(session(t, c.Servers()...), "/rw")
	r2 := lockrecipe.NewRWMutex(session(t, c.Servers()...), "/rw")
	w := lockrecipe.NewRWMutex(session(t, c.Servers()...), "/rw")
	if _, err := r1.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.TryRLock(ctx); err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if _, err := w.TryLock(ctx); !errors.Is(err, lockrecipe.ErrLocked) {
		t.Fatalf("writer TryLock under readers: %v", err)
	}
	res := goLock(ctx, w.Lock)
	if err := r1.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	pending(t, res, "writer") // r2 still reads (not proof, but cheap)
	if err := r2.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, res, "writer"); r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := r1.TryRLock(ctx); !errors.Is(err, lockrecipe.ErrLocked) {
		t.Fatalf("reader TryRLock under a writer: %v", err)
	}
	if kids := children(t, connect(t, c.Servers()...), "/rw"); len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
}

// TestRWMutexWriterBlocksLaterReaders: a writer queued behind a reader
// blocks readers that come after it (no writer starvation): the later
// reader watches the writer's node, and reads only after the writer is
// done.
func TestRWMutexWriterBlocksLaterReaders(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	var wrec, rrec recorder
	r1 := lockrecipe.NewRWMutex(session(t, c.Servers()...), "/fair")
	w := lockrecipe.NewRWMutex(session(t, c.Servers()...), "/fair", wrec.option())
	r2 := lockrecipe.NewRWMutex(session(t, c.Servers()...), "/fair", rrec.option())
	if _, err := r1.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	wres := goLock(ctx, w.Lock)
	cluster.Eventually(t, 10*time.Second, "the writer to queue", func() bool { return wrec.count(lockrecipe.LockWatching) > 0 })
	wev, _ := wrec.last(lockrecipe.LockWatching)
	rres := goLock(ctx, r2.RLock)
	cluster.Eventually(t, 10*time.Second, "the later reader to queue", func() bool { return rrec.count(lockrecipe.LockWatching) > 0 })
	if rev, _ := rrec.last(lockrecipe.LockWatching); rev.Watched != wev.Node {
		t.Fatalf("later reader watches %s, want the writer's %s", rev.Watched, wev.Node)
	}
	pending(t, rres, "later reader")
	if err := r1.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, wres, "writer")
	if r.err != nil {
		t.Fatal(r.err)
	}
	pending(t, rres, "later reader while the writer holds")
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, rres, "later reader"); r.err != nil {
		t.Fatal(r.err)
	}
	if n := rrec.count(lockrecipe.LockWoken); n != 1 {
		t.Fatalf("later reader woke %d times", n)
	}
}

// TestRWMutexExclusion: concurrent readers and writers never overlap a
// writer.
func TestRWMutexExclusion(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	var readers, writers, maxReaders atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 6; i++ {
		rw := lockrecipe.NewRWMutex(session(t, c.Servers()...), "/rwx")
		write := i%3 == 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 8; j++ {
				if write {
					if _, err := rw.Lock(ctx); err != nil {
						errs <- err
						return
					}
					if writers.Add(1) != 1 || readers.Load() != 0 {
						errs <- fmt.Errorf("writer overlaps: %d writers, %d readers", writers.Load(), readers.Load())
					}
					writers.Add(-1)
					if err := rw.Unlock(ctx); err != nil {
						errs <- err
						return
					}
					continue
				}
				if _, err := rw.RLock(ctx); err != nil {
					errs <- err
					return
				}
				n := readers.Add(1)
				for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
				}
				if writers.Load() != 0 {
					errs <- errors.New("reader overlaps a writer")
				}
				readers.Add(-1)
				if err := rw.RUnlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("at most %d readers at once", maxReaders.Load())
}

// TestSemaphoreLimit: at most n permits are held; the n+1st waits, TryAcquire
// fails without leaving anything, and a release hands the permit on.
func TestSemaphoreLimit(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	const n = 3
	var sems []*lockrecipe.Semaphore
	for i := 0; i < n+2; i++ {
		sems = append(sems, lockrecipe.NewSemaphore(session(t, c.Servers()...), "/sem", n))
	}
	for i := 0; i < n; i++ {
		if _, err := sems[i].Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sems[n].TryAcquire(ctx); !errors.Is(err, lockrecipe.ErrLocked) {
		t.Fatalf("TryAcquire beyond n: %v", err)
	}
	if kids := children(t, obs, "/sem/leases"); len(kids) != n {
		t.Fatalf("leases %v", kids)
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := sems[n].Acquire(tctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire beyond n: %v", err)
	}
	if kids, lk := children(t, obs, "/sem/leases"), children(t, obs, "/sem/lock"); len(kids) != n || len(lk) != 0 {
		t.Fatalf("after a timed-out Acquire: leases %v, queue %v", kids, lk)
	}
	res := goLock(ctx, sems[n].Acquire)
	if err := sems[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, res, "Acquire after a release"); r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := sems[n].Acquire(ctx); !errors.Is(err, lockrecipe.ErrAlreadyHeld) {
		t.Fatalf("second Acquire: %v", err)
	}
	for _, i := range []int{0, 2, n} {
		if err := sems[i].Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSemaphoreConcurrent: many owners, never more than n holders, and n
// holders are reached.
func TestSemaphoreConcurrent(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	const n, owners, rounds = 3, 8, 6
	var holders, peak atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, owners*rounds)
	gate := make(chan struct{})
	for i := 0; i < owners; i++ {
		sem := lockrecipe.NewSemaphore(session(t, c.Servers()...), "/semc", n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < rounds; j++ {
				if _, err := sem.Acquire(ctx); err != nil {
					errs <- err
					return
				}
				h := holders.Add(1)
				if h > n {
					errs <- fmt.Errorf("%d holders", h)
				}
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				if j == 0 {
					// Hold the first permit until n are held at once.
					select {
					case <-gate:
					case <-ctx.Done():
					}
				}
				holders.Add(-1)
				if err := sem.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	cluster.Eventually(t, 20*time.Second, "n holders at once", func() bool { return peak.Load() == n })
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestElection: the first candidate leads, the next waits on it; Leader and
// Observe report the leader's value; Resign and Proclaim show up.
func TestElection(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	a := lockrecipe.NewElection(session(t, c.Servers()...), "/elect")
	b := lockrecipe.NewElection(session(t, c.Servers()...), "/elect")
	watcher := lockrecipe.NewElection(session(t, c.Servers()...), "/elect")
	if _, err := watcher.Leader(ctx); !errors.Is(err, lockrecipe.ErrNoLeader) {
		t.Fatalf("Leader with nobody: %v", err)
	}
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs := watcher.Observe(octx)
	next := func(want string) {
		t.Helper()
		select {
		case v, ok := <-obs:
			if !ok || v != want {
				t.Fatalf("observed %q (%v), want %q", v, ok, want)
			}
		case <-ctx.Done():
			t.Fatalf("nothing observed, want %q", want)
		}
	}
	next("")
	if err := a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	next("a")
	if err := a.Campaign(ctx, "a"); !errors.Is(err, lockrecipe.ErrAlreadyHeld) {
		t.Fatalf("second Campaign: %v", err)
	}
	bres := make(chan error, 1)
	go func() { bres <- b.Campaign(ctx, "b") }()
	if v, err := watcher.Leader(ctx); err != nil || v != "a" {
		t.Fatalf("Leader: %q %v", v, err)
	}
	if err := a.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	next("a2")
	if closed(a.Lost()) {
		t.Fatal("Proclaim closed Lost")
	}
	if a.Token() == 0 {
		t.Fatal("leader has no token")
	}
	lost := a.Lost()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !closed(lost) {
		t.Fatal("Lost open after Resign")
	}
	if err := <-bres; err != nil {
		t.Fatal(err)
	}
	next("b")
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	next("")
	cancel()
	for range obs {
	}
}

// TestElectionObserveSameValue: a new leader is reported even when it
// proclaims the same value as the last one.
func TestElectionObserveSameValue(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	a := lockrecipe.NewElection(session(t, c.Servers()...), "/elect-same")
	watcher := lockrecipe.NewElection(session(t, c.Servers()...), "/elect-same")
	if err := a.Campaign(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	b := lockrecipe.NewElection(session(t, c.Servers()...), "/elect-same", rec.option())
	bres := make(chan error, 1)
	go func() { bres <- b.Campaign(ctx, "v") }()
	cluster.Eventually(t, 10*time.Second, "b waiting behind a", func() bool {
		return rec.count(lockrecipe.LockWatching) > 0
	})
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs := watcher.Observe(octx)
	next := func(what string) {
		t.Helper()
		select {
		case v, ok := <-obs:
			if !ok || v != "v" {
				t.Fatalf("observed %q (%v), want %q for %s", v, ok, "v", what)
			}
		case <-ctx.Done():
			t.Fatalf("nothing observed for %s", what)
		}
	}
	next("a's leadership")
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-bres; err != nil {
		t.Fatal(err)
	}
	next("b's leadership")
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case v, ok := <-obs:
		if !ok || v != "" {
			t.Fatalf("observed %q (%v) once nobody leads", v, ok)
		}
	case <-ctx.Done():
		t.Fatal("the end of the leadership was not observed")
	}
	cancel()
	for range obs {
	}
}

// TestBarrier: Wait blocks while the barrier is set.
func TestBarrier(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	s := session(t, c.Servers()...)
	b := lockrecipe.NewBarrier(s, "/bar/rier")
	if err := b.Wait(ctx); err != nil {
		t.Fatalf("Wait on a lowered barrier: %v", err)
	}
	if err := b.Set(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Set(ctx); err != nil {
		t.Fatalf("Set twice: %v", err)
	}
	done := make(chan error, 3)
	for i := 0; i < 3; i++ {
		w := lockrecipe.NewBarrier(session(t, c.Servers()...), "/bar/rier")
		go func() { done <- w.Wait(ctx) }()
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if err := b.Wait(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a set barrier: %v", err)
	}
	cancel()
	if err := b.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestDoubleBarrier: nobody gets past Enter before n have entered, nobody
// past Leave before all have left; the barrier is clean afterwards.
func TestDoubleBarrier(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	const n = 4
	var entered, left, inside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		d := lockrecipe.NewDoubleBarrier(session(t, c.Servers()...), "/dbl", n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			entered.Add(1)
			if err := d.Enter(ctx); err != nil {
				errs <- err
				return
			}
			if e := entered.Load(); e != n {
				errs <- fmt.Errorf("past Enter with %d entered", e)
			}
			inside.Add(1)
			left.Add(1)
			if err := d.Leave(ctx); err != nil {
				errs <- err
				return
			}
			if l := left.Load(); l != n {
				errs <- fmt.Errorf("past Leave with %d leaving", l)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if kids := children(t, obs, "/dbl"); len(kids) != 0 {
		t.Fatalf("left behind: %v", kids)
	}
}

// TestDoubleBarrierNextRound: the last participant to leave deletes its
// node and "ready" in one transaction (one zxid), so that no state exists
// with "ready" but no participant (a crash between two deletes would leave
// "ready" behind, and the next round's first Enter would pass at once); the
// next round on the same path then waits for its n participants again.
func TestDoubleBarrierNextRound(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	const path, n = "/dbl-rounds", 2
	round := func(r int, before func()) {
		t.Helper()
		ds := make([]*lockrecipe.DoubleBarrier, n)
		for i := range ds {
			ds[i] = lockrecipe.NewDoubleBarrier(session(t, c.Servers()...), path, n)
		}
		run := func(f func(*lockrecipe.DoubleBarrier) error) {
			t.Helper()
			errs := make(chan error, n)
			for _, d := range ds {
				go func() { errs <- f(d) }()
			}
			for range ds {
				if err := <-errs; err != nil {
					t.Fatalf("round %d: %v", r, err)
				}
			}
		}
		run(func(d *lockrecipe.DoubleBarrier) error { return d.Enter(ctx) })
		if before != nil {
			before()
		}
		run(func(d *lockrecipe.DoubleBarrier) error { return d.Leave(ctx) })
		if kids := children(t, obs, path); len(kids) != 0 {
			t.Fatalf("round %d left %v behind", r, kids)
		}
	}
	// Round 1, watching every node as everyone leaves.
	var chans map[string]<-chan client.Event
	round(1, func() {
		kids := children(t, obs, path)
		if len(kids) != n+1 {
			t.Fatalf("inside the barrier: %v", kids)
		}
		chans = map[string]<-chan client.Event{}
		for _, k := range kids {
			_, _, ch, err := obs.GetW(ctx, path+"/"+k)
			if err != nil {
				t.Fatal(err)
			}
			chans[k] = ch
		}
	})
	var readyZxid, lastZxid int64
	for k, ch := range chans {
		var ev client.Event
		select {
		case ev = <-ch:
		case <-ctx.Done():
			t.Fatalf("no event for %s", k)
		}
		if ev.Type != client.EventNodeDeleted {
			t.Fatalf("%s: %+v", k, ev)
		}
		if k == "ready" {
			readyZxid = ev.Zxid
		} else {
			lastZxid = max(lastZxid, ev.Zxid)
		}
	}
	if readyZxid != lastZxid {
		t.Fatalf("ready deleted at zxid %d, the last participant's node at %d: not one transaction", readyZxid, lastZxid)
	}
	// Round 2 on the same path.
	round(2, nil)
}

// TestQueueTakeLeavesNoWatch: a Take that had to wait returns with no
// watch left, in the client or on the server, whether it waited for an item
// (a child watch), for the queue's creation (an exists watch), or found the
// queue created between its read and its watch (the exists watch that was
// then set on the new node, which no later change of the queue fires).
func TestQueueTakeLeavesNoWatch(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	admin := connect(t, c.Servers()...)
	if _, err := admin.Create(ctx, "/wq", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	watches := func(s *lockrecipe.Session) (data, child []string) {
		return c.Members[0].Node().Watches().Watches(s.Client().SessionID())
	}
	for i, tc := range []struct {
		name    string
		exists  bool // the queue's node exists before the Take
		between bool // it is created between Take's read and its watch
	}{
		{"empty queue", true, false},
		{"no queue node", false, false},
		{"created meanwhile", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := fmt.Sprintf("/wq/%d", i)
			create := func() {
				if _, err := admin.Create(ctx, path, nil, client.CreateMode{}); err != nil {
					t.Error(err)
				}
			}
			if tc.exists {
				create()
			}
			var opts []lockrecipe.Option
			if tc.between {
				var once sync.Once
				opts = append(opts, lockrecipe.WithQueueMissing(func(string) { once.Do(create) }))
			}
			st := session(t, c.Servers()...)
			q := lockrecipe.NewQueue(st, path, opts...)
			got := make(chan error, 1)
			var data []byte
			go func() {
				var err error
				data, err = q.Take(ctx)
				got <- err
			}()
			cluster.Eventually(t, 10*time.Second, "Take waiting for an item", func() bool {
				d, ch := watches(st)
				if tc.between {
					return len(ch) > 0 // past the created queue node
				}
				return len(d)+len(ch) > 0
			})
			if _, err := lockrecipe.NewQueue(session(t, c.Servers()...), path).Put(ctx, []byte("item")); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil || string(data) != "item" {
					t.Fatalf("Take: %q %v", data, err)
				}
			case <-ctx.Done():
				t.Fatal("Take did not return")
			}
			if d, ch := watches(st); len(d)+len(ch) != 0 {
				t.Fatalf("the taker's session still watches %v (data) %v (child) on the server", d, ch)
			}
			if err := st.Client().RemoveWatches(ctx, path, client.WatchAny); !errors.Is(err, client.ErrNoWatcher) {
				t.Fatalf("the taker's client still has a watch on %s: %v", path, err)
			}
		})
	}
}

// TestQueue: FIFO for one taker; with concurrent takers every item is taken
// exactly once; Take blocks until a Put.
func TestQueue(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	q := lockrecipe.NewQueue(session(t, c.Servers()...), "/jobs/q")
	for i := 0; i < 5; i++ {
		if _, err := q.Put(ctx, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		data, err := q.Take(ctx)
		if err != nil || string(data) != fmt.Sprint(i) {
			t.Fatalf("Take %d: %q %v", i, data, err)
		}
	}
	const items, takers = 60, 4
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	for i := 0; i < takers; i++ {
		tq := lockrecipe.NewQueue(session(t, c.Servers()...), "/jobs/q")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				data, err := tq.Take(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, string(data))
				done := len(got) >= items
				mu.Unlock()
				if string(data) == "stop" || done {
					return
				}
			}
		}()
	}
	for i := 0; i < items; i++ {
		if _, err := q.Put(ctx, []byte(fmt.Sprintf("%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	cluster.Eventually(t, 20*time.Second, "every item taken", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= items
	})
	for i := 0; i < takers; i++ {
		if _, err := q.Put(ctx, []byte("stop")); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	mu.Lock()
	var items2 []string
	for _, g := range got {
		if g != "stop" {
			items2 = append(items2, g)
		}
	}
	mu.Unlock()
	sort.Strings(items2)
	if len(items2) != items {
		t.Fatalf("took %d items, want %d: %v", len(items2), items, items2)
	}
	for i, g := range items2 {
		if g != fmt.Sprintf("%03d", i) {
			t.Fatalf("items %v", items2)
		}
	}
}
