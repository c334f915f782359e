package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/rpc/apipb"
)

// The bench verb: load generators against a running cluster. Every run
// opens its own sessions (none of them is the shell's), spreads them evenly
// over the servers, warms up, measures for --duration and reports one result.

// benchWorkloads are the workload names, in the order help lists them.
var benchWorkloads = []string{"write", "read", "read-sync", "create-eph", "session", "lock", "watch", "watch-recursive", "session-hold", "idle"}

var benchVerb = &verb{
	name:     "bench",
	synopsis: "bench WORKLOAD[,WORKLOAD...][:CLIENTS[,CLIENTS...]] ... [flags]",
	summary:  "measure the throughput and latency of workloads against the cluster",
	detail: `
Runs each workload with each client count (the cross product: bench
write,read --clients 1,64 makes four runs), one result per run: a table at
the end, or one JSON object per run as it ends with -o json. An argument may
name its own client counts after a colon (write:1,64 read:16,64 read-sync:64),
which then replace --clients for that argument. Flags may follow the
workloads.

Workloads (each client is its own session; the sessions of a run are spread
evenly over --servers):
  write       setData of a --value-size value; each client cycles over keys
              of its own (at least one per client), created beforehand
  read        getData of a random existing key (a local read)
  read-sync   sync then getData of a random key, sent together (Client.SyncGet,
              as ZooKeeper clients call the asynchronous sync and read at
              once), counted as one op
  create-eph  create an ephemeral sequential node, then delete it (one op)
  session     open a session, create one ephemeral, close the session
  lock        the clients contend for one lock (lockrecipe Mutex); one op is
              an acquire plus a release, ops/s is handoffs/s and the latency
              is the time to acquire
  watch       --watchers sessions each keep a data watch on one key (re-armed
              after every event); one writer sets the key, waits until every
              watcher has its event and has re-armed, and sets it again. One op
              is one event delivered; its latency is the time from the start of
              the setData call to the event's arrival. A client count given
              after a colon (watch:1000) is the number of watchers; --clients
              does not apply.
  watch-recursive
              the cost of recursive watches: builds a tree of --tree nodes
              (fanout 10) unless it is there, then --writers sessions set
              random nodes of it twice, for --duration each: first with no
              watch, then with --recursive-watches persistent recursive
              watches on random nodes, spread over the watching sessions
              (--watchers, or the count after a colon). Three results: the
              writes without and with the watches (latency of the setData),
              and the events (one op per event delivered; latency from the
              start of the setData to the event's arrival).
  session-hold  CLIENTS sessions (session-hold:10000) are opened, spread
              evenly over the servers, and held idle for --duration; the
              servers' memory before and after gives the memory per session,
              their CPU over the hold the cost of keeping them (pings,
              touches, vouches: on the leader above all). Every session
              that expires or, with --protocol zk, loses its connection
              during the hold is an error. The latency is the time to open
              a session.
  idle        no load: the servers' memory and CPU over --duration

With --protocol zk the sessions speak ZooKeeper's client protocol through
go-zookeeper (github.com/go-zookeeper/zk) instead of coordd's gRPC API, each
with a TCP connection of its own to one server, and lock is go-zookeeper's
own recipe (zk.NewLock); read-sync is then two round trips (go-zookeeper's
Sync waits for its answer before the read is sent). That mode also measures
a ZooKeeper ensemble (without the servers' memory and CPU, which only coordd
reports).

Ops done during the warm-up are not counted. Latencies are recorded in a
log-linear histogram (relative error under 0.8%). When the servers report
it, each result carries each server's resident memory at the end of the run
(rss_mb) and the CPU seconds it used during the measured part (cpu_s).

The nodes live under --path, which is deleted at the end unless --keep.
The exit status is 1 if any operation failed.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		o := &benchOptions{}
		clients := fs.String("clients", "1", "comma-separated client counts")
		fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured `time` of each run")
		fs.DurationVar(&o.warmup, "warmup", 0, "warm-up `time` before measuring (default 10% of --duration, at most 1s)")
		fs.IntVar(&o.valueSize, "value-size", 100, "size in `bytes` of the values written")
		fs.IntVar(&o.keys, "keys", 1000, "number of keys read (write uses at least one per client)")
		fs.IntVar(&o.watchers, "watchers", 1000, "number of watching sessions of the watch and watch-recursive workloads")
		fs.IntVar(&o.treeNodes, "tree", 100000, "nodes of the watch-recursive workload's tree")
		fs.IntVar(&o.recursiveWatches, "recursive-watches", 10000, "recursive watches of the watch-recursive workload")
		fs.IntVar(&o.writers, "writers", 32, "writing sessions of the watch-recursive workload")
		fs.StringVar(&o.root, "path", "/coordctl-bench", "node under which the benchmark works")
		fs.BoolVar(&o.keep, "keep", false, "leave the benchmark's nodes in place")
		fs.BoolVar(&o.shareConns, "share-conns", true, "the sessions share one connection per server (client.Pool, as etcd's benchmark shares its --conns); false gives each session a connection of its own, as separate client processes have and as every ZooKeeper session has (use it to compare with ZooKeeper)")
		fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this client process to `file` (to see the client's share)")
		fs.StringVar(&o.protocol, "protocol", "grpc", "the client protocol of the measured sessions: grpc (coordd's Go client) or zk (ZooKeeper's, through go-zookeeper; each session has a connection of its own)")
		return func(x *cmd, args []string) error {
			// Flags may follow the workloads: parse what remains after each
			// positional argument.
			var pos []string
			for len(args) > 0 {
				if err := parseFlags(fs, args); err != nil {
					if errors.Is(err, flag.ErrHelp) {
						printVerbUsage(x.stdout, x.verb)
						return errHelp
					}
					return x.usage("%v", err)
				}
				args = fs.Args()
				if len(args) > 0 {
					pos = append(pos, args[0])
					args = args[1:]
				}
			}
			if f := fs.Lookup("o"); f != nil {
				if err := checkFormat(x.verb.name, f.Value.String()); err != nil {
					return err
				}
				x.out.json = f.Value.String() == "json"
			}
			if len(pos) == 0 {
				return x.usage("missing workload")
			}
			counts, err := parseCounts(*clients)
			if err != nil {
				return x.usage("--clients: %v", err)
			}
			o.autoWarmup = true
			shareSet := false
			fs.Visit(func(f *flag.Flag) {
				o.autoWarmup = o.autoWarmup && f.Name != "warmup"
				shareSet = shareSet || f.Name == "share-conns"
			})
			if o.protocol == "zk" {
				if shareSet && o.shareConns {
					return x.usage("--share-conns: a ZooKeeper session has a connection of its own (--protocol zk)")
				}
				o.shareConns = false
				for _, p := range pos {
					if strings.Contains(p, "watch-recursive") {
						return x.usage("watch-recursive needs --protocol grpc: go-zookeeper has no persistent watches")
					}
				}
			}
			if err := o.check(); err != nil {
				return x.usage("%v", err)
			}
			specs, err := o.plan(pos, counts)
			if err != nil {
				return x.usage("%v", err)
			}
			if o.cpuProfile != "" {
				f, err := os.Create(o.cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			b := &bench{x: x, o: o}
			return b.run(specs)
		}
	},
}

// benchOptions are the bench verb's settings.
type benchOptions struct {
	duration, warmup time.Duration
	valueSize        int
	keys             int
	watchers         int
	treeNodes        int
	recursiveWatches int
	writers          int
	root             string
	keep             bool
	cpuProfile       string
	shareConns       bool
	protocol         string // "grpc" or "zk"
	autoWarmup       bool   // --warmup not given
}

func (o *benchOptions) check() error {
	switch {
	case o.duration <= 0:
		return errors.New("--duration must be positive")
	case o.valueSize < 0:
		return errors.New("--value-size must not be negative")
	case o.keys < 1:
		return errors.New("--keys must be at least 1")
	case o.watchers < 1:
		return errors.New("--watchers must be at least 1")
	case o.treeNodes < 1 || o.recursiveWatches < 1 || o.writers < 1:
		return errors.New("--tree, --recursive-watches and --writers must be at least 1")
	case o.root == "" || o.root[0] != '/' || o.root == "/" || strings.HasSuffix(o.root, "/"):
		return fmt.Errorf("--path: %q is not a node path below the root", o.root)
	case o.protocol != "" && o.protocol != "grpc" && o.protocol != "zk":
		return fmt.Errorf("--protocol: %q is neither grpc nor zk", o.protocol)
	}
	if o.warmup < 0 {
		return errors.New("--warmup must not be negative")
	}
	if o.protocol == "" {
		o.protocol = "grpc"
	}
	if o.autoWarmup {
		o.warmup = min(time.Second, o.duration/10)
	}
	return nil
}

// benchSpec is one run: a workload and its number of clients.
type benchSpec struct {
	workload string
	clients  int
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// plan expands the positional arguments into the runs, in order.
func (o *benchOptions) plan(args []string, counts []int) ([]benchSpec, error) {
	var specs []benchSpec
	for _, a := range args {
		names, cs, hasCounts := strings.Cut(a, ":")
		argCounts := counts
		if hasCounts {
			var err error
			if argCounts, err = parseCounts(cs); err != nil {
				return nil, fmt.Errorf("%s: %v", a, err)
			}
		}
		for _, w := range strings.Split(names, ",") {
			w = strings.TrimSpace(w)
			known := false
			for _, k := range benchWorkloads {
				known = known || k == w
			}
			if !known {
				return nil, fmt.Errorf("unknown workload %q (want one of %s)", w, strings.Join(benchWorkloads, ", "))
			}
			switch {
			case w == "idle":
				specs = append(specs, benchSpec{w, 0})
			case (w == "watch" || w == "watch-recursive") && !hasCounts:
				specs = append(specs, benchSpec{w, o.watchers})
			default:
				for _, n := range argCounts {
					specs = append(specs, benchSpec{w, n})
				}
			}
		}
	}
	return specs, nil
}

// benchResult is the outcome of one run; its JSON form is the -o json output.
type benchResult struct {
	Workload string `json:"workload"`
	Clients  int    `json:"clients"`
	// Protocol is the sessions' client protocol: "grpc" or "zk".
	Protocol  string  `json:"protocol"`
	DurationS float64 `json:"duration_s"`
	Ops       int64   `json:"ops"`
	Errors    int64   `json:"errors"`
	OpsPerS   float64 `json:"ops_per_s"`
	// HandoffsPerS is ops_per_s of the lock workload.
	HandoffsPerS float64 `json:"handoffs_per_s,omitempty"`
	// Latency says what the percentiles time: "op", "acquire" (lock),
	// "event" (watch, watch-recursive: setData start to event arrival),
	// "write" (watch-recursive: the setData) or "connect" (session-hold).
	Latency   string  `json:"latency"`
	MeanMs    float64 `json:"mean_ms"`
	P50Ms     float64 `json:"p50_ms"`
	P95Ms     float64 `json:"p95_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	ValueSize int     `json:"value_size"`
	Keys      int     `json:"keys,omitempty"`
	// SharedConns says whether the sessions shared one connection per
	// server (--share-conns); a comparison with a system whose sessions
	// each have a connection of their own (ZooKeeper) needs it false.
	SharedConns bool `json:"shared_conns"`
	// TreeNodes, RecursiveWatches and WatchSessions describe a
	// watch-recursive result: the tree written to, the recursive watches
	// in place during the run (0: the run without them) and the sessions
	// holding them.
	TreeNodes        int  `json:"tree_nodes,omitempty"`
	RecursiveWatches *int `json:"recursive_watches,omitempty"`
	WatchSessions    int  `json:"watch_sessions,omitempty"`
	// SessionsPerServer is where the run's long-lived sessions were.
	SessionsPerServer map[string]int `json:"sessions_per_server,omitempty"`
	Servers           []serverUsage  `json:"servers,omitempty"`
	// HeldSessions is the number of sessions session-hold held, and
	// KBPerSession the servers' resident memory it added, summed over the
	// servers, per session (0 when the servers do not report memory).
	HeldSessions int     `json:"held_sessions,omitempty"`
	KBPerSession float64 `json:"kb_per_session,omitempty"`
	// LeaderCores is the leader's CPU over the measured part, in cores
	// (CPU seconds per second): with session-hold, what keeping the
	// sessions costs it.
	LeaderCores float64 `json:"leader_cores,omitempty"`
	FirstError  string  `json:"first_error,omitempty"`
}

