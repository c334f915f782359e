package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/client"
)

// The watch-recursive workload: what recursive watches cost the cluster's
// writes, and how fast their events arrive. coordd's client only:
// go-zookeeper has no persistent watches.

var watchRecursiveWorkload = &workload{
	name: "watch-recursive",
	help: `  watch-recursive
              the cost of recursive watches: builds a tree of --tree nodes
              (fanout 10) unless it is there, then --writers sessions set
              random nodes of it twice, for --duration each: first with no
              watch, then with --recursive-watches persistent recursive
              watches on random nodes, spread over the watching sessions
              (--watchers, or the count after a colon). Three results: the
              writes without and with the watches (latency of the setData),
              and the events (one op per event delivered; latency from the
              start of the setData to the event's arrival).
`,
	counts:   watcherCount,
	grpcOnly: "go-zookeeper has no persistent watches",
	run:      runRecursive,
}

// recursiveFanout is the number of children of each inner node of the
// watch-recursive tree (100 000 nodes: 5 levels).
const recursiveFanout = 10

// zxidTime is when a write with this zxid started, or when an event of it
// arrived.
type zxidTime struct {
	zxid int64
	t    time.Time
}

// runRecursive runs the watch-recursive workload: the writes without
// watches, then with s.Clients sessions holding --recursive-watches
// recursive watches on random nodes of the tree, and the events.
func runRecursive(b *Bench, s Spec) ([]Result, error) {
	root := b.cfg.Root + "/rtree"
	nodes := treePaths(root, b.cfg.TreeNodes, recursiveFanout)
	base := b.result(s)
	base.Clients, base.TreeNodes, base.WatchSessions = b.cfg.Writers, len(nodes), s.Clients

	workers, wsessions, err := b.newWorkers(b.cfg.Writers, false, &base)
	if err != nil {
		return nil, err
	}
	defer b.closeAll(wsessions)
	if err := b.buildTree(root, nodes, workers); err != nil {
		return nil, err
	}
	// The watching sessions are open in both runs: only the watches
	// differ.
	watchers, _, err := b.connectBalanced(s.Clients, nil)
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
	op := recursiveWrite(b, nodes, &measuring)
	without, _, _, err := b.writesRun(s, base, 0, workers, op)
	if err != nil {
		return nil, err
	}

	traces, readers, err := b.addRecursiveWatches(nodes, watchers)
	if err != nil {
		return nil, err
	}
	measuring.Store(true)
	with, warmEnd, end, err := b.writesRun(s, base, b.cfg.RecursiveWatches, workers, op)
	if err != nil {
		return nil, err
	}
	syncErr := b.syncWatchers(watchers, root)
	b.closeAll(watchers) // ends the channels: the readers return
	closed = true
	readers.Wait()
	if syncErr != nil {
		return nil, syncErr
	}
	events, err := b.eventsResult(base, with, traces, workers, warmEnd, end)
	if err != nil {
		return nil, err
	}
	return []Result{without, with, events}, nil
}

// recursiveWrite is the writers' op: a setData of a random node; while
// measuring is set, it records each write's zxid and start.
func recursiveWrite(b *Bench, nodes []string, measuring *atomic.Bool) opFunc {
	return func(ctx context.Context, w *worker) (time.Duration, error) {
		key := nodes[w.rng.IntN(len(nodes))]
		t := time.Now()
		zxid, err := w.sess.set(ctx, key, b.value)
		if err != nil {
			return 0, fmt.Errorf("set %s: %w", key, err)
		}
		lat := time.Since(t)
		if measuring.Load() {
			w.starts = append(w.starts, zxidTime{zxid, t})
		}
		return lat, nil
	}
}

