package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/client"
)

// The watch-recursive workload: what recursive watches cost the cluster's
// writes, and how fast their events arrive.

// recursiveFanout is the number of children of each inner node of the
// watch-recursive tree (100 000 nodes: 5 levels).
const recursiveFanout = 10

// watchBenchBuffer is the channel buffer of the benchmark's persistent
// watches: their readers keep up, and 10 000 watches at the client's
// default buffer would take half a gigabyte of this process.
const watchBenchBuffer = 64

// zxidTime is when a write with this zxid started, or when an event of it
// arrived.
type zxidTime struct {
	zxid int64
	t    time.Time
}

// treePaths lists n nodes below root, breadth first, each inner node with
// fanout children ("n0" ... "n9"): parents come before their children.
func treePaths(root string, n, fanout int) []string {
	out := make([]string, 0, n)
	parents := []string{root}
	for len(out) < n {
		var next []string
		for _, p := range parents {
			for i := 0; i < fanout && len(out) < n; i++ {
				c := p + "/n" + strconv.Itoa(i)
				out = append(out, c)
				next = append(next, c)
			}
		}
		parents = next
	}
	return out
}

// buildTree creates root and the nodes (parents first), unless root says
// it holds them already (a tree kept by --keep), many creates at a time
// through the writers' sessions.
func (b *bench) buildTree(root string, nodes []string, workers []*benchWorker) error {
	x := b.x
	stamp := fmt.Sprintf("tree %d fanout %d", len(nodes), recursiveFanout)
	ctx, cancel := x.deadline()
	data, _, err := b.admin.Get(ctx, root)
	cancel()
	if err == nil && string(data) == stamp {
		return nil
	}
	if err := b.ensure(x.ctx, root); err != nil {
		return err
	}
	fmt.Fprintf(x.stderr, "coordctl: bench watch-recursive: building a tree of %d nodes under %s\n", len(nodes), root)
	// Level by level: a level's nodes only need the previous one.
	for start := 0; start < len(nodes); {
		depth := func(p string) int {
			n := 0
			for _, c := range p {
				if c == '/' {
					n++
				}
			}
			return n
		}
		end := start
		for end < len(nodes) && depth(nodes[end]) == depth(nodes[start]) {
			end++
		}
		if err := b.createKeys(workers, nodes[start:end]); err != nil {
			return err
		}
		start = end
	}
	ctx, cancel = x.deadline()
	defer cancel()
	if _, err := b.admin.Set(ctx, root, []byte(stamp), -1); err != nil {
		return fmt.Errorf("marking %s built: %w", root, err)
	}
	return nil
}

