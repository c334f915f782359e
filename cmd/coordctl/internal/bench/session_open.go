package bench

import (
	"context"
	"fmt"
	"time"
)

// The session workload: a session opened, an ephemeral created in it
// (under Config.Root/session), the session closed; one op.

var sessionWorkload = &workload{
	name: "session",
	help: `  session     open a session, create one ephemeral, close the session
`,
	run: func(b *Bench, s Spec) ([]Result, error) {
		return b.runOps(s, opsWorkload{dir: "session", ownSessions: true, prepare: func(b *Bench, _ Spec, _ *Result, dir string, _ []*worker) (opFunc, error) {
			return func(ctx context.Context, w *worker) (time.Duration, error) {
				t := time.Now()
				sess, err := b.proto.open(ctx, w.servers)
				if err != nil {
					return 0, fmt.Errorf("connect: %w", err)
				}
				_, cerr := sess.create(ctx, dir+"/s-", b.value, true)
				// Close even when the run ends meanwhile, so that no
				// session (and no ephemeral) outlives the benchmark.
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.Timeout)
				err = sess.close(cctx)
				cancel()
				if cerr != nil {
					return 0, fmt.Errorf("create: %w", cerr)
				}
				if err != nil {
					return 0, fmt.Errorf("close: %w", err)
				}
				return time.Since(t), nil
			}, nil
		}})
	},
}
