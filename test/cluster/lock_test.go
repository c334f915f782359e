package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// lockClient connects a client with a 4s session to servers.
func lockClient(t testing.TB, servers ...string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, servers, client.WithSessionTimeout(4*time.Second))
	if err != nil {
		t.Fatalf("connect %v: %v", servers, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func lockCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// exclusionChecker records the holders of one lock: whoever enters while
// another holder has not left must find that holder's Lost closed, and
// tokens must grow strictly.
type exclusionChecker struct {
	mu         sync.Mutex
	holder     int // worker id + 1, 0 when free
	holderLost <-chan struct{}
	last       lockrecipe.Token
	entries    int
	takeovers  int // entries while the previous holder had lost but not left
	violations []string
}

func (ck *exclusionChecker) enter(id int, tok lockrecipe.Token, lost <-chan struct{}) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	if ck.holder != 0 {
		if isClosed(ck.holderLost) {
			ck.takeovers++
		} else {
			ck.violations = append(ck.violations, fmt.Sprintf("worker %d acquired (token %d) while worker %d held without having lost", id, tok, ck.holder-1))
		}
	}
	if tok <= ck.last {
		ck.violations = append(ck.violations, fmt.Sprintf("worker %d got token %d after %d", id, tok, ck.last))
	}
	ck.holder, ck.holderLost, ck.last = id+1, lost, tok
	ck.entries++
}

func (ck *exclusionChecker) leave(id int) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	if ck.holder == id+1 {
		ck.holder, ck.holderLost = 0, nil
	}
}

func (ck *exclusionChecker) count() int {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	return ck.entries
}

func (ck *exclusionChecker) currentHolder() int {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	return ck.holder - 1
}

func (ck *exclusionChecker) check(t *testing.T) {
	t.Helper()
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for _, v := range ck.violations {
		t.Error(v)
	}
}

// lockWorkload runs workers, each with its own client, that take the lock
// rounds times and, while holding it, increment a counter node with a
// guarded compare-and-set (which mutual exclusion makes always succeed).
type lockWorkload struct {
	ck      exclusionChecker
	clients []*client.Client
	done    sync.WaitGroup
	failed  atomic.Int32
	lostCS  atomic.Int32 // critical sections cut short by Lost
	rounds  atomic.Int32 // rounds completed
	applied atomic.Int64 // counter increments acknowledged
	// holdNext makes the next holder keep the lock until its Lost closes
	// or release is closed; it sends its hold on heldBy.
	holdNext atomic.Bool
	heldBy   chan heldLock
	release  chan struct{}
}

// heldLock is the hold that holdNext asked for.
type heldLock struct {
	worker int
	lost   <-chan struct{}
}

