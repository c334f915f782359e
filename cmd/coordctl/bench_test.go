package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// benchJSON runs coordctl bench with -o json and decodes its results, one
// map per line (so that a missing field is noticed).
func benchJSON(t *testing.T, args ...string) ([]map[string]any, result) {
	t.Helper()
	r := ctl(t, append([]string{"-o", "json", "bench"}, args...)...)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bench output line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out, r
}

func num(t *testing.T, m map[string]any, field string) float64 {
	t.Helper()
	v, ok := m[field].(float64)
	if !ok {
		t.Fatalf("result %v: field %q missing or not a number", m, field)
	}
	return v
}

// TestBenchOwnConnections: with --share-conns=false every session dials a
// connection of its own, the runs still succeed, and the result says which
// connection model it measured.
func TestBenchOwnConnections(t *testing.T) {
	for _, wl := range []string{"read", "session"} {
		path := "/bench-test-own-" + wl
		fresh(t, path)
		// A session op (open, create, close) may take longer than a short
		// run on a loaded machine: none would be counted.
		res, r := benchJSON(t, wl, "--clients", "3", "--keys", "10", "--duration", "1s",
			"--share-conns=false", "--path", path)
		if r.code != 0 || len(res) != 1 {
			t.Fatalf("%s: exit %d, %d results, stderr:\n%s", wl, r.code, len(res), r.stderr)
		}
		m := res[0]
		if ops, e := num(t, m, "ops"), num(t, m, "errors"); ops <= 0 || e != 0 {
			t.Errorf("%s: ops %v errors %v (%v), want ops and no errors", wl, ops, e, m["first_error"])
		}
		if m["shared_conns"] != false {
			t.Errorf("%s: shared_conns %v, want false", wl, m["shared_conns"])
		}
	}
}

// TestBenchWorkloads runs every workload through both protocols: coordd's
// gRPC client, and ZooKeeper's protocol through go-zookeeper.
func TestBenchWorkloads(t *testing.T) {
	for _, proto := range []string{"grpc", "zk"} {
		for _, wl := range []string{"write", "read", "read-sync", "create-eph", "session", "lock", "watch", "session-hold"} {
			t.Run(proto+"/"+wl, func(t *testing.T) { testBenchWorkload(t, proto, wl) })
		}
	}
}

func testBenchWorkload(t *testing.T, proto, wl string) {
	{
		{
			path := "/bench-test-" + proto + "-" + wl
			fresh(t, path)
			dur := "300ms"
			if wl == "session" {
				dur = "1s" // an op may take longer than 300ms on a loaded machine
			}
			res, r := benchJSON(t, wl, "--clients", "2", "--watchers", "2", "--keys", "20",
				"--duration", dur, "--path", path, "--protocol", proto)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			if len(res) != 1 {
				t.Fatalf("%d results, want 1:\n%s", len(res), r.stdout)
			}
			m := res[0]
			if m["workload"] != wl {
				t.Errorf("workload %v, want %s", m["workload"], wl)
			}
			if c := num(t, m, "clients"); c != 2 {
				t.Errorf("clients %v, want 2", c)
			}
			if ops := num(t, m, "ops"); ops <= 0 {
				t.Errorf("ops %v, want > 0", ops)
			}
			if e := num(t, m, "errors"); e != 0 {
				t.Errorf("errors %v (%v), want 0", e, m["first_error"])
			}
			if wl == "session-hold" {
				if h := num(t, m, "held_sessions"); h != 2 || num(t, m, "ops") != 2 {
					t.Errorf("held_sessions %v, ops %v: want both sessions held and healthy", h, m["ops"])
				}
			} else if v := num(t, m, "ops_per_s"); v <= 0 {
				t.Errorf("ops_per_s %v, want > 0", v)
			}
			if m["protocol"] != proto {
				t.Errorf("protocol %v, want %s", m["protocol"], proto)
			}
			// A ZooKeeper session has a connection of its own.
			if want := proto == "grpc"; m["shared_conns"] != want {
				t.Errorf("shared_conns %v, want %v", m["shared_conns"], want)
			}
			p50, p95, p99, mx := num(t, m, "p50_ms"), num(t, m, "p95_ms"), num(t, m, "p99_ms"), num(t, m, "max_ms")
			if !(0 < p50 && p50 <= p95 && p95 <= p99 && p99 <= mx) {
				t.Errorf("percentiles not ordered: p50 %v p95 %v p99 %v max %v", p50, p95, p99, mx)
			}
			servers, ok := m["servers"].([]any)
			if !ok || len(servers) != 1 {
				t.Fatalf("servers %v, want the one server's usage", m["servers"])
			}
			if rss := num(t, servers[0].(map[string]any), "rss_mb"); rss <= 0 {
				t.Errorf("rss_mb %v, want > 0", rss)
			}
			if _, ok := servers[0].(map[string]any)["cpu_s"]; !ok {
				t.Errorf("cpu_s missing: %v", servers[0])
			}
			if wl == "lock" && num(t, m, "handoffs_per_s") != num(t, m, "ops_per_s") {
				t.Errorf("handoffs_per_s %v, ops_per_s %v", m["handoffs_per_s"], m["ops_per_s"])
			}
			if wl == "session-hold" {
				if srv := servers[0].(map[string]any); num(t, srv, "rss_start_mb") <= 0 || srv["role"] != "leader" {
					t.Errorf("server %v: want rss_start_mb and the leader's role", srv)
				}
			}
			// The benchmark cleans up after itself.
			if r := ctl(t, "stat", path); r.code == 0 || !strings.Contains(r.stderr, "does not exist") {
				t.Errorf("%s left behind (exit %d, %s)", path, r.code, r.stderr)
			}
		}
	}
}

