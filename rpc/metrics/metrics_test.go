package metrics

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/coordd/coordd/rpc/engine"
)

var update = flag.Bool("update", false, "rewrite testdata/metrics.golden from the registry")

// families gathers m's registry by name.
func families(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// labelNames returns the label names of a family's metrics, sorted.
func labelNames(mf *dto.MetricFamily) []string {
	set := map[string]bool{}
	for _, mt := range mf.GetMetric() {
		for _, lp := range mt.GetLabel() {
			set[lp.GetName()] = true
		}
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// pinned is every coordd metric as the golden file lists it: name, type,
// label names.
func pinned(t *testing.T, m *Metrics) string {
	var lines []string
	for name, mf := range families(t, m) {
		if !strings.HasPrefix(name, "coordd_") {
			continue
		}
		line := name + " " + strings.ToLower(mf.GetType().String())
		if ls := labelNames(mf); len(ls) > 0 {
			line += " " + strings.Join(ls, ",")
		}
		lines = append(lines, line)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestNamesArePinned: the names, types and labels of the metrics are those
// of testdata/metrics.golden. A dashboard or an alert breaks when one of
// them changes, so a change is made on purpose: go test -run
// TestNamesArePinned ./rpc/metrics -update, and say so in the release
// notes.
func TestNamesArePinned(t *testing.T) {
	got := pinned(t, New(Options{}))
	const golden = "testdata/metrics.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("the metrics differ from %s (a rename breaks dashboards; -update if it is meant):\n got:\n%s\nwant:\n%s", golden, got, want)
	}
}

// TestNamesFollowPrometheusConventions: promlint (Prometheus's own linter)
// finds nothing to say about coordd's metrics, and every name starts with
// coordd_.
func TestNamesFollowPrometheusConventions(t *testing.T) {
	m := New(Options{})
	var names []string
	for name := range families(t, m) {
		if !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			names = append(names, name)
		}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "coordd_") {
			t.Errorf("%s: not under coordd_", n)
		}
	}
	problems, err := testutil.GatherAndLint(m.Registry(), names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestEveryOpHasSeries: every engine operation has its latency series from
// the start, with a type among read, write, sync and session.
func TestEveryOpHasSeries(t *testing.T) {
	mf := families(t, New(Options{}))[nameRequestDuration]
	seen := map[string]string{}
	for _, mt := range mf.GetMetric() {
		var op, typ string
		for _, lp := range mt.GetLabel() {
			switch lp.GetName() {
			case "op":
				op = lp.GetValue()
			case "type":
				typ = lp.GetValue()
			}
		}
		seen[op] = typ
	}
	ops := engineOps()
	if len(ops) < int(engine.OpAddWatch)+1 {
		t.Fatalf("engineOps found %d operations, the engine has at least %d", len(ops), engine.OpAddWatch+1)
	}
	for _, op := range ops {
		typ, ok := seen[op.String()]
		if !ok || !slices.Contains([]string{"read", "write", "sync", "session"}, typ) {
			t.Errorf("op %s: type %q", op, typ)
		}
	}
	for op, want := range map[engine.Op]string{engine.OpGetData: "read", engine.OpCreate: "write", engine.OpMulti: "write", engine.OpSync: "sync", engine.OpPing: "session"} {
		if seen[op.String()] != want {
			t.Errorf("op %s: type %q, want %q", op, seen[op.String()], want)
		}
	}
}

// TestStateAtScrape: a scrape reads the state once and reports it.
func TestStateAtScrape(t *testing.T) {
	reads := 0
	m := New(Options{Version: "v1.2.3", State: func() State {
		reads++
		return State{
			Ready: true, Znodes: 12, EphemeralZnodes: 2, ApproximateDataSize: 345,
			Watches:  WatchCounts{Data: 1, Child: 2, Persistent: 3, PersistentRecursive: 4},
			Sessions: 7, SessionsConnected: 3, OutstandingRequests: 5,
			Raft: RaftState{State: "leader", HasLeader: true, Term: 4, CommitIndex: 99, AppliedIndex: 98, LastLogIndex: 100, Voters: 3, NonVoters: 1},
		}
	}})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if reads != 1 {
		t.Errorf("one scrape read the state %d times, want once", reads)
	}
	for _, want := range []string{
		"coordd_ready 1\n", "coordd_znodes 12\n", "coordd_ephemeral_znodes 2\n", "coordd_approximate_data_size_bytes 345\n",
		`coordd_watches{kind="persistent_recursive"} 4` + "\n", `coordd_watches{kind="child"} 2` + "\n",
		"coordd_sessions 7\n", "coordd_sessions_connected 3\n", "coordd_outstanding_requests 5\n",
		`coordd_raft_state{state="leader"} 1` + "\n", `coordd_raft_state{state="follower"} 0` + "\n",
		"coordd_raft_is_leader 1\n", "coordd_raft_has_leader 1\n", "coordd_raft_term 4\n", "coordd_raft_commit_index 99\n",
		"coordd_raft_applied_index 98\n", "coordd_raft_last_log_index 100\n", `coordd_raft_members{suffrage="nonvoter"} 1` + "\n",
		`coordd_build_info{goversion="go`, `",version="v1.2.3"} 1`,
		"process_resident_memory_bytes ", "go_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape lacks %q", want)
		}
	}
}

// TestRequestsAgreeWithHistograms: the figures mntr reports are those of
// /metrics: the packet counters, and the mean of the latency histograms.
func TestRequestsAgreeWithHistograms(t *testing.T) {
	m := New(Options{})
	if rs := m.Requests(); rs != (RequestStats{}) {
		t.Fatalf("before any request: %+v", rs)
	}
	for i := 0; i < 3; i++ {
		m.Received()
	}
	m.Sent(2)
	m.Answered(engine.OpGetData, 2*time.Millisecond)
	m.Answered(engine.OpCreate, 6*time.Millisecond)
	m.Answered(engine.OpSync, 1*time.Millisecond)
	rs := m.Requests()
	if rs.Received != 3 || rs.Sent != 2 {
		t.Errorf("received, sent = %d, %d; want 3, 2", rs.Received, rs.Sent)
	}
	if rs.MinLatency != time.Millisecond || rs.MaxLatency != 6*time.Millisecond || rs.AvgLatency != 3*time.Millisecond {
		t.Errorf("latency min/avg/max = %v/%v/%v, want 1ms/3ms/6ms", rs.MinLatency, rs.AvgLatency, rs.MaxLatency)
	}
	fams := families(t, m)
	value := func(name string) float64 {
		mf := fams[name]
		if mf == nil || len(mf.GetMetric()) != 1 {
			t.Fatalf("%s: %v", name, mf)
		}
		return mf.GetMetric()[0].GetCounter().GetValue()
	}
	if value(namePacketsReceived) != 3 || value(namePacketsSent) != 2 {
		t.Errorf("/metrics: received %v, sent %v", value(namePacketsReceived), value(namePacketsSent))
	}
	var count uint64
	for _, mt := range fams[nameRequestDuration].GetMetric() {
		count += mt.GetHistogram().GetSampleCount()
	}
	if count != 3 {
		t.Errorf("/metrics: %d latencies, want 3", count)
	}
}

// TestTrafficByType: Traffic counts reads and writes apart, with the
// writes' latencies, and nothing else (a sync, a ping).
func TestTrafficByType(t *testing.T) {
	m := New(Options{})
	if tr := m.Traffic(); tr != (Traffic{}) {
		t.Fatalf("before any request: %+v", tr)
	}
	m.Answered(engine.OpGetData, time.Millisecond)
	m.Answered(engine.OpGetChildren, time.Millisecond)
	m.Answered(engine.OpExists, time.Millisecond)
	m.Answered(engine.OpCreate, 250*time.Millisecond)
	m.Answered(engine.OpSetData, 500*time.Millisecond)
	m.Answered(engine.OpSync, time.Second)
	m.Answered(engine.OpPing, time.Second)
	tr := m.Traffic()
	if tr.Reads != 3 || tr.Writes != 2 || tr.WriteSeconds != 0.75 {
		t.Errorf("traffic %+v, want 3 reads, 2 writes, 0.75s", tr)
	}
}

func ExampleMetrics_Requests() {
	m := New(Options{})
	m.Received()
	m.Answered(engine.OpGetData, 4*time.Millisecond)
	rs := m.Requests()
	fmt.Println(rs.Received, rs.AvgLatency)
	// Output: 1 4ms
}
