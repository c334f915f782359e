package bench

import (
	"context"
	"fmt"
	"time"
)

// The lock workload: the clients contend for one lock, the protocol's own
// recipe (lockrecipe's Mutex; go-zookeeper's Lock with --protocol zk) on
// Config.Root/lock. One op is an acquire plus a release; its latency is
// the acquire's.

var lockWorkload = &workload{
	name: "lock",
	help: `  lock        the clients contend for one lock (lockrecipe Mutex); one op is
              an acquire plus a release, ops/s is handoffs/s and the latency
              is the time to acquire
`,
	run: func(b *Bench, s Spec) ([]Result, error) {
		rs, err := b.runOps(s, opsWorkload{dir: "lock", makesDir: true, prepare: prepareLock})
		for i := range rs {
			rs[i].HandoffsPerS = rs[i].OpsPerS
		}
		return rs, err
	},
}

func prepareLock(b *Bench, _ Spec, r *Result, dir string, workers []*worker) (opFunc, error) {
	r.Latency = "acquire"
	for _, w := range workers {
		w.mutex = w.sess.mutex(dir)
	}
	return func(ctx context.Context, w *worker) (time.Duration, error) {
		t := time.Now()
		if err := w.mutex.lock(ctx); err != nil {
			return 0, fmt.Errorf("lock: %w", err)
		}
		acquired := time.Since(t)
		// Release even when the run ends meanwhile.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.Timeout)
		defer cancel()
		if err := w.mutex.unlock(uctx); err != nil {
			return 0, fmt.Errorf("unlock: %w", err)
		}
		return acquired, nil
	}, nil
}
