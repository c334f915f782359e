package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
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
		{"bench", "write,watch-recursive", "--protocol", "zk"},
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
