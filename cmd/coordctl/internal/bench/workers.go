package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// The frame of every workload whose clients run one op back to back:
// workers, the watchdog that ends a stuck op, and the run's counts.

// worker is one client of a run.
type worker struct {
	id      int
	sess    session  // nil when each op opens its own (the session workload)
	servers []string // the servers rotated by id: where the worker's sessions go
	rng     *rand.Rand
	hist    histogram
	keys    []string // the keys it writes or reads
	next    int      // the next of keys to write
	mutex   mutex    // the lock workload's recipe

	starts []zxidTime // watch-recursive: each setData's zxid and start

	opStart atomic.Int64 // start of the op under way (UnixNano), 0 between ops
	stuckMu sync.Mutex
	stuck   context.CancelCauseFunc // ends the op under way; guarded by stuckMu
}

func newWorker(i int, servers []string) *worker {
	return &worker{id: i, servers: rotate(servers, i), rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
}

// newWorkers makes n workers and, unless own, gives each a session of its
// own, opened by connectBalanced; the sessions are closed by closeAll of
// the returned list. r records where they went.
func (b *Bench) newWorkers(n int, own bool, r *Result) ([]*worker, []session, error) {
	workers := make([]*worker, n)
	for i := range workers {
		workers[i] = newWorker(i, b.cfg.Servers)
	}
	if own {
		return workers, nil, nil
	}
	sessions, spread, err := b.connectBalanced(n, nil)
	if err != nil {
		return nil, nil, err
	}
	r.SessionsPerServer = spread
	for i, w := range workers {
		w.sess = sessions[i]
	}
	return workers, sessions, nil
}

// setStuck installs the function that ends the worker's op under way.
func (w *worker) setStuck(f context.CancelCauseFunc) {
	w.stuckMu.Lock()
	w.stuck = f
	w.stuckMu.Unlock()
}

// errOpTimeout ends an op that ran longer than --timeout.
var errOpTimeout = errors.New("op took longer than --timeout")

// watchdog fails the op of any worker that has been running for longer
// than timeout. One goroutine for all the workers instead of a timer per op:
// a timer per op cost the benchmark client 7% of its CPU at 48 000 reads/s.
func watchdog(ctx context.Context, workers []*worker, timeout time.Duration) {
	t := time.NewTicker(min(timeout/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, w := range workers {
				if st := w.opStart.Load(); st != 0 && now.Sub(time.Unix(0, st)) > timeout {
					w.stuckMu.Lock()
					if w.stuck != nil {
						w.stuck(errOpTimeout)
					}
					w.stuckMu.Unlock()
				}
			}
		}
	}
}

// opFunc runs one op of a worker and returns the latency to record.
type opFunc func(ctx context.Context, w *worker) (time.Duration, error)

// runState is what the workers of a run share.
type runState struct {
	ops, errs atomic.Int64
	mu        sync.Mutex
	firstErr  error
}

func (s *runState) fail(err error) { s.failN(1, err) }

// failN counts n failures, err standing for them.
func (s *runState) failN(n int64, err error) {
	s.errs.Add(n)
	s.mu.Lock()
	if s.firstErr == nil {
		s.firstErr = err
	}
	s.mu.Unlock()
}

// runWorkers runs op in every worker, back to back, through the warm-up
// and the measured time, fills in r, and returns when the measured time
// began and ended. s names the run in the progress line.
func (b *Bench) runWorkers(s Spec, r *Result, workers []*worker, op opFunc) (warmEnd, end time.Time, err error) {
	st := &runState{}
	runCtx, stop := context.WithCancel(b.ctx)
	defer stop()
	start := time.Now()
	warmEnd = start.Add(b.cfg.Warmup)
	end = warmEnd.Add(b.cfg.Duration)
	go watchdog(runCtx, workers, b.cfg.Timeout)
	var wg sync.WaitGroup
	for _, w := range workers {
		w.hist = histogram{} // a worker may serve several runs
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.work(runCtx, w, op, st, warmEnd, end)
		}()
	}
	before := b.measure(s, st, start, warmEnd, end)
	stop()
	wg.Wait()
	after := b.status()
	if b.ctx.Err() != nil {
		return warmEnd, end, b.ctx.Err()
	}
	var h histogram
	for _, w := range workers {
		h.merge(&w.hist)
	}
	b.finish(r, &h, st, before, after)
	return warmEnd, end, nil
}

// work is one worker's loop: ops back to back until end. Only ops that end
// between warmEnd and end are counted; every failure is.
func (b *Bench) work(ctx context.Context, w *worker, op opFunc, st *runState, warmEnd, end time.Time) {
	octx, cancel := context.WithCancelCause(ctx)
	w.setStuck(cancel)
	defer func() { cancel(nil) }()
	for ctx.Err() == nil && time.Now().Before(end) {
		w.opStart.Store(time.Now().UnixNano())
		lat, err := op(octx, w)
		w.opStart.Store(0)
		done := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return // the run ended during the op
			}
			if errors.Is(context.Cause(octx), errOpTimeout) {
				err = fmt.Errorf("%w: %w", errOpTimeout, err)
				octx, cancel = context.WithCancelCause(ctx)
				w.setStuck(cancel)
			}
			st.fail(err)
			if sessionGone(err) {
				return
			}
			continue
		}
		if done.After(warmEnd) && !done.After(end) {
			w.hist.record(lat)
			st.ops.Add(1)
		}
	}
}