func TestBenchCrossProductAndTable(t *testing.T) {
	path := "/bench-test-cross"
	fresh(t, path)
	res, r := benchJSON(t, "write,read", "--clients", "1,2", "--keys", "4", "--duration", "100ms", "--path", path, "watch:3", "idle")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var got []string
	for _, m := range res {
		got = append(got, fmt.Sprintf("%v/%v", m["workload"], m["clients"]))
	}
	want := []string{"write/1", "write/2", "read/1", "read/2", "watch/3", "idle/0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}

	// Text: one table, a header and a row per run; flags after the workload.
	r = ctl(t, "bench", "read", "--clients", "1", "--keys", "2", "--duration", "100ms", "--warmup", "0s", "--path", path)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "OPS/S") || !strings.Contains(lines[0], "P99 ms") ||
		!strings.Contains(lines[1], "read") {
		t.Errorf("table:\n%s", r.stdout)
	}
}

func TestBenchUsageAndSetupErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "nosuch"},
		{"bench", "write", "--clients", "0"},
		{"bench", "write:x"},
		{"bench", "write", "--duration", "0s"},
		{"bench", "write", "--path", "relative"},
		{"bench", "write", "-o", "yaml"},
		{"bench", "write", "--protocol", "http"},
		{"bench", "write", "--protocol", "zk", "--share-conns"},
	} {
		if r := ctl(t, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	// The root's parent does not exist: the run cannot set up, exit 1.
	r := ctl(t, "bench", "write", "--duration", "100ms", "--path", "/bench-no-parent/x")
	if r.code != 1 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("exit %d, stderr %q; want 1 and a missing node", r.code, r.stderr)
	}
}

func TestBenchPlan(t *testing.T) {
	o := &benchOptions{watchers: 7}
	specs, err := o.plan([]string{"write,lock", "read:3,4", "watch", "watch:5", "watch-recursive", "watch-recursive:9", "idle"}, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []benchSpec{{"write", 1}, {"write", 2}, {"lock", 1}, {"lock", 2}, {"read", 3}, {"read", 4}, {"watch", 7}, {"watch", 5},
		{"watch-recursive", 7}, {"watch-recursive", 9}, {"idle", 0}}
	if !reflect.DeepEqual(specs, want) {
		t.Errorf("plan %v, want %v", specs, want)
	}
	if got := rotate([]string{"a", "b", "c"}, 4); !reflect.DeepEqual(got, []string{"b", "c", "a"}) {
		t.Errorf("rotate: %v", got)
	}
	o = &benchOptions{duration: 5 * time.Second, keys: 1, watchers: 1, treeNodes: 1, recursiveWatches: 1, writers: 1, root: "/b", autoWarmup: true}
	if err := o.check(); err != nil || o.warmup != 500*time.Millisecond {
		t.Errorf("warmup %v (%v), want 500ms", o.warmup, err)
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Every value falls in a bucket whose bounds hold it, and buckets are
	// contiguous and at most 1/128 of their values wide.
	prevEnd := int64(0)
	for i := 0; i < 40*128; i++ {
		low, width := histBucket(i)
		if low != prevEnd {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, low, prevEnd)
		}
		if low >= 256 && float64(width)/float64(low) > 1.0/128 {
			t.Fatalf("bucket %d [%d, +%d) too wide", i, low, width)
		}
		for _, v := range []int64{low, low + width - 1} {
			if histIndex(v) != i {
				t.Fatalf("value %d: index %d, want %d", v, histIndex(v), i)
			}
		}
		prevEnd = low + width
	}
}

func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b histogram
	var exact []int64
	for i := 0; i < 100000; i++ {
		// log-normal-ish latencies from ~50µs to ~1s
		v := int64(math.Exp(10.8 + 1.5*rng.NormFloat64()))
		exact = append(exact, v)
		if i%2 == 0 {
			a.record(time.Duration(v))
		} else {
			b.record(time.Duration(v))
		}
	}
	a.merge(&b)
	sort.Slice(exact, func(i, j int) bool { return exact[i] < exact[j] })
	if a.n != uint64(len(exact)) || a.max != exact[len(exact)-1] || a.min != exact[0] {
		t.Fatalf("n %d min %d max %d; want %d %d %d", a.n, a.min, a.max, len(exact), exact[0], exact[len(exact)-1])
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
		want := exact[int(math.Ceil(q*float64(len(exact))))-1]
		got := a.quantile(q)
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 1.0/128 {
			t.Errorf("q%v: %d, exact %d (%.2f%% off)", q, got, want, 100*rel)
		}
	}
	var empty histogram
	if empty.quantile(0.5) != 0 || empty.mean() != 0 {
		t.Error("empty histogram")
	}
}