// runRecursive runs the watch-recursive workload: the writes without
// watches, then with s.clients sessions holding --recursive-watches
// recursive watches on random nodes of the tree, and the events.
func (b *bench) runRecursive(s benchSpec) ([]benchResult, error) {
	x := b.x
	o := b.o
	root := o.root + "/rtree"
	nodes := treePaths(root, o.treeNodes, recursiveFanout)
	base := benchResult{Workload: s.workload, Clients: o.writers, ValueSize: o.valueSize, SharedConns: o.shareConns,
		TreeNodes: len(nodes), WatchSessions: s.clients}

	wcls, spread, err := b.connectBalanced(o.writers)
	if err != nil {
		return nil, err
	}
	defer b.closeAll(wcls)
	base.SessionsPerServer = spread
	workers := make([]*benchWorker, len(wcls))
	for i, cl := range wcls {
		workers[i] = &benchWorker{id: i, cl: cl, rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
	}
	if err := b.buildTree(root, nodes, workers); err != nil {
		return nil, err
	}
	// The watching sessions are open in both runs: only the watches
	// differ.
	watchers, _, err := b.connectBalanced(s.clients)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			b.closeAll(watchers)
		}
	}()

	var measuring atomic.Bool // the run with the watches: record each write's zxid
	op := func(ctx context.Context, w *benchWorker) (time.Duration, error) {
		key := nodes[w.rng.IntN(len(nodes))]
		t := time.Now()
		st, err := w.cl.Set(ctx, key, b.value, -1)
		if err != nil {
			return 0, fmt.Errorf("set %s: %w", key, err)
		}
		lat := time.Since(t)
		if measuring.Load() {
			w.starts = append(w.starts, zxidTime{st.Mzxid, t})
		}
		return lat, nil
	}

	without := base
	without.Latency = "write"
	zero := 0
	without.RecursiveWatches = &zero
	if _, _, err := b.runWorkers(benchSpec{s.workload + " (0 watches)", o.writers}, &without, workers, op); err != nil {
		return nil, err
	}

	// The watches, on random nodes, round robin over the sessions.
	type watchRun struct {
		arrivals []zxidTime
		resyncs  int
	}
	runs := make([]*watchRun, o.recursiveWatches)
	var readers sync.WaitGroup
	var addErr atomic.Pointer[error]
	sem := make(chan struct{}, 64)
	var adds sync.WaitGroup
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for i := range runs {
		p := nodes[rng.IntN(len(nodes))]
		cl := watchers[i%len(watchers)]
		run := &watchRun{}
		runs[i] = run
		adds.Add(1)
		sem <- struct{}{}
		go func() {
			defer adds.Done()
			defer func() { <-sem }()
			ctx, cancel := x.deadline()
			ch, err := cl.AddWatch(ctx, p, client.WatchPersistentRecursive)
			cancel()
			if err != nil {
				err = fmt.Errorf("AddWatch %s: %w", p, err)
				addErr.CompareAndSwap(nil, &err)
				return
			}
			readers.Add(1)
			go func() {
				defer readers.Done()
				for ev := range ch {
					switch ev.Type {
					case client.EventResync:
						run.resyncs++
					case client.EventNotWatching:
					default:
						run.arrivals = append(run.arrivals, zxidTime{ev.Zxid, time.Now()})
					}
				}
			}()
		}()
	}
	adds.Wait()
	if e := addErr.Load(); e != nil {
		return nil, *e
	}

	with := base
	with.Latency = "write"
	n := o.recursiveWatches
	with.RecursiveWatches = &n
	measuring.Store(true)
	warmEnd, end, err := b.runWorkers(benchSpec{fmt.Sprintf("%s (%d watches)", s.workload, n), o.writers}, &with, workers, op)
	if err != nil {
		return nil, err
	}
	// Every event of the writes is queued on its session before any reply
	// that reflects the write: a linearizable read on each watching
	// session, once the writes are done, comes after all of them.
	var syncs sync.WaitGroup
	var syncErr atomic.Pointer[error]
	for _, cl := range watchers {
		syncs.Add(1)
		sem <- struct{}{}
		go func() {
			defer syncs.Done()
			defer func() { <-sem }()
			ctx, cancel := x.deadline()
			defer cancel()
			if _, _, err := cl.SyncGet(ctx, root); err != nil {
				err = fmt.Errorf("sync on a watching session: %w", err)
				syncErr.CompareAndSwap(nil, &err)
			}
		}()
	}
	syncs.Wait()
	b.closeAll(watchers) // ends the channels: the readers return
	closed = true
	readers.Wait()
	if e := syncErr.Load(); e != nil {
		return nil, *e
	}

	starts := make(map[int64]time.Time)
	for _, w := range workers {
		for _, st := range w.starts {
			starts[st.zxid] = st.t
		}
	}
	events := base
	events.Latency = "event"
	events.RecursiveWatches = &n
	events.DurationS = b.o.duration.Seconds()
	events.Servers = with.Servers
	var h histogram
	resyncs := 0
	for _, run := range runs {
		resyncs += run.resyncs
		for _, a := range run.arrivals {
			t0, ok := starts[a.zxid]
			if !ok || t0.Before(warmEnd) || t0.After(end) {
				continue
			}
			h.record(a.t.Sub(t0))
			events.Ops++
		}
	}
	if resyncs > 0 {
		events.Errors = int64(resyncs)
		events.FirstError = errText(fmt.Errorf("%d watch channels overflowed: %w", resyncs, client.ErrWatchOverflow))
	}
	if events.Ops == 0 {
		return nil, errors.New("no event arrived for the measured writes")
	}
	events.OpsPerS = round(float64(events.Ops)/b.o.duration.Seconds(), 1)
	ms := func(ns int64) float64 { return round(float64(ns)/1e6, 3) }
	events.MeanMs, events.P50Ms, events.P95Ms, events.P99Ms, events.MaxMs = ms(int64(h.mean())), ms(h.quantile(0.5)), ms(h.quantile(0.95)), ms(h.quantile(0.99)), ms(h.max)
	return []benchResult{without, with, events}, nil
}