// serverUsage is one server's resources: resident memory after the run and
// CPU seconds used during the measured part.
type serverUsage struct {
	ID      string  `json:"id"`
	Address string  `json:"address"`
	Role    string  `json:"role,omitempty"`
	RssMB   float64 `json:"rss_mb"`
	CPUS    float64 `json:"cpu_s"`
	// RssStartMB is the resident memory at the start of the run
	// (session-hold only: before its sessions were opened).
	RssStartMB float64 `json:"rss_start_mb,omitempty"`
}

// bench is one invocation of the bench verb.
type bench struct {
	x     *cmd
	o     *benchOptions
	admin *client.Client // setup, cleanup and the watch workload's writer (grpc)
	// zadmin is admin in the ZooKeeper-protocol mode.
	zadmin *zk.Conn
	value  []byte
	tty    bool
	pool   *client.Pool // shared connections of the measured sessions, or nil
	// noStatus is set once the servers did not answer a status call in the
	// ZooKeeper-protocol mode (not coordd): the results carry no usage.
	noStatus bool
}

// sessionOptions are the options of every measured session.
func (b *bench) sessionOptions() []client.Option {
	opts := b.x.clientOptions(client.WithWatchBuffer(watchBenchBuffer))
	if b.pool != nil {
		opts = append(opts, client.WithPool(b.pool))
	}
	return opts
}