// TestWatchdogEndsStuckOp: an op running longer than the timeout is ended
// with errOpTimeout as the cause; an idle worker is left alone.
func TestWatchdogEndsStuckOp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck, idle := &benchWorker{}, &benchWorker{}
	sctx, scancel := context.WithCancelCause(ctx)
	stuck.setStuck(scancel)
	ictx, icancel := context.WithCancelCause(ctx)
	idle.setStuck(icancel)
	stuck.opStart.Store(time.Now().Add(-time.Minute).UnixNano())
	go watchdog(ctx, []*benchWorker{stuck, idle}, 40*time.Millisecond)
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

// TestBenchWatchRecursive: the watch-recursive workload builds its tree,
// measures the writes without and with the recursive watches and the
// events, and reports three results.
func TestBenchWatchRecursive(t *testing.T) {
	path := "/bench-test-rec"
	fresh(t, path)
	res, r := benchJSON(t, "watch-recursive:3", "--tree", "300", "--recursive-watches", "40", "--writers", "2",
		"--duration", "400ms", "--path", path)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if len(res) != 3 {
		t.Fatalf("%d results, want 3:\n%s", len(res), r.stdout)
	}
	for i, want := range []struct {
		latency string
		watches float64
	}{{"write", 0}, {"write", 40}, {"event", 40}} {
		m := res[i]
		if m["workload"] != "watch-recursive" || m["latency"] != want.latency || num(t, m, "recursive_watches") != want.watches {
			t.Errorf("result %d: %v, want %s latency with %v watches", i, m, want.latency, want.watches)
		}
		if num(t, m, "tree_nodes") != 300 || num(t, m, "watch_sessions") != 3 || num(t, m, "clients") != 2 {
			t.Errorf("result %d: %v", i, m)
		}
		if ops, e := num(t, m, "ops"), num(t, m, "errors"); ops <= 0 || e != 0 {
			t.Errorf("result %d: ops %v errors %v (%v)", i, ops, e, m["first_error"])
		}
		if p50, p99 := num(t, m, "p50_ms"), num(t, m, "p99_ms"); !(0 < p50 && p50 <= p99) {
			t.Errorf("result %d: p50 %v p99 %v", i, p50, p99)
		}
	}

	if r := ctl(t, "stat", path); r.code == 0 {
		t.Errorf("%s left behind", path)
	}
}

func TestTreePaths(t *testing.T) {
	got := treePaths("/t", 13, 3)
	want := []string{"/t/n0", "/t/n1", "/t/n2", "/t/n0/n0", "/t/n0/n1", "/t/n0/n2", "/t/n1/n0", "/t/n1/n1", "/t/n1/n2",
		"/t/n2/n0", "/t/n2/n1", "/t/n2/n2", "/t/n0/n0/n0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("treePaths = %v", got)
	}
	if n := len(treePaths("/t", 100000, 10)); n != 100000 {
		t.Errorf("%d nodes", n)
	}
}

// TestRunWorkersTwice: workers that serve two runs report each run's
// latencies alone.
func TestRunWorkersTwice(t *testing.T) {
	c := newCLI(strings.NewReader(""), io.Discard, io.Discard, nil)
	c.servers, c.timeout = []string{server(t)}, 5*time.Second
	x := &cmd{cli: c, ctx: context.Background(), out: &printer{w: io.Discard}}
	b := &bench{x: x, o: &benchOptions{duration: 50 * time.Millisecond}}
	workers := []*benchWorker{{id: 0}, {id: 1}}
	for _, lat := range []time.Duration{time.Millisecond, time.Second} {
		var r benchResult
		op := func(context.Context, *benchWorker) (time.Duration, error) { return lat, nil }
		if _, _, err := b.runWorkers(benchSpec{"test", 2}, &r, workers, op); err != nil {
			t.Fatal(err)
		}
		if want := float64(lat.Milliseconds()); r.P50Ms != want || r.MaxMs != want {
			t.Errorf("run of %v ops: p50 %v ms, max %v ms, want %v", lat, r.P50Ms, r.MaxMs, want)
		}
	}
}
