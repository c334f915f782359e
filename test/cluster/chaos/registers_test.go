package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/coordd/coordd/client"
)

// Register operations.
const (
	opWrite = iota
	opCAS
	opSyncRead
)

type regInput struct {
	Op     int
	Key    string
	Value  string
	Expect int32 // cas: expected version
}

type regOutput struct {
	Unknown    bool // outcome unknown: may or may not have happened
	BadVersion bool // cas refused
	Value      string
	Version    int32 // write/cas: the new version; read: the version read
}

type regState struct {
	Value   string
	Version int32
}

// registerModel is the registers' model, as porcupine checks it.
var registerModel = registerSpec.ToModel()

// registerSpec is a versioned register per key: write(v) always applies,
// cas(expected, v) applies iff the version matches, sync+read returns the
// current value and version. A write of unknown outcome (whose return is
// the end of the history) may or may not apply: its step yields both
// states, and porcupine checks the model through its power-set
// construction. That is what a deterministic step that always applies it
// says too (placed last, it applied after everything: as good as never),
// but each write pending to the end no longer multiplies the orders
// porcupine must try: a CI run's history with 66 of them did not finish in
// two minutes that way, and took under a second this way.
var registerSpec = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(regInput).Key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []any { return []any{regState{Value: "init"}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		next := regState{Value: in.Value, Version: s.Version + 1}
		switch in.Op {
		case opWrite:
			switch {
			case out.Unknown:
				return []any{s, next}
			case out.Version == next.Version:
				return []any{next}
			}
		case opCAS:
			match := s.Version == in.Expect
			switch {
			case out.Unknown && match:
				return []any{s, next}
			case out.Unknown, out.BadVersion && !match:
				return []any{s}
			case match && !out.BadVersion && out.Version == next.Version:
				return []any{next}
			}
		default:
			if out.Value == s.Value && out.Version == s.Version {
				return []any{s}
			}
		}
		return nil
	},
	Hash: func(state any) uint64 {
		s := state.(regState)
		h := fnv.New64a()
		h.Write([]byte(s.Value))
		return h.Sum64() ^ uint64(s.Version)
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		res := fmt.Sprintf("v%d", out.Version)
		switch {
		case out.Unknown:
			res = "?"
		case out.BadVersion:
			res = "BadVersion"
		}
		switch in.Op {
		case opWrite:
			return fmt.Sprintf("set(%s, %s) -> %s", in.Key, in.Value, res)
		case opCAS:
			return fmt.Sprintf("cas(%s, v%d, %s) -> %s", in.Key, in.Expect, in.Value, res)
		default:
			return fmt.Sprintf("sync+get(%s) -> %s v%d", in.Key, out.Value, out.Version)
		}
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		return fmt.Sprintf("%s v%d", s.Value, s.Version)
	},
}

// registers is the linearizability workload.
type registers struct {
	e       *env
	seed    int64
	workers int
	keys    []string
	cnt     counters

	mu    sync.Mutex
	ops   []porcupine.Operation // indeterminate ones get their return at the end
	lanes int
	// Plain (local) reads are only sequentially consistent: checked per
	// session for monotonic versions, own writes included.
	plainReads  int64
	seqProblems []string
}

func newRegisters(e *env, seed int64, workers, keys int) *registers {
	r := &registers{e: e, seed: seed, workers: workers}
	for i := 0; i < keys; i++ {
		r.keys = append(r.keys, fmt.Sprintf("/reg/k%d", i))
	}
	return r
}

func (r *registers) name() string        { return "registers" }
func (r *registers) counters() *counters { return &r.cnt }

func (r *registers) setup(ctx context.Context, cl *client.Client) error {
	if err := createAll(ctx, cl, "/reg", r.e.dataACL()); err != nil {
		return err
	}
	for _, k := range r.keys {
		if _, err := cl.Create(ctx, k, []byte("init"), client.CreateMode{ACL: r.e.dataACL()}); err != nil && !errors.Is(err, client.ErrNodeExists) {
			return err
		}
	}
	return nil
}

func (r *registers) lane() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lanes++
	return r.lanes - 1
}

func (r *registers) record(op porcupine.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

func (r *registers) run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := 0; w < r.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r.worker(ctx, w)
		}(w)
	}
	wg.Wait()
}

