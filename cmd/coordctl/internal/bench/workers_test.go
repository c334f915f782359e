package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/client"
)

// TestWatchdogEndsStuckOp: an op running longer than the timeout is ended
// with errOpTimeout as the cause; an idle worker is left alone.
func TestWatchdogEndsStuckOp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck, idle := &worker{}, &worker{}
	sctx, scancel := context.WithCancelCause(ctx)
	stuck.setStuck(scancel)
	ictx, icancel := context.WithCancelCause(ctx)
	idle.setStuck(icancel)
	stuck.opStart.Store(time.Now().Add(-time.Minute).UnixNano())
	go watchdog(ctx, []*worker{stuck, idle}, 40*time.Millisecond)
	select {
	case <-sctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck op was not ended")
	}
	if !errors.Is(context.Cause(sctx), errOpTimeout) {
		t.Fatalf("cause %v, want errOpTimeout", context.Cause(sctx))
	}
	if ictx.Err() != nil {
		t.Fatal("the idle worker's op context was ended")
	}
}

// TestRunWorkersTwice: workers that serve two runs report each run's
// latencies alone.
func TestRunWorkersTwice(t *testing.T) {
	b := &Bench{ctx: context.Background(), noStatus: true,
		cfg: Config{Duration: 50 * time.Millisecond, Timeout: 5 * time.Second, Log: io.Discard}}
	workers := []*worker{{id: 0}, {id: 1}}
	for _, lat := range []time.Duration{time.Millisecond, time.Second} {
		var r Result
		op := func(context.Context, *worker) (time.Duration, error) { return lat, nil }
		if _, _, err := b.runWorkers(Spec{"test", 2}, &r, workers, op); err != nil {
			t.Fatal(err)
		}
		if want := float64(lat.Milliseconds()); r.P50Ms != want || r.MaxMs != want {
			t.Errorf("run of %v ops: p50 %v ms, max %v ms, want %v", lat, r.P50Ms, r.MaxMs, want)
		}
	}
}

// TestWorkStopsWhenSessionGone: a worker whose session ended for good
// (either protocol's sentinel) counts the failure and stops; after any
// other failure it goes on.
func TestWorkStopsWhenSessionGone(t *testing.T) {
	b := &Bench{ctx: context.Background(), cfg: Config{Timeout: time.Minute}}
	for _, tc := range []struct {
		err   error
		stops bool
	}{
		{client.ErrSessionExpired, true},
		{client.ErrClosed, true},
		{zk.ErrSessionExpired, true},
		{zk.ErrClosing, true},
		{client.ErrBadVersion, false},
		{zk.ErrNoNode, false},
	} {
		st := &runState{}
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		op := func(context.Context, *worker) (time.Duration, error) {
			calls++
			if calls == 3 {
				cancel() // the run ends during the third op: not counted
			}
			return 0, fmt.Errorf("set /x: %w", tc.err)
		}
		now := time.Now()
		b.work(ctx, &worker{}, op, st, now, now.Add(time.Minute))
		cancel()
		wantCalls, wantErrs := 3, int64(2)
		if tc.stops {
			wantCalls, wantErrs = 1, 1
		}
		if calls != wantCalls || st.errs.Load() != wantErrs || !errors.Is(st.firstErr, tc.err) {
			t.Errorf("%v: %d ops, %d errors (first %v); want %d and %d", tc.err, calls, st.errs.Load(), st.firstErr, wantCalls, wantErrs)
		}
	}
}