func startLockWorkload(t *testing.T, c *Cluster, workers, rounds int) *lockWorkload {
	t.Helper()
	ctx := lockCtx(t, 2*time.Minute)
	setup := lockClient(t, c.Servers()...)
	if _, err := setup.Create(ctx, "/counter", []byte("0"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	w := &lockWorkload{heldBy: make(chan heldLock, 1), release: make(chan struct{})}
	for i := 0; i < workers; i++ {
		w.clients = append(w.clients, lockClient(t, c.Servers()...))
	}
	for i := 0; i < workers; i++ {
		m := lockrecipe.NewMutex(lockrecipe.NewSession(w.clients[i]), "/locks/mutex")
		w.done.Add(1)
		go func(id int, cl *client.Client) {
			defer w.done.Done()
			for r := 0; r < rounds; r++ {
				if err := w.round(ctx, id, cl, m); err != nil {
					w.failed.Add(1)
					t.Errorf("worker %d round %d: %v", id, r, err)
					return
				}
				w.rounds.Add(1)
			}
		}(i, w.clients[i])
	}
	return w
}

func (w *lockWorkload) round(ctx context.Context, id int, cl *client.Client, m *lockrecipe.Mutex) error {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tok, err := m.Lock(lctx)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	lost := m.Lost()
	if !isClosed(lost) {
		w.ck.enter(id, tok, lost)
		if w.holdNext.CompareAndSwap(true, false) {
			w.heldBy <- heldLock{id, lost}
			select {
			case <-lost:
			case <-w.release:
			case <-lctx.Done():
			}
		}
		if isClosed(lost) {
			// Suspended: no longer sure to hold, so no write.
			err = lockrecipe.ErrLockLost
		} else {
			err = w.increment(lctx, cl, m)
		}
		w.ck.leave(id)
		if errors.Is(err, lockrecipe.ErrLockLost) && isClosed(lost) {
			w.lostCS.Add(1)
			err = nil
		}
		if err != nil {
			return fmt.Errorf("critical section: %w", err)
		}
	} else {
		w.lostCS.Add(1)
	}
	if err := m.Unlock(lctx); err != nil && !(errors.Is(err, lockrecipe.ErrLockLost) && isClosed(lost)) {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// increment reads the counter and sets it to +1 with the version read, in
// a multi guarded by the lock node.
func (w *lockWorkload) increment(ctx context.Context, cl *client.Client, m *lockrecipe.Mutex) error {
	data, st, err := cl.Get(ctx, "/counter")
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(data))
	if _, err := m.GuardedMulti(ctx, client.SetOp("/counter", []byte(strconv.Itoa(n+1)), st.Version)); err != nil {
		if errors.Is(err, client.ErrBadVersion) {
			return fmt.Errorf("counter changed under the lock (read version %d): %w", st.Version, err)
		}
		return err
	}
	w.applied.Add(1)
	return nil
}

func (w *lockWorkload) wait(t *testing.T, c *Cluster, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.done.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("workers stuck: %d acquisitions after %v", w.ck.count(), d)
	}
	w.ck.check(t)
	ctx := lockCtx(t, 10*time.Second)
	r := lockClient(t, c.Servers()...)
	if err := r.Sync(ctx, "/counter"); err != nil {
		t.Fatal(err)
	}
	data, _, err := r.Get(ctx, "/counter")
	if err != nil {
		t.Fatal(err)
	}
	if got := strconv.FormatInt(w.applied.Load(), 10); string(data) != got {
		t.Fatalf("counter %s after %s acknowledged increments", data, got)
	}
	kids, _, err := r.Children(ctx, "/locks/mutex")
	if err != nil && !errors.Is(err, client.ErrNoNode) {
		t.Fatal(err)
	}
	if len(kids) != 0 {
		t.Fatalf("lock nodes left behind: %v", kids)
	}
}

// TestLockMutualExclusion: 20 clients x 50 acquisitions on a 3-node
// cluster: never two holders, tokens strictly increasing, every guarded
// increment applied.
func TestLockMutualExclusion(t *testing.T) {
	c := New(t, 3, Options{})
	const workers, rounds = 20, 50
	start := time.Now()
	w := startLockWorkload(t, c, workers, rounds)
	w.wait(t, c, 90*time.Second)
	if n := w.ck.count(); n != workers*rounds || w.rounds.Load() != workers*rounds || w.lostCS.Load() != 0 {
		t.Fatalf("%d acquisitions (%d cut short), want %d", n, w.lostCS.Load(), workers*rounds)
	}
	t.Logf("%d acquisitions in %v", workers*rounds, time.Since(start).Round(time.Millisecond))
}

// TestLockMutualExclusionUnderRestarts: the same workload while the leader
// is stopped and restarted twice and then a holder's server is stopped and
// restarted: still never two holders at once, and no worker is stuck. The
// holder whose server stopped keeps the lock: its client moves to another
// server, which vouches for the session long before it could expire, so its
// Lost stays open (before vouches, it counted as lost at the disconnect).
func TestLockMutualExclusionUnderRestarts(t *testing.T) {
	c := New(t, 3, Options{})
	const workers, rounds = 20, 50
	start := time.Now()
	w := startLockWorkload(t, c, workers, rounds)
	progress := func(n int, what string) {
		t.Helper()
		target := w.ck.count() + n
		c.Eventually(30*time.Second, what, func() bool {
			return w.ck.count() >= target || w.failed.Load() > 0 || int(w.rounds.Load()) == workers*rounds
		})
	}
	progress(100, "a first 100 acquisitions")
	for k := 0; k < 2; k++ {
		l := c.WaitLeader(15 * time.Second) // a leader, not a moment's election
		c.Stop(l)
		t.Logf("stopped leader %s after %d acquisitions", c.Members[l].ID, w.ck.count())
		c.WaitLeader(15 * time.Second)
		progress(50, "acquisitions under the new leader")
		c.Start(l)
		progress(50, "acquisitions after the restart")
	}
	// Stop the server of a holder while it holds.
	w.holdNext.Store(true)
	var h heldLock
	select {
	case h = <-w.heldBy:
	case <-time.After(30 * time.Second):
		t.Fatal("no holder kept the lock")
	}
	holder := w.clients[h.worker]
	victim := -1
	for i, m := range c.Members {
		if m.Cfg.ClientAddr == holder.Server() {
			victim = i
		}
	}
	stopped := time.Now()
	c.Stop(victim)
	t.Logf("stopped server %s of a holder after %d acquisitions", c.Members[victim].ID, w.ck.count())
	c.Eventually(15*time.Second, "the holder's session to be confirmed on another server", func() bool {
		return holder.Server() != c.Members[victim].Cfg.ClientAddr && holder.Confirmation().Sent.After(stopped)
	})
	if isClosed(h.lost) || holder.Confirmation().Suspended {
		t.Fatalf("the holder counts as lost after its server stopped (state %v)", holder.State())
	}
	close(w.release)
	c.WaitLeader(15 * time.Second)
	progress(50, "acquisitions after stopping a holder's server")
	c.Start(victim)
	w.wait(t, c, 120*time.Second)
	if n := w.rounds.Load(); n != workers*rounds {
		t.Fatalf("%d rounds (%d cut short by Lost), want %d", n, w.lostCS.Load(), workers*rounds)
	}
	w.ck.mu.Lock()
	t.Logf("%d acquisitions (%d critical sections cut short by Lost, %d takeovers after Lost) in %v",
		w.ck.entries, w.lostCS.Load(), w.ck.takeovers, time.Since(start).Round(time.Millisecond))
	w.ck.mu.Unlock()
}

// TestLockHolderSessionExpires: a holder connected only to one server
// loses that server; its session expires. It learns through Lost before a
// waiter acquires; its Unlock then reports the loss; a waiter of the same
// server fails with ErrLockLost and client.ErrSessionExpired instead of
// acquiring; the other waiter gets the lock with a larger token.
func TestLockHolderSessionExpires(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := lockCtx(t, 40*time.Second)
	f := c.Follower()
	stranded := lockClient(t, c.Members[f].Cfg.ClientAddr)
	ss := lockrecipe.NewSession(stranded)
	holder := lockrecipe.NewMutex(ss, "/locks/exp")
	tok, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A waiter on the same doomed session, and one on a healthy session.
	doomed := lockrecipe.NewMutex(ss, "/locks/exp")
	doomedRes := make(chan error, 1)
	go func() { _, err := doomed.Lock(ctx); doomedRes <- err }()
	var others []string
	for i, m := range c.Members {
		if i != f {
			others = append(others, m.Cfg.ClientAddr)
		}
	}
	waiter := lockrecipe.NewMutex(lockrecipe.NewSession(lockClient(t, others...)), "/locks/exp")
	type acq struct {
		tok        lockrecipe.Token
		err        error
		holderLost bool
	}
	waiterRes := make(chan acq, 1)
	go func() {
		tok, err := waiter.Lock(ctx)
		waiterRes <- acq{tok, err, isClosed(holder.Lost())}
	}()
	obs := lockClient(t, others...)
	c.Eventually(10*time.Second, "three lock nodes", func() bool {
		kids, _, _ := obs.Children(ctx, "/locks/exp")
		return len(kids) == 3
	})
	// And the doomed waiter's create answered: otherwise its outcome is
	// unknown when the server stops, and it fails with that instead.
	var doomedZxid int64
	kids, _, err := obs.Children(ctx, "/locks/exp")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if st, ok, err := obs.Exists(ctx, "/locks/exp/"+k); err == nil && ok && st.EphemeralOwner == stranded.SessionID() {
			doomedZxid = max(doomedZxid, st.Czxid)
		}
	}
	c.Eventually(10*time.Second, "the stranded session's creates to be answered", func() bool {
		return stranded.LastZxid() >= doomedZxid
	})
	stopped := time.Now()
	c.Stop(f)
	select {
	case <-holder.Lost():
		t.Logf("holder learnt it lost the lock %v after its server stopped", time.Since(stopped).Round(time.Millisecond))
	case r := <-waiterRes:
		t.Fatalf("waiter acquired (%v) before the holder learnt it lost the lock", r.err)
	case <-ctx.Done():
		t.Fatal("holder never learnt it lost the lock")
	}
	r := <-waiterRes
	if r.err != nil || !r.holderLost || r.tok <= tok {
		t.Fatalf("waiter: token %d (holder had %d), err %v, holder's Lost closed at acquisition: %v", r.tok, tok, r.err, r.holderLost)
	}
	t.Logf("waiter acquired %v after the server stopped", time.Since(stopped).Round(time.Millisecond))
	if err := <-doomedRes; !errors.Is(err, lockrecipe.ErrLockLost) || !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("waiter of the expired session: %v", err)
	}
	c.Eventually(10*time.Second, "the stranded client to expire", func() bool { return stranded.State() == client.StateExpired })
	if err := holder.Unlock(ctx); !errors.Is(err, lockrecipe.ErrLockLost) || !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("Unlock of the expired holder: %v", err)
	}
	if _, err := holder.GuardedMulti(ctx, client.CreateOp("/stale", nil, client.CreateMode{})); !errors.Is(err, lockrecipe.ErrNotHeld) {
		t.Fatalf("GuardedMulti after the loss: %v", err)
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockGuardRejectsStaleHolder: a holder that was suspended (Lost
// closed) while its session lives still holds its node; once its session is
// gone, GuardedMulti from it can never apply, while the new holder's does.
func TestLockGuardRejectsStaleHolder(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := lockCtx(t, 40*time.Second)
	f := c.Follower()
	stranded := lockClient(t, c.Members[f].Cfg.ClientAddr)
	old := lockrecipe.NewMutex(lockrecipe.NewSession(stranded), "/locks/guard")
	if _, err := old.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	c.Isolate(f) // the stranded client's server is cut off; the session expires
	next := lockrecipe.NewMutex(lockrecipe.NewSession(lockClient(t, c.Members[c.LeaderIndex()].Cfg.ClientAddr)), "/locks/guard")
	tok, err := next.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !isClosed(old.Lost()) {
		t.Fatal("old holder's Lost still open after another acquired")
	}
	if _, err := next.GuardedMulti(ctx, client.CreateOp("/owner", []byte(fmt.Sprint(tok)), client.CreateMode{})); err != nil {
		t.Fatal(err)
	}
	c.Net.Heal()
	_, err = old.GuardedMulti(ctx, client.SetOp("/owner", []byte("stale"), -1))
	if !errors.Is(err, lockrecipe.ErrLockLost) {
		t.Fatalf("stale GuardedMulti: %v", err)
	}
	r := lockClient(t, c.Servers()...)
	if err := r.Sync(ctx, "/owner"); err != nil {
		t.Fatal(err)
	}
	if data, _, err := r.Get(ctx, "/owner"); err != nil || string(data) != fmt.Sprint(tok) {
		t.Fatalf("/owner = %q %v", data, err)
	}
}

// TestElectionHandoverWhenLeaderServerDies: the leader's client can reach
// only one server; when it stops, the leader's session expires, it learns
// it lost leadership before the next candidate leads, and observers see the
// new leader.
func TestElectionHandoverWhenLeaderServerDies(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := lockCtx(t, 40*time.Second)
	f := c.Follower()
	var others []string
	for i, m := range c.Members {
		if i != f {
			others = append(others, m.Cfg.ClientAddr)
		}
	}
	a := lockrecipe.NewElection(lockrecipe.NewSession(lockClient(t, c.Members[f].Cfg.ClientAddr)), "/svc/leader")
	b := lockrecipe.NewElection(lockrecipe.NewSession(lockClient(t, others...)), "/svc/leader")
	w := lockrecipe.NewElection(lockrecipe.NewSession(lockClient(t, others...)), "/svc/leader")
	if err := a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	leaders := w.Observe(ctx)
	// The observer's server may not have applied a's node yet (reads are
	// sequentially consistent): it may first report nobody.
	for v := range leaders {
		if v == "a" {
			break
		}
		if v != "" {
			t.Fatalf("first leader %q", v)
		}
	}
	bres := make(chan bool, 1)
	go func() {
		err := b.Campaign(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		bres <- isClosed(a.Lost())
	}()
	obs := lockClient(t, others...)
	c.Eventually(10*time.Second, "b to campaign", func() bool {
		kids, _, _ := obs.Children(ctx, "/svc/leader")
		return len(kids) == 2
	})
	c.Stop(f)
	select {
	case aLost := <-bres:
		if !aLost {
			t.Fatal("b leads while a has not learnt it lost")
		}
	case <-ctx.Done():
		t.Fatal("b never became leader")
	}
	for v := range leaders {
		if v == "b" {
			break
		}
		if v != "" {
			t.Fatalf("observed leader %q", v)
		}
	}
	if v, err := w.Leader(ctx); err != nil || v != "b" {
		t.Fatalf("Leader: %q %v", v, err)
	}
}

// TestSemaphoreLimitAcrossLeaderStop: 8 owners of a 3-permit semaphore on
// a 3-node cluster: never more than 3 holders, even across a leader stop.
func TestSemaphoreLimitAcrossLeaderStop(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := lockCtx(t, 60*time.Second)
	const n, owners, rounds = 3, 8, 10
	var mu sync.Mutex
	holders := map[int]<-chan struct{}{}
	var done atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < owners; i++ {
		sem := lockrecipe.NewSemaphore(lockrecipe.NewSession(lockClient(t, c.Servers()...)), "/sem", n)
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				if _, err := sem.Acquire(ctx); err != nil {
					t.Errorf("owner %d: %v", id, err)
					return
				}
				mu.Lock()
				live := 0
				for _, lost := range holders {
					if !isClosed(lost) {
						live++
					}
				}
				if live >= n {
					t.Errorf("owner %d acquired with %d live holders", id, live)
				}
				holders[id] = sem.Lost()
				mu.Unlock()
				mu.Lock()
				delete(holders, id)
				mu.Unlock()
				if err := sem.Release(ctx); err != nil && !errors.Is(err, lockrecipe.ErrLockLost) {
					t.Errorf("owner %d release: %v", id, err)
					return
				}
				done.Add(1)
			}
		}(i)
	}
	c.Eventually(30*time.Second, "progress", func() bool { return done.Load() >= 20 })
	c.Stop(c.LeaderIndex())
	wg.Wait()
	if done.Load() != owners*rounds {
		t.Fatalf("%d of %d acquisitions", done.Load(), owners*rounds)
	}
}

// TestQueueAcrossLeaderStop: items put on a 3-node cluster are each taken
// exactly once by concurrent takers, across a leader stop.
func TestQueueAcrossLeaderStop(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := lockCtx(t, 60*time.Second)
	const items, takers = 100, 4
	producer := lockrecipe.NewQueue(lockrecipe.NewSession(lockClient(t, c.Servers()...)), "/jobs")
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := 0; i < takers; i++ {
		q := lockrecipe.NewQueue(lockrecipe.NewSession(lockClient(t, c.Servers()...)), "/jobs")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				data, err := q.Take(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if string(data) == "stop" {
					return
				}
				mu.Lock()
				got[string(data)]++
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < items; i++ {
		if i == items/2 {
			c.Stop(c.LeaderIndex())
		}
		if _, err := producer.Put(ctx, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < takers; i++ {
		if _, err := producer.Put(ctx, []byte("stop")); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i := 0; i < items; i++ {
		if n := got[fmt.Sprint(i)]; n != 1 {
			t.Fatalf("item %d taken %d times", i, n)
		}
	}
}
