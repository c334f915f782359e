package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The watch workload: what a data watch costs from a write to its event,
// on many watchers at once.

var watchWorkload = &workload{
	name: "watch",
	help: `  watch       --watchers sessions each keep a data watch on one key (re-armed
              after every event); one writer sets the key, waits until every
              watcher has its event and has re-armed, and sets it again. One op
              is one event delivered; its latency is the time from the start of
              the setData call to the event's arrival. A client count given
              after a colon (watch:1000) is the number of watchers; --clients
              does not apply.
`,
	counts: watcherCount,
	run:    runWatch,
}

// runWatch runs the watch workload: s.Clients watchers of
// Config.Root/watch/key, one writer (the admin session), one setData at a
// time.
func runWatch(b *Bench, s Spec) ([]Result, error) {
	r := b.result(s)
	r.Latency = "event"
	dir := b.cfg.Root + "/watch"
	key := dir + "/key"
	for _, p := range []string{dir, key} {
		if err := b.ensure(p); err != nil {
			return nil, err
		}
	}
	sessions, spread, err := b.connectBalanced(s.Clients, nil)
	if err != nil {
		return nil, err
	}
	defer b.closeAll(sessions)
	r.SessionsPerServer = spread

	// Arm every watch before the first set.
	waits := make([]func(context.Context) error, len(sessions))
	var first firstError
	b.many(len(sessions), 64, func(i int) {
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
		defer cancel()
		wait, err := sessions[i].watchData(ctx, key)
		if err != nil {
			first.set(fmt.Errorf("watching %s: %w", key, err))
		}
		waits[i] = wait
	})
	if err := first.get(); err != nil {
		return nil, err
	}
	rounds := &watchRounds{b: b, n: len(sessions), st: &runState{}, acks: make(chan bool, len(sessions))}
	rounds.set = func() error {
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
		defer cancel()
		_, err := b.admin.set(ctx, key, b.value)
		return err
	}
	rounds.wait = func(ctx context.Context, i int) error { return waits[i](ctx) }
	rounds.rearm = func(i int) error {
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
		defer cancel()
		wait, err := sessions[i].watchData(ctx, key)
		if err != nil {
			return fmt.Errorf("re-arming the watch on %s: %w", key, err)
		}
		waits[i] = wait
		return nil
	}
	if err := rounds.run(s, &r); err != nil {
		return nil, err
	}
	return []Result{r}, nil
}

// watchShards is the number of histograms the watchers record into (a
// watcher records into the one of its index modulo watchShards).
const watchShards = 16

// watchRounds is one run of the watch workload on n armed watchers: the
// writer sets the key, waits until every watcher has its event and has
// re-armed, and sets it again.
type watchRounds struct {
	b *Bench
	n int
	// set is the writer's setData of the key; wait is watcher i's wait
	// for its next event (an error for any event but a data change), and
	// rearm its re-arming of the watch. Each watcher's wait and rearm run
	// on that watcher's goroutine only.
	set   func() error
	wait  func(ctx context.Context, i int) error
	rearm func(i int) error

	st        *runState
	setStart  atomic.Int64 // unix ns of the current setData call
	measuring atomic.Bool  // the current round is in the measured part
	shards    [watchShards]struct {
		mu sync.Mutex
		h  histogram
	}
	acks chan bool // a watcher's event arrived and it re-armed; false: it failed and quit
}

// run runs the rounds through the warm-up and the measured time and fills
// in r.
func (w *watchRounds) run(s Spec, r *Result) error {
	b := w.b
	runCtx, stop := context.WithCancel(b.ctx)
	defer stop()
	var watchers sync.WaitGroup
	for i := range w.n {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			w.watcher(runCtx, i)
		}()
	}
	start := time.Now()
	warmEnd := start.Add(b.cfg.Warmup)
	end := warmEnd.Add(b.cfg.Duration)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		defer stop()
		w.writer(runCtx, warmEnd, end)
	}()
	before := b.measure(s, w.st, start, warmEnd, end)
	<-writerDone // the last round finishes (bounded by --timeout)
	stop()
	watchers.Wait()
	after := b.status()
	if b.ctx.Err() != nil {
		return b.ctx.Err()
	}
	var h histogram
	for i := range w.shards {
		h.merge(&w.shards[i].h)
	}
	b.finish(r, &h, w.st, before, after)
	return nil
}

// watcher is watcher i's loop: wait for the event, record its latency when
// the round is measured, re-arm, acknowledge.
func (w *watchRounds) watcher(ctx context.Context, i int) {
	sh := &w.shards[i%watchShards]
	for {
		err := w.wait(ctx, i)
		if ctx.Err() != nil {
			return
		}
		recv := time.Now()
		if err == nil && w.measuring.Load() {
			sh.mu.Lock()
			sh.h.record(recv.Sub(time.Unix(0, w.setStart.Load())))
			sh.mu.Unlock()
			w.st.ops.Add(1)
		}
		if err == nil {
			err = w.rearm(i)
		}
		if err != nil {
			if ctx.Err() == nil {
				w.st.fail(err)
				w.acks <- false
			}
			return
		}
		w.acks <- true
	}
}

// writer sets the key, round after round, until end, a failure or the end
// of ctx. A round counts when its set starts in the measured part and all
// its events can arrive before the end.
func (w *watchRounds) writer(ctx context.Context, warmEnd, end time.Time) {
	live := w.n
	for ctx.Err() == nil && live > 0 {
		now := time.Now()
		if !now.Before(end) {
			return
		}
		w.measuring.Store(now.After(warmEnd))
		w.setStart.Store(now.UnixNano())
		if err := w.set(); err != nil {
			if ctx.Err() == nil {
				w.st.fail(fmt.Errorf("set: %w", err))
			}
			return
		}
		var ok bool
		if live, ok = w.awaitRound(ctx, live); !ok {
			return
		}
	}
}

// awaitRound waits for the acknowledgements of the live watchers, at most
// --timeout, and returns how many are still live; false when the run ends
// or the round times out.
func (w *watchRounds) awaitRound(ctx context.Context, live int) (int, bool) {
	timeout := time.NewTimer(w.b.cfg.Timeout)
	defer timeout.Stop()
	for got := 0; got < live; {
		select {
		case ok := <-w.acks:
			got++
			if !ok {
				live--
				got--
			}
		case <-timeout.C:
			w.st.fail(fmt.Errorf("watch: %d of %d events missing after %s", live-got, live, w.b.cfg.Timeout))
			return live, false
		case <-ctx.Done():
			return live, false
		}
	}
	return live, true
}