// writesRun runs the writers with the given number of recursive watches in
// place and returns its result, and when its measured time began and
// ended.
func (b *Bench) writesRun(s Spec, base Result, watches int, workers []*worker, op opFunc) (Result, time.Time, time.Time, error) {
	r := base
	r.Latency = "write"
	r.RecursiveWatches = &watches
	warmEnd, end, err := b.runWorkers(Spec{fmt.Sprintf("%s (%d watches)", s.Workload, watches), b.cfg.Writers}, &r, workers, op)
	return r, warmEnd, end, err
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
func (b *Bench) buildTree(root string, nodes []string, workers []*worker) error {
	stamp := fmt.Sprintf("tree %d fanout %d", len(nodes), recursiveFanout)
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
	data, err := b.admin.get(ctx, root)
	cancel()
	if err == nil && string(data) == stamp {
		return nil
	}
	if err := b.ensure(root); err != nil {
		return err
	}
	fmt.Fprintf(b.cfg.Log, "coordctl: bench watch-recursive: building a tree of %d nodes under %s\n", len(nodes), root)
	// Level by level: a level's nodes only need the previous one.
	for start := 0; start < len(nodes); {
		depth := strings.Count(nodes[start], "/")
		end := start
		for end < len(nodes) && strings.Count(nodes[end], "/") == depth {
			end++
		}
		if err := b.createKeys(workers, nodes[start:end]); err != nil {
			return err
		}
		start = end
	}
	ctx, cancel = context.WithTimeout(b.ctx, b.cfg.Timeout)
	defer cancel()
	if _, err := b.admin.set(ctx, root, []byte(stamp)); err != nil {
		return fmt.Errorf("marking %s built: %w", root, err)
	}
	return nil
}

// watchTrace is what one recursive watch saw: when each event arrived,
// and how often its channel overflowed.
type watchTrace struct {
	arrivals []zxidTime
	resyncs  int
}

// addRecursiveWatches adds --recursive-watches persistent recursive
// watches on random nodes, round robin over the watching sessions, each
// with a reader that records its events until its session closes
// (readers).
func (b *Bench) addRecursiveWatches(nodes []string, watchers []session) ([]*watchTrace, *sync.WaitGroup, error) {
	traces := make([]*watchTrace, b.cfg.RecursiveWatches)
	readers := &sync.WaitGroup{}
	var first firstError
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	paths := make([]string, len(traces))
	for i := range traces {
		paths[i] = nodes[rng.IntN(len(nodes))]
		traces[i] = &watchTrace{}
	}
	b.many(len(traces), 64, func(i int) {
		cl, ok := watchers[i%len(watchers)].(*grpcSession)
		if !ok {
			first.set(errors.New("recursive watches need coordd's client (--protocol grpc)"))
			return
		}
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
		ch, err := cl.cl.AddWatch(ctx, paths[i], client.WatchPersistentRecursive)
		cancel()
		if err != nil {
			first.set(fmt.Errorf("AddWatch %s: %w", paths[i], err))
			return
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			traces[i].read(ch)
		}()
	})
	return traces, readers, first.get()
}

// read records the events of ch until it closes.
func (t *watchTrace) read(ch <-chan client.Event) {
	for ev := range ch {
		switch ev.Type {
		case client.EventResync:
			t.resyncs++
		case client.EventNotWatching:
		default:
			t.arrivals = append(t.arrivals, zxidTime{ev.Zxid, time.Now()})
		}
	}
}

// syncWatchers makes sure every event of the writes has arrived: each is
// queued on its session before any reply that reflects the write, so a
// linearizable read on each watching session, once the writes are done,
// comes after all of them.
func (b *Bench) syncWatchers(watchers []session, root string) error {
	var first firstError
	b.many(len(watchers), 64, func(i int) {
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
		defer cancel()
		if err := watchers[i].syncGet(ctx, root); err != nil {
			first.set(fmt.Errorf("sync on a watching session: %w", err))
		}
	})
	return first.get()
}

// eventsResult is watch-recursive's third result: the events of the
// writes measured with the watches (the writes' starts are in the
// workers), one op each, timed from the start of the setData.
func (b *Bench) eventsResult(base, with Result, traces []*watchTrace, workers []*worker, warmEnd, end time.Time) (Result, error) {
	starts := make(map[int64]time.Time)
	for _, w := range workers {
		for _, st := range w.starts {
			starts[st.zxid] = st.t
		}
	}
	events := base
	events.Latency = "event"
	events.RecursiveWatches = with.RecursiveWatches
	events.DurationS = b.cfg.Duration.Seconds()
	events.Servers = with.Servers
	var h histogram
	resyncs := 0
	for _, t := range traces {
		resyncs += t.resyncs
		for _, a := range t.arrivals {
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
		events.FirstError = b.cfg.errText(fmt.Errorf("%d watch channels overflowed: %w", resyncs, client.ErrWatchOverflow))
	}
	if events.Ops == 0 {
		return Result{}, errors.New("no event arrived for the measured writes")
	}
	events.OpsPerS = round(float64(events.Ops)/b.cfg.Duration.Seconds(), 1)
	events.setLatencies(&h)
	return events, nil
}
