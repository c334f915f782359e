package bench

import "time"

// The idle workload: no load; the servers' memory and CPU.

var idleWorkload = &workload{
	name: "idle",
	help: `  idle        no load: the servers' memory and CPU over --duration
`,
	counts: noClients,
	run: func(b *Bench, s Spec) ([]Result, error) {
		r := b.result(s)
		r.ValueSize = 0
		st := &runState{}
		start := time.Now()
		warmEnd := start.Add(b.cfg.Warmup)
		before := b.measure(s, st, start, warmEnd, warmEnd.Add(b.cfg.Duration))
		after := b.status()
		if b.ctx.Err() != nil {
			return nil, b.ctx.Err()
		}
		b.finish(&r, &histogram{}, st, before, after)
		return []Result{r}, nil
	},
}