func (b *bench) run(specs []benchSpec) error {
	x := b.x
	b.tty = isTerminal(x.stderr)
	b.value = make([]byte, b.o.valueSize)
	if b.o.shareConns {
		b.pool = client.NewPool()
		defer b.pool.Close()
	}
	for i := range b.value {
		b.value[i] = byte('a' + rand.IntN(26))
	}
	if b.o.protocol == "zk" {
		admin, err := b.zkConnect(x.ctx, x.servers, nil)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		b.zadmin = admin
		defer admin.Close()
		if err := zkEnsure(admin, b.o.root); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		// Whether the servers are coordd's, which report their usage.
		if b.status() == nil {
			b.noStatus = true
		}
	} else {
		ctx, cancel := x.deadline()
		admin, err := client.Connect(ctx, x.servers, x.clientOptions()...)
		cancel()
		if err != nil {
			return fmt.Errorf("bench: cannot connect to %s: %w", strings.Join(x.servers, ","), err)
		}
		b.admin = admin
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), x.timeout)
			defer cancel()
			admin.Close(ctx)
		}()
		if err := b.ensure(x.ctx, b.o.root); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}

	var results []benchResult
	var failed int64
	var firstErr string
	for _, s := range specs {
		if x.ctx.Err() != nil {
			break
		}
		var rs []benchResult
		var err error
		if s.workload == "watch-recursive" {
			rs, err = b.runRecursive(s)
			for i := range rs {
				rs[i].Protocol = b.o.protocol
			}
		} else {
			var r benchResult
			r, err = b.runOne(s)
			rs = []benchResult{r}
		}
		if err != nil {
			if x.ctx.Err() != nil {
				break
			}
			failed++
			msg := fmt.Sprintf("%s/%d: %s", s.workload, s.clients, errText(err))
			if firstErr == "" {
				firstErr = msg
			}
			fmt.Fprintf(x.stderr, "coordctl: bench %s\n", msg)
			continue
		}
		for _, r := range rs {
			results = append(results, r)
			if r.Errors > 0 {
				failed += r.Errors
				if firstErr == "" {
					firstErr = fmt.Sprintf("%s/%d: %s", s.workload, s.clients, r.FirstError)
				}
			}
			if x.out.json {
				if err := x.out.emit(r, nil); err != nil {
					return err
				}
			}
		}
	}
	if !x.out.json && len(results) > 0 {
		writeBenchTable(x.stdout, results)
		writeHoldLines(x.stdout, results)
	}
	if !b.o.keep {
		var err error
		if b.zadmin != nil {
			if err = zkDeleteTree(b.zadmin, b.o.root); errors.Is(err, zk.ErrNoNode) {
				err = nil
			}
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 2*x.timeout)
			if err = deleteTree(ctx, b.admin, b.o.root); errors.Is(err, client.ErrNoNode) {
				err = nil
			}
			cancel()
		}
		if err != nil {
			fmt.Fprintf(x.stderr, "coordctl: bench: cleaning up %s: %s\n", b.o.root, errText(err))
		}
	}
	if err := x.ctx.Err(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("bench: %d failed operations or runs; first: %s", failed, firstErr)
	}
	return nil
}