func (r *registers) worker(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(uint64(r.seed), uint64(1000+w)))
	known := map[string]int32{}
	var cl *client.Client
	lane := r.lane()
	seen := map[string]int32{} // per session: highest version seen per key
	note := func(key string, ver int32, what string) {
		if ver < seen[key] {
			r.mu.Lock()
			if len(r.seqProblems) < 20 {
				r.seqProblems = append(r.seqProblems, fmt.Sprintf("worker %d session %#x: %s of %s saw version %d after version %d", w, cl.SessionID(), what, key, ver, seen[key]))
			}
			r.mu.Unlock()
			return
		}
		seen[key] = ver
	}
	for n := 0; n < 200000 && ctx.Err() == nil; n++ {
		if cl == nil {
			var err error
			if cl, _, err = r.e.newClient(ctx, fmt.Sprintf("registers-%d", w)); err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			seen = map[string]int32{}
		}
		key := r.keys[rng.IntN(len(r.keys))]
		// Short timeouts now and then, so that some writes end with an
		// unknown outcome while the client still retries them.
		timeout := opTimeout
		if rng.IntN(4) == 0 {
			timeout = time.Duration(200+rng.IntN(1500)) * time.Millisecond
		}
		if rng.IntN(4) == 0 {
			// A plain read: sequentially consistent only.
			octx, cancel := context.WithTimeout(context.Background(), timeout)
			_, st, err := cl.Get(octx, key)
			cancel()
			if err == nil {
				note(key, st.Version, "plain read")
				r.mu.Lock()
				r.plainReads++
				r.mu.Unlock()
			} else if ended(err) {
				cl = nil
			}
			continue
		}
		in := regInput{Op: rng.IntN(3), Key: key, Value: fmt.Sprintf("w%d-%d", w, n)}
		if in.Op == opCAS {
			in.Expect = known[key] + int32(rng.IntN(2))
		}
		octx, cancel := context.WithTimeout(context.Background(), timeout)
		call := r.e.since().Nanoseconds()
		var out regOutput
		var err error
		switch in.Op {
		case opWrite:
			var st client.Stat
			st, err = cl.Set(octx, key, []byte(in.Value), -1)
			out.Version = st.Version
		case opCAS:
			var st client.Stat
			st, err = cl.Set(octx, key, []byte(in.Value), in.Expect)
			out.Version = st.Version
			if errors.Is(err, client.ErrBadVersion) {
				out.BadVersion, err = true, nil
			}
		default:
			// Every other linearizable read is a SyncGet (the Sync and the
			// Get sent together), the others a Sync, then a Get once it
			// returned. (By n, not the random source, so that a seed's
			// sequence of operations stays as it was.)
			var data []byte
			var st client.Stat
			if n%2 == 0 {
				data, st, err = cl.SyncGet(octx, key)
			} else if err = cl.Sync(octx, key); err == nil {
				data, st, err = cl.Get(octx, key)
			}
			out.Value, out.Version = string(data), st.Version
		}
		ret := r.e.since().Nanoseconds()
		cancel()
		switch {
		case err == nil:
			r.cnt.ok.Add(1)
			if !out.BadVersion {
				known[key] = out.Version
				note(key, out.Version, registerModel.DescribeOperation(in, out))
			}
			r.record(porcupine.Operation{ClientId: lane, Input: in, Call: call, Output: out, Return: ret})
		case in.Op == opSyncRead:
			// A failed read has no effect: leave it out of the history.
			r.cnt.fail.Add(1)
		case indeterminate(err):
			r.cnt.indet.Add(1)
			r.record(porcupine.Operation{ClientId: lane, Input: in, Call: call, Output: regOutput{Unknown: true}})
			// The op may still be in flight: further ops of this worker go
			// in a new lane of the visualization.
			lane = r.lane()
		default:
			r.cnt.fail.Add(1)
			r.e.logf("registers: %s: definite error %v", r.describe(in), err)
		}
		if ended(err) {
			cl = nil
		}
		sleep(ctx, time.Duration(5+rng.IntN(25))*time.Millisecond)
	}
}

func (r *registers) describe(in regInput) string {
	return registerModel.DescribeOperation(in, regOutput{Unknown: true})
}

func (r *registers) check(ctx context.Context, v *verdict, timeout time.Duration) {
	r.mu.Lock()
	end := r.e.since().Nanoseconds() + 1
	ops := make([]porcupine.Operation, len(r.ops))
	for i, op := range r.ops {
		if op.Output.(regOutput).Unknown {
			// Porcupine's convention for an unknown outcome: no return
			// before the end of the history.
			op.Return = end
		}
		ops[i] = op
	}
	for _, p := range r.seqProblems {
		v.failf("sequential consistency: %s", p)
	}
	v.notef("%d plain reads checked for per-session monotonic versions (own writes included)", r.plainReads)
	r.mu.Unlock()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(registerModel, ops, timeout)
	v.notef("porcupine: %d ops on %d keys: %s in %v", len(ops), len(r.keys), res, time.Since(start).Round(time.Millisecond))
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		v.inconclusive = true
		v.notef("linearizability check timed out after %v: INCONCLUSIVE", timeout)
	case porcupine.Illegal:
		v.failf("history of %d register ops is NOT linearizable", len(ops))
	}
	if err := os.MkdirAll(r.e.outDir, 0o755); err == nil {
		html := filepath.Join(r.e.outDir, "registers.html")
		if err := porcupine.VisualizePath(registerModel, info, html); err != nil {
			v.notef("visualization: %v", err)
		} else {
			v.notef("visualization: %s", html)
		}
		hist := filepath.Join(r.e.outDir, "registers-history.json")
		if b, err := json.MarshalIndent(ops, "", " "); err == nil && os.WriteFile(hist, b, 0o644) == nil {
			v.notef("history: %s", hist)
		}
	}
}

// createAll creates path and its ancestors as persistent nodes, with acl
// (nil: the open ACL).
func createAll(ctx context.Context, cl *client.Client, path string, acl []client.ACL) error {
	for i := 1; i <= len(path); i++ {
		if i == len(path) || path[i] == '/' {
			if _, err := cl.Create(ctx, path[:i], nil, client.CreateMode{ACL: acl}); err != nil && !errors.Is(err, client.ErrNodeExists) {
				return fmt.Errorf("create %s: %w", path[:i], err)
			}
		}
	}
	return nil
}
