package bench

import (
	"context"
	"fmt"
	"time"
)

// The create-eph workload: an ephemeral sequential node created and
// deleted, under Config.Root/create-eph.

var createEphWorkload = &workload{
	name: "create-eph",
	help: `  create-eph  create an ephemeral sequential node, then delete it (one op)
`,
	run: func(b *Bench, s Spec) ([]Result, error) {
		return b.runOps(s, opsWorkload{dir: "create-eph", prepare: func(b *Bench, _ Spec, _ *Result, dir string, _ []*worker) (opFunc, error) {
			return func(ctx context.Context, w *worker) (time.Duration, error) {
				t := time.Now()
				name, err := w.sess.create(ctx, dir+"/e-", b.value, true)
				if err != nil {
					return 0, fmt.Errorf("create: %w", err)
				}
				if err := w.sess.delete(ctx, name); err != nil {
					return 0, fmt.Errorf("delete %s: %w", name, err)
				}
				return time.Since(t), nil
			}, nil
		}})
	},
}