// ensure creates path (persistent, empty) unless it exists.
func (b *bench) ensure(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, b.x.timeout)
	defer cancel()
	if _, err := b.admin.Create(ctx, path, nil, client.CreateMode{}); err != nil && !errors.Is(err, client.ErrNodeExists) {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}

// treeDeleter is what deleting a tree needs of a session, whichever its
// protocol: a node's children, a delete, and which error means "no node".
type treeDeleter struct {
	children func(path string) ([]string, error)
	delete   func(path string) error
	noNode   error
}

// deleteTree deletes path and everything below it, many deletes at a time.
func deleteTree(ctx context.Context, cl *client.Client, path string) error {
	return treeDeleter{
		children: func(p string) ([]string, error) { kids, _, err := cl.Children(ctx, p); return kids, err },
		delete:   func(p string) error { return cl.Delete(ctx, p, -1) },
		noNode:   client.ErrNoNode,
	}.deleteTree(path)
}

func (d treeDeleter) deleteTree(path string) error {
	kids, err := d.children(path)
	if err != nil {
		return err
	}
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, k := range kids {
		wg.Add(1)
		sem <- struct{}{}
		go func(p string) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := d.deleteTree(p); err != nil && !errors.Is(err, d.noNode) {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}(path + "/" + k)
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return d.delete(path)
}

// benchWorker is one client of a run.
type benchWorker struct {
	id      int
	cl      *client.Client // nil for the session workload, and with --protocol zk
	zc      *zk.Conn       // with --protocol zk: the session (nil for the session workload)
	servers []string       // --servers rotated by id
	rng     *rand.Rand
	hist    histogram
	keys    []string
	next    int
	mutex   *lockrecipe.Mutex
	zlock   *zk.Lock

	starts []zxidTime // watch-recursive: each setData's zxid and start

	opStart atomic.Int64 // start of the op under way (UnixNano), 0 between ops
	stuckMu sync.Mutex
	stuck   context.CancelCauseFunc // ends the op under way; guarded by stuckMu
}

// setStuck installs the function that ends the worker's op under way.
func (w *benchWorker) setStuck(f context.CancelCauseFunc) {
	w.stuckMu.Lock()
	w.stuck = f
	w.stuckMu.Unlock()
}

// errOpTimeout ends an op that ran longer than --timeout.
var errOpTimeout = errors.New("op took longer than --timeout")

// watchdog fails the op of any worker that has been running for longer
// than timeout. One goroutine for all the workers instead of a timer per op:
// a timer per op cost the benchmark client 7% of its CPU at 48 000 reads/s.
func watchdog(ctx context.Context, workers []*benchWorker, timeout time.Duration) {
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

// benchOp runs one op and returns the latency to record.
type benchOp func(ctx context.Context, w *benchWorker) (time.Duration, error)

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

func newBenchWorker(i int, servers []string) *benchWorker {
	return &benchWorker{id: i, servers: rotate(servers, i), rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
}

func (b *bench) runOne(s benchSpec) (benchResult, error) {
	x := b.x
	r := benchResult{Workload: s.workload, Clients: s.clients, Protocol: b.o.protocol, ValueSize: b.o.valueSize, Latency: "op", SharedConns: b.o.shareConns}
	switch s.workload {
	case "idle":
		return b.runIdle(r)
	case "watch":
		return b.runWatch(r)
	case "session-hold":
		return b.runHold(r)
	}
	root := b.o.root + "/" + s.workload
	if s.workload == "write" || s.workload == "read" || s.workload == "read-sync" {
		root = b.o.root + "/kv"
	}
	if b.o.protocol == "zk" {
		return b.runOneZK(s, r, root)
	}
	if s.workload != "lock" { // lockrecipe makes its own parents
		if err := b.ensure(x.ctx, root); err != nil {
			return r, err
		}
	}

	// The sessions.
	workers := make([]*benchWorker, s.clients)
	for i := range workers {
		workers[i] = newBenchWorker(i, x.servers)
	}
	if s.workload != "session" {
		cls, spread, err := b.connectBalanced(s.clients)
		if err != nil {
			return r, err
		}
		defer b.closeAll(cls)
		r.SessionsPerServer = spread
		for i, w := range workers {
			w.cl = cls[i]
		}
	}

	// The keys and the op.
	var op benchOp
	switch s.workload {
	case "write", "read", "read-sync":
		all := b.assignKeys(&r, s, root, workers)
		if err := b.createKeys(workers, all); err != nil {
			return r, err
		}
		// The keys were created through every server: a session's server
		// may not have applied the others' creates yet.
		if err := b.syncAll(workers, root); err != nil {
			return r, err
		}
		op = b.kvOp(s.workload)
	case "create-eph":
		op = func(ctx context.Context, w *benchWorker) (time.Duration, error) {
			t := time.Now()
			name, err := w.cl.Create(ctx, root+"/e-", b.value, client.CreateMode{Kind: client.Ephemeral, Sequential: true})
			if err != nil {
				return 0, fmt.Errorf("create: %w", err)
			}
			if err := w.cl.Delete(ctx, name, -1); err != nil {
				return 0, fmt.Errorf("delete %s: %w", name, err)
			}
			return time.Since(t), nil
		}
	case "session":
		op = func(ctx context.Context, w *benchWorker) (time.Duration, error) {
			t := time.Now()
			cl, err := client.Connect(ctx, w.servers, b.sessionOptions()...)
			if err != nil {
				return 0, fmt.Errorf("connect: %w", err)
			}
			_, cerr := cl.Create(ctx, root+"/s-", b.value, client.CreateMode{Kind: client.Ephemeral, Sequential: true})
			// Close even when the run ends meanwhile, so that no session
			// (and no ephemeral) outlives the benchmark.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.timeout)
			err = cl.Close(cctx)
			cancel()
			if cerr != nil {
				return 0, fmt.Errorf("create: %w", cerr)
			}
			if err != nil {
				return 0, fmt.Errorf("close: %w", err)
			}
			return time.Since(t), nil
		}
	case "lock":
		r.Latency = "acquire"
		for _, w := range workers {
			w.mutex = lockrecipe.NewMutex(lockrecipe.NewSession(w.cl), root)
		}
		op = func(ctx context.Context, w *benchWorker) (time.Duration, error) {
			t := time.Now()
			if _, err := w.mutex.Lock(ctx); err != nil {
				return 0, fmt.Errorf("lock: %w", err)
			}
			acquired := time.Since(t)
			// Release even when the run ends meanwhile.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.timeout)
			defer cancel()
			if err := w.mutex.Unlock(uctx); err != nil {
				return 0, fmt.Errorf("unlock: %w", err)
			}
			return acquired, nil
		}
	}
	return b.runWorkersFor(s, r, workers, op)
}

// runWorkersFor is runWorkers for runOne: the result, with lock's
// handoffs.
func (b *bench) runWorkersFor(s benchSpec, r benchResult, workers []*benchWorker, op benchOp) (benchResult, error) {
	if _, _, err := b.runWorkers(s, &r, workers, op); err != nil {
		return r, err
	}
	if s.workload == "lock" {
		r.HandoffsPerS = r.OpsPerS
	}
	return r, nil
}

// assignKeys names the keys of the write, read and read-sync workloads
// under root and gives each worker its own: for write, keys i, i+clients,
// ... (at least one per client); for the reads, all of them.
func (b *bench) assignKeys(r *benchResult, s benchSpec, root string, workers []*benchWorker) []string {
	n := b.o.keys
	if s.workload == "write" {
		n = max(n, s.clients)
	}
	r.Keys = n
	all := make([]string, n)
	for i := range all {
		all[i] = fmt.Sprintf("%s/k%07d", root, i)
	}
	if s.workload == "write" {
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

// runWorkers runs op in every worker, back to back, through the warm-up
// and the measured time, fills in r, and returns when the measured time
// began and ended.
func (b *bench) runWorkers(s benchSpec, r *benchResult, workers []*benchWorker, op benchOp) (warmEnd, end time.Time, err error) {
	x := b.x
	st := &runState{}
	runCtx, stop := context.WithCancel(x.ctx)
	defer stop()
	start := time.Now()
	warmEnd = start.Add(b.o.warmup)
	end = warmEnd.Add(b.o.duration)
	go watchdog(runCtx, workers, x.timeout)
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
	if x.ctx.Err() != nil {
		return warmEnd, end, x.ctx.Err()
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
func (b *bench) work(ctx context.Context, w *benchWorker, op benchOp, st *runState, warmEnd, end time.Time) {
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
			if errors.Is(err, client.ErrSessionExpired) || errors.Is(err, client.ErrClosed) || zkSessionGone(err) {
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

// measure waits for the run to end, printing the progress line every second,
// and returns the servers' usage at the start of the measured part.
func (b *bench) measure(s benchSpec, st *runState, start, warmEnd, end time.Time) *apipb.StatusResponse {
	x := b.x
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var before *apipb.StatusResponse
	warm := time.NewTimer(time.Until(warmEnd))
	defer warm.Stop()
	finish := time.NewTimer(time.Until(end))
	defer finish.Stop()
	progressed := false
	defer func() {
		if progressed && b.tty {
			io.WriteString(x.stderr, "\r\x1b[K")
		}
	}()
	for {
		select {
		case <-x.ctx.Done():
			return before
		case <-warm.C:
			before = b.status()
		case <-finish.C:
			if before == nil {
				before = b.status()
			}
			return before
		case now := <-tick.C:
			var line string
			if now.Before(warmEnd) {
				line = fmt.Sprintf("bench %s clients=%d: warming up (%s), errors %d", s.workload, s.clients, b.o.warmup, st.errs.Load())
			} else {
				el := now.Sub(warmEnd)
				ops := st.ops.Load()
				line = fmt.Sprintf("bench %s clients=%d: %.0fs/%.0fs %d ops, %.0f ops/s, errors %d",
					s.workload, s.clients, el.Seconds(), b.o.duration.Seconds(), ops, float64(ops)/el.Seconds(), st.errs.Load())
			}
			if b.tty {
				io.WriteString(x.stderr, "\r"+line+"\x1b[K")
			} else {
				io.WriteString(x.stderr, line+"\n")
			}
			progressed = true
		}
	}
}

// finish fills in the result's counts, percentiles and server usage.
func (b *bench) finish(r *benchResult, h *histogram, st *runState, before, after *apipb.StatusResponse) {
	r.DurationS = b.o.duration.Seconds()
	r.Ops = st.ops.Load()
	r.Errors = st.errs.Load()
	if st.firstErr != nil {
		r.FirstError = errText(st.firstErr)
	}
	r.OpsPerS = round(float64(r.Ops)/b.o.duration.Seconds(), 1)
	ms := func(ns int64) float64 { return round(float64(ns)/1e6, 3) }
	r.MeanMs = ms(int64(h.mean()))
	r.P50Ms = ms(h.quantile(0.50))
	r.P95Ms = ms(h.quantile(0.95))
	r.P99Ms = ms(h.quantile(0.99))
	r.MaxMs = ms(h.max)
	r.Servers = usage(before, after)
	for _, u := range r.Servers {
		if u.Role == "leader" {
			r.LeaderCores = round(u.CPUS/b.o.duration.Seconds(), 3)
		}
	}
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// status asks the cluster for every member's usage; nil if it cannot.
func (b *bench) status() *apipb.StatusResponse {
	if b.noStatus {
		return nil
	}
	var resp *apipb.StatusResponse
	err := b.x.unary(func(ctx context.Context, c apipb.CoordClient) (err error) {
		resp, err = c.Status(ctx, &apipb.StatusRequest{})
		return err
	})
	if err != nil {
		return nil
	}
	return resp
}

// usage is each member's RSS after and CPU seconds between the two statuses;
// nil when the servers do not report them.
func usage(before, after *apipb.StatusResponse) []serverUsage {
	if after == nil {
		return nil
	}
	cpu0 := map[string]float64{}
	if before != nil {
		for _, m := range before.GetMembers() {
			cpu0[m.GetId()] = m.GetCpuSeconds()
		}
	}
	var out []serverUsage
	for _, m := range after.GetMembers() {
		if m.GetRssBytes() == 0 {
			continue // unreachable, or a server that does not report usage
		}
		u := serverUsage{ID: m.GetId(), Address: m.GetClientAddress(), Role: m.GetRole(), RssMB: round(float64(m.GetRssBytes())/(1<<20), 1)}
		if c0, ok := cpu0[m.GetId()]; ok {
			u.CPUS = round(m.GetCpuSeconds()-c0, 2)
		}
		out = append(out, u)
	}
	return out
}

// rotate returns servers starting at the i-th (modulo their number).
func rotate(servers []string, i int) []string {
	k := i % len(servers)
	return append(append([]string(nil), servers[k:]...), servers[:k]...)
}

// connectBalanced opens n sessions spread evenly over the servers. Connect
// tries the servers in random order, so a session that lands on a server
// already holding its share is closed and opened again, a few times at most.
func (b *bench) connectBalanced(n int) ([]*client.Client, map[string]int, error) {
	return b.connectBalancedTimed(n, nil)
}

// connectBalancedTimed is connectBalanced; record, if set, is given the
// time each kept session took to open.
func (b *bench) connectBalancedTimed(n int, record func(time.Duration)) ([]*client.Client, map[string]int, error) {
	x := b.x
	const tries = 8
	quota := (n + len(x.servers) - 1) / len(x.servers)
	cls := make([]*client.Client, n)
	spread := map[string]int{}
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range cls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for try := 0; ; try++ {
				ctx, cancel := context.WithTimeout(x.ctx, x.timeout)
				t := time.Now()
				cl, err := client.Connect(ctx, rotate(x.servers, i), b.sessionOptions()...)
				took := time.Since(t)
				cancel()
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("cannot connect to %s: %w", strings.Join(x.servers, ","), err)
					}
					mu.Unlock()
					return
				}
				srv := cl.Server()
				mu.Lock()
				if spread[srv] < quota || try == tries-1 {
					spread[srv]++
					cls[i] = cl
					if record != nil {
						record(took)
					}
					mu.Unlock()
					return
				}
				mu.Unlock()
				b.closeAll([]*client.Client{cl})
			}
		}()
	}
	wg.Wait()
	if first != nil {
		b.closeAll(cls)
		return nil, nil, first
	}
	return cls, spread, nil
}

// closeAll closes the sessions, many at a time.
func (b *bench) closeAll(cls []*client.Client) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, cl := range cls {
		if cl == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), b.x.timeout)
			defer cancel()
			cl.Close(ctx)
		}()
	}
	wg.Wait()
}

// createKeys creates the keys that do not exist yet, with the bench value,
// through the workers' sessions, many at a time.
func (b *bench) createKeys(workers []*benchWorker, keys []string) error {
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i, k := range keys {
		cl := workers[i%len(workers)].cl
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(b.x.ctx, b.x.timeout)
			defer cancel()
			if _, err := cl.Create(ctx, k, b.value, client.CreateMode{}); err != nil && !errors.Is(err, client.ErrNodeExists) {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("creating %s: %w", k, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// syncAll makes every worker's server catch up with the leader (sync), so
// that what other sessions created is there for it to read.
func (b *bench) syncAll(workers []*benchWorker, path string) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if w.zc != nil {
				_, err = w.zc.Sync(path)
			} else {
				ctx, cancel := context.WithTimeout(b.x.ctx, b.x.timeout)
				err = w.cl.Sync(ctx, path)
				cancel()
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("sync %s: %w", path, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// kvOp is the op of the write, read and read-sync workloads.
func (b *bench) kvOp(workload string) benchOp {
	return func(ctx context.Context, w *benchWorker) (time.Duration, error) {
		var key string
		if workload == "write" {
			key = w.keys[w.next]
			w.next = (w.next + 1) % len(w.keys)
		} else {
			key = w.keys[w.rng.IntN(len(w.keys))]
		}
		t := time.Now()
		switch workload {
		case "write":
			if _, err := w.cl.Set(ctx, key, b.value, -1); err != nil {
				return 0, fmt.Errorf("set %s: %w", key, err)
			}
		case "read-sync":
			if _, _, err := w.cl.SyncGet(ctx, key); err != nil {
				return 0, fmt.Errorf("sync+get %s: %w", key, err)
			}
		default:
			if _, _, err := w.cl.Get(ctx, key); err != nil {
				return 0, fmt.Errorf("get %s: %w", key, err)
			}
		}
		return time.Since(t), nil
	}
}

// runIdle measures the servers with no load.
func (b *bench) runIdle(r benchResult) (benchResult, error) {
	x := b.x
	st := &runState{}
	start := time.Now()
	warmEnd := start.Add(b.o.warmup)
	before := b.measure(benchSpec{"idle", 0}, st, start, warmEnd, warmEnd.Add(b.o.duration))
	after := b.status()
	if x.ctx.Err() != nil {
		return r, x.ctx.Err()
	}
	r.ValueSize = 0
	b.finish(&r, &histogram{}, st, before, after)
	return r, nil
}

// runWatch runs the watch workload: r.Clients watchers, one writer (the
// admin session), one setData at a time.
func (b *bench) runWatch(r benchResult) (benchResult, error) {
	x := b.x
	r.Latency = "event"
	dir := b.o.root + "/watch"
	key := dir + "/key"
	if b.o.protocol == "zk" {
		for _, p := range []string{dir, key} {
			if err := zkEnsure(b.zadmin, p); err != nil {
				return r, err
			}
		}
		return b.runWatchZK(r, key)
	}
	if err := b.ensure(x.ctx, dir); err != nil {
		return r, err
	}
	if err := b.ensure(x.ctx, key); err != nil {
		return r, err
	}
	cls, spread, err := b.connectBalanced(r.Clients)
	if err != nil {
		return r, err
	}
	defer b.closeAll(cls)
	r.SessionsPerServer = spread

	// Arm every watch before the first set.
	chans := make([]<-chan client.Event, len(cls))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var armErr atomic.Pointer[error]
	for i, cl := range cls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(x.ctx, x.timeout)
			defer cancel()
			_, _, ch, err := cl.GetW(ctx, key)
			if err != nil {
				err = fmt.Errorf("watching %s: %w", key, err)
				armErr.CompareAndSwap(nil, &err)
			}
			chans[i] = ch
		}()
	}
	wg.Wait()
	if e := armErr.Load(); e != nil {
		return r, *e
	}
	return b.watchRun(r, len(cls), watchSides{
		set: func() error {
			ctx, cancel := context.WithTimeout(x.ctx, x.timeout)
			defer cancel()
			_, err := b.admin.Set(ctx, key, b.value, -1)
			return err
		},
		wait: func(ctx context.Context, i int) error {
			select {
			case ev := <-chans[i]:
				if ev.Type != client.EventNodeDataChanged {
					return fmt.Errorf("watch on %s: unexpected %s event (%v)", key, ev.Type, ev.Err)
				}
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		rearm: func(i int) error {
			ctx, cancel := context.WithTimeout(x.ctx, x.timeout)
			defer cancel()
			_, _, next, err := cls[i].GetW(ctx, key)
			if err != nil {
				return fmt.Errorf("re-arming the watch on %s: %w", key, err)
			}
			chans[i] = next
			return nil
		},
	})
}

// watchSides are the protocol's parts of the watch workload: the writer's
// set of the key, watcher i's wait for its next event (an error for any
// event but a data change), and its re-arming of the watch. Each watcher's
// wait and rearm run on that watcher's goroutine only.
type watchSides struct {
	set   func() error
	wait  func(ctx context.Context, i int) error
	rearm func(i int) error
}

// watchRun runs the watch workload on n armed watchers: the writer sets
// the key, waits until every watcher has its event and has re-armed, and
// sets it again.
func (b *bench) watchRun(r benchResult, n int, sides watchSides) (benchResult, error) {
	x := b.x
	st := &runState{}
	var setStart atomic.Int64 // unix ns of the current setData call
	var measuring atomic.Bool // the current round is in the measured part
	const nshards = 16
	var shards [nshards]struct {
		mu sync.Mutex
		h  histogram
	}
	acks := make(chan bool, n) // false: the watcher failed and quit
	runCtx, stop := context.WithCancel(x.ctx)
	defer stop()

	var watchers sync.WaitGroup
	for i := range n {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			sh := &shards[i%nshards]
			for {
				err := sides.wait(runCtx, i)
				if runCtx.Err() != nil {
					return
				}
				recv := time.Now()
				if err == nil && measuring.Load() {
					sh.mu.Lock()
					sh.h.record(recv.Sub(time.Unix(0, setStart.Load())))
					sh.mu.Unlock()
					st.ops.Add(1)
				}
				if err == nil {
					err = sides.rearm(i)
				}
				if err != nil {
					if runCtx.Err() == nil {
						st.fail(err)
						acks <- false
					}
					return
				}
				acks <- true
			}
		}()
	}

	start := time.Now()
	warmEnd := start.Add(b.o.warmup)
	end := warmEnd.Add(b.o.duration)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		defer stop()
		live := n
		for runCtx.Err() == nil && live > 0 {
			now := time.Now()
			if !now.Before(end) {
				return
			}
			// A round counts when its set starts in the measured part and
			// all its events can arrive before the end.
			measuring.Store(now.After(warmEnd))
			setStart.Store(now.UnixNano())
			if err := sides.set(); err != nil {
				if runCtx.Err() == nil {
					st.fail(fmt.Errorf("set: %w", err))
				}
				return
			}
			timeout := time.NewTimer(x.timeout)
			for got := 0; got < live; {
				select {
				case ok := <-acks:
					got++
					if !ok {
						live--
						got--
					}
				case <-timeout.C:
					st.fail(fmt.Errorf("watch: %d of %d events missing after %s", live-got, live, x.timeout))
					return
				case <-runCtx.Done():
					timeout.Stop()
					return
				}
			}
			timeout.Stop()
		}
	}()
	before := b.measure(benchSpec{"watch", r.Clients}, st, start, warmEnd, end)
	<-writerDone // the last round finishes (bounded by --timeout)
	stop()
	watchers.Wait()
	after := b.status()
	if x.ctx.Err() != nil {
		return r, x.ctx.Err()
	}
	var h histogram
	for i := range shards {
		h.merge(&shards[i].h)
	}
	b.finish(&r, &h, st, before, after)
	return r, nil
}

// writeBenchTable prints the results as one table; the server columns list
// each server's value in member id order, separated by slashes.
func writeBenchTable(w io.Writer, rs []benchResult) {
	var ids []string
	seen := map[string]bool{}
	for _, r := range rs {
		for _, s := range r.Servers {
			if !seen[s.ID] {
				seen[s.ID] = true
				ids = append(ids, s.ID)
			}
		}
	}
	sort.Strings(ids)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := "WORKLOAD\tCLIENTS\tOPS\tERRORS\tOPS/S\tP50 ms\tP95 ms\tP99 ms\tMAX ms\t"
	if len(ids) > 0 {
		hdr += fmt.Sprintf("RSS MB (%s)\tCPU s (%s)\t", strings.Join(ids, "/"), strings.Join(ids, "/"))
	}
	fmt.Fprintln(tw, hdr)
	for _, r := range rs {
		name := r.Workload
		if r.RecursiveWatches != nil {
			name += fmt.Sprintf(" %d watches", *r.RecursiveWatches)
		}
		if r.Latency != "op" {
			name += " (" + r.Latency + ")"
		}
		line := fmt.Sprintf("%s\t%d\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t", name, r.Clients, r.Ops, r.Errors, r.OpsPerS, r.P50Ms, r.P95Ms, r.P99Ms, r.MaxMs)
		if len(ids) > 0 {
			rss := make([]string, len(ids))
			cpu := make([]string, len(ids))
			for i, id := range ids {
				rss[i], cpu[i] = "-", "-"
				for _, s := range r.Servers {
					if s.ID == id {
						rss[i] = strconv.FormatFloat(s.RssMB, 'f', 0, 64)
						cpu[i] = strconv.FormatFloat(s.CPUS, 'f', 1, 64)
					}
				}
			}
			line += strings.Join(rss, "/") + "\t" + strings.Join(cpu, "/") + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// isTerminal reports whether w is a terminal (then the progress line is
// rewritten in place).
func isTerminal(w io.Writer) bool {
	if sw, ok := w.(*syncWriter); ok {
		w = sw.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// histogram is a log-linear latency histogram in nanoseconds, in the manner
// of HdrHistogram: values below 256 have a bucket each; above, every power of
// two is split into 128 equal buckets, so a bucket is at most 1/128 (0.8%) of
// its values wide. It needs a few tens of kilobytes whatever the number of
// ops and run length (exact samples would need 8 bytes per op: fine for one
// short run, unbounded for long ones), and two histograms merge by adding
// counts, so each worker keeps its own and nothing is shared while measuring.
type histogram struct {
	counts   []uint64
	n        uint64
	sum      float64
	min, max int64
}

const histSubBits = 7 // 2^7 = 128 buckets per power of two

func histIndex(v int64) int {
	e := max(0, bits.Len64(uint64(v))-(histSubBits+1))
	return e<<histSubBits + int(v>>e)
}

// histBucket returns the lowest value of bucket i and the bucket's width.
func histBucket(i int) (low, width int64) {
	if i < 2<<histSubBits {
		return int64(i), 1
	}
	e := i>>histSubBits - 1
	m := int64(i - e<<histSubBits)
	return m << e, 1 << e
}

func (h *histogram) record(d time.Duration) {
	v := max(int64(d), 0)
	i := histIndex(v)
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if len(o.counts) > len(h.counts) {
		h.counts = append(h.counts, make([]uint64, len(o.counts)-len(h.counts))...)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// quantile returns the value at quantile q (0..1): the middle of the bucket
// holding the ceil(q*n)-th smallest value, kept within [min, max].
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			low, width := histBucket(i)
			return min(max(low+(width-1)/2, h.min), h.max)
		}
	}
	return h.max
}
