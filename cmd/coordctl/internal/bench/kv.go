package bench

import (
	"context"
	"fmt"
	"time"
)

// The write, read and read-sync workloads: one key per op, under
// Config.Root/kv, which they share.

var writeWorkload = &workload{
	name: "write",
	help: `  write       setData of a --value-size value; each client cycles over keys
              of its own (at least one per client), created beforehand
`,
	run: kvRun("write"),
}

var readWorkload = &workload{
	name: "read",
	help: `  read        getData of a random existing key (a local read)
`,
	run: kvRun("read"),
}

var readSyncWorkload = &workload{
	name: "read-sync",
	help: `  read-sync   sync then getData of a random key, sent together (Client.SyncGet,
              as ZooKeeper clients call the asynchronous sync and read at
              once), counted as one op
`,
	run: kvRun("read-sync"),
}

// kvRun runs the key workload kind.
func kvRun(kind string) func(b *Bench, s Spec) ([]Result, error) {
	return func(b *Bench, s Spec) ([]Result, error) {
		return b.runOps(s, opsWorkload{dir: "kv", prepare: func(b *Bench, s Spec, r *Result, dir string, workers []*worker) (opFunc, error) {
			all := b.assignKeys(r, s, dir, workers)
			if err := b.createKeys(workers, all); err != nil {
				return nil, err
			}
			// The keys were created through every server: a session's
			// server may not have applied the others' creates yet.
			if err := b.syncAll(workers, dir); err != nil {
				return nil, err
			}
			return b.kvOp(kind), nil
		}})
	}
}

// assignKeys names the keys of the write, read and read-sync workloads
// under dir and gives each worker its own: for write, keys i, i+clients,
// ... (at least one per client); for the reads, all of them.
// test/cluster/compare names and assigns its keys the same way.
func (b *Bench) assignKeys(r *Result, s Spec, dir string, workers []*worker) []string {
	n := b.cfg.Keys
	if s.Workload == "write" {
		n = max(n, s.Clients)
	}
	r.Keys = n
	all := make([]string, n)
	for i := range all {
		all[i] = fmt.Sprintf("%s/k%07d", dir, i)
	}
	if s.Workload == "write" {
		for i, w := range workers {
			for j := i; j < n; j += len(workers) {
				w.keys = append(w.keys, all[j])
			}
		}
	} else {
		for _, w := range workers {
			w.keys = all
		}
	}
	return all
}

// kvOp is the op of the key workload kind: write cycles over the worker's
// keys, the reads pick one at random.
func (b *Bench) kvOp(kind string) opFunc {
	return func(ctx context.Context, w *worker) (time.Duration, error) {
		var key string
		if kind == "write" {
			key = w.keys[w.next]
			w.next = (w.next + 1) % len(w.keys)
		} else {
			key = w.keys[w.rng.IntN(len(w.keys))]
		}
		t := time.Now()
		switch kind {
		case "write":
			if _, err := w.sess.set(ctx, key, b.value); err != nil {
				return 0, fmt.Errorf("set %s: %w", key, err)
			}
		case "read-sync":
			if err := w.sess.syncGet(ctx, key); err != nil {
				return 0, err
			}
		default:
			if _, err := w.sess.get(ctx, key); err != nil {
				return 0, fmt.Errorf("get %s: %w", key, err)
			}
		}
		return time.Since(t), nil
	}
}
