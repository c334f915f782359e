package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// httpGet fetches url: its status and body (0 and the error's text when it
// could not).
func httpGet(url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// probe is a member's /readyz or /livez answer.
func (c *Cluster) probe(i int, path string) (int, string) {
	return httpGet("http://" + c.Members[i].Cfg.MetricsAddr + path)
}

// scrape reads a member's /metrics.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet("http://" + addr + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics on %s: %d %s", addr, code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics on %s: %v", addr, err)
	}
	return mfs
}

// metricValue sums a family's samples whose labels include the given
// name=value pairs: values of counters and gauges, sample counts of
// histograms. It fails when the family is missing.
func metricValue(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		t.Fatalf("no metric %s", name)
	}
	sum := 0.0
	for _, m := range mf.GetMetric() {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

// healthOf asks a server's gRPC health service about service.
func healthOf(t *testing.T, addr, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health check of %q on %s: %v", service, addr, err)
	}
	return resp.GetStatus()
}

// TestReadyzFollowsTheLeader: every server of a healthy cluster is ready; a
// follower cut off from the others is not (/readyz 503 with the reason,
// gRPC health NOT_SERVING) but is alive (/livez 200); once the partition
// heals it is ready again, and only once it has applied what the leader
// committed meanwhile.
func TestReadyzFollowsTheLeader(t *testing.T) {
	c := New(t, 3, Options{Admin: true})
	for i := range c.Members {
		c.Eventually(20*time.Second, "server "+c.Members[i].ID+" ready", func() bool {
			code, _ := c.probe(i, "/readyz")
			return code == http.StatusOK
		})
		// gRPC health follows readiness at the next round, a half tick.
		c.Eventually(10*time.Second, "server "+c.Members[i].ID+"'s gRPC health SERVING", func() bool {
			return healthOf(t, c.Members[i].Cfg.ClientAddr, "") == healthpb.HealthCheckResponse_SERVING
		})
	}
	leader := c.LeaderIndex()
	f := c.Follower()
	ctx := context.Background()
	cl, err := client.Connect(ctx, []string{c.Members[leader].Cfg.ClientAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)

	c.Isolate(f)
	var why string
	c.Eventually(20*time.Second, "the cut-off follower not ready", func() bool {
		var code int
		code, why = c.probe(f, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	if strings.TrimSpace(why) == "" || strings.Contains(why, "ok") {
		t.Errorf("/readyz of the cut-off follower says %q: want a reason", why)
	}
	t.Logf("cut-off follower: /readyz: %s", strings.TrimSpace(why))
	if code, body := c.probe(f, "/livez"); code != http.StatusOK {
		t.Errorf("/livez of the cut-off follower: %d %s, want 200", code, body)
	}
	c.Eventually(10*time.Second, "the cut-off follower's gRPC health NOT_SERVING", func() bool {
		return healthOf(t, c.Members[f].Cfg.ClientAddr, "coordd.api.v1.Coord") == healthpb.HealthCheckResponse_NOT_SERVING
	})

	// The majority goes on; what it commits meanwhile the follower lacks.
	for i := 0; i < 100; i++ {
		if _, err := cl.Create(ctx, fmt.Sprintf("/while-cut-%03d", i), []byte("x"), client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	var committed int64
	for _, i := range []int{0, 1, 2} {
		if i != f {
			committed = max(committed, c.Members[i].Node().FSM().AppliedIndex())
		}
	}
	if got := c.Members[f].Node().FSM().AppliedIndex(); got >= committed {
		t.Fatalf("the cut-off follower applied %d, the majority %d: it was not cut off", got, committed)
	}

	c.Net.Heal()
	c.Eventually(30*time.Second, "the follower ready again", func() bool {
		code, _ := c.probe(f, "/readyz")
		return code == http.StatusOK
	})
	if got := c.Members[f].Node().FSM().AppliedIndex(); got < committed {
		t.Errorf("ready with %d applied, before what the majority committed while it was cut off (%d)", got, committed)
	}
	c.Eventually(10*time.Second, "the follower's gRPC health SERVING", func() bool {
		return healthOf(t, c.Members[f].Cfg.ClientAddr, "") == healthpb.HealthCheckResponse_SERVING
	})
	for i := range c.Members {
		c.Eventually(20*time.Second, "server "+c.Members[i].ID+" ready after the heal", func() bool {
			code, _ := c.probe(i, "/readyz")
			return code == http.StatusOK
		})
	}
}

// TestReflectionListsServices: server reflection on the client port lists
// coordd's API, gRPC health and reflection (what grpcurl -plaintext ADDR
// list asks), and resolves the API's file by its service's name.
func TestReflectionListsServices(t *testing.T) {
	c := New(t, 1, Options{})
	cc, err := grpc.NewClient(c.Members[0].Cfg.ClientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"coordd.api.v1.Coord", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, without %s", names, want)
		}
	}
	resp = ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "coordd.api.v1.Coord"}})
	if fds := resp.GetFileDescriptorResponse().GetFileDescriptorProto(); len(fds) == 0 {
		t.Errorf("no file descriptor for coordd.api.v1.Coord: %v", resp.GetErrorResponse())
	}
}

// ask4 sends a four-letter word to addr and returns the answer.
func ask4(t *testing.T, addr, word string) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte(word)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(nc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mntrOf parses mntr's answer.
func mntrOf(t *testing.T, addr string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(ask4(t, addr, "mntr")), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("mntr line %q", line)
		}
		out[k] = v
	}
	return out
}

// TestMntrAgreesWithMetrics: ZooKeeper's mntr and /metrics report the same
// figures on each server (znodes, ephemerals, watches, data size, sessions
// here and in the cluster, outstanding requests), and mntr's packet counts,
// taken between two scrapes, lie between theirs: one source, counting both
// protocols.
func TestMntrAgreesWithMetrics(t *testing.T) {
	c := New(t, 3, Options{Admin: true})
	ctx := context.Background()
	leader := c.LeaderIndex()
	f := c.Follower()
	// A gRPC session on the follower, with ephemerals and watches of each
	// kind, and a ZooKeeper session beside it.
	cl, err := client.Connect(ctx, []string{c.Members[f].Cfg.ClientAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)
	if _, err := cl.Create(ctx, "/m", []byte("data"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := cl.Create(ctx, fmt.Sprintf("/m/e%d", i), []byte("eph"), client.CreateMode{Kind: client.Ephemeral}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := cl.GetW(ctx, "/m"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := cl.ExistsW(ctx, "/absent"); err != nil {
		t.Fatal(err)
	}
	zc, err := net.Dial("tcp", c.Members[f].Cfg.ClientAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if _, err := zc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)})); err != nil {
		t.Fatal(err)
	}
	if _, err := jute.ReadFrame(zc, 1<<20); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(10*time.Second, 1)

	for _, i := range []int{leader, f} {
		m := c.Members[i]
		// A scrape, mntr, a scrape: the gauges agree when nothing changed
		// in between (a client's ping in flight changes the outstanding
		// requests for a moment: ask again), and mntr's counters lie
		// between the two scrapes'.
		var mntr map[string]string
		var before, after map[string]*dto.MetricFamily
		var differ []string
		num := func(k string) float64 {
			v, err := strconv.ParseFloat(mntr[k], 64)
			if err != nil {
				t.Fatalf("server %s: mntr %s = %q", m.ID, k, mntr[k])
			}
			return v
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			before = scrape(t, m.Cfg.MetricsAddr)
			mntr = mntrOf(t, m.Cfg.ClientAddr)
			after = scrape(t, m.Cfg.MetricsAddr)
			differ = nil
			for _, p := range []struct {
				mntr, metric string
			}{
				{"zk_znode_count", "coordd_znodes"},
				{"zk_ephemerals_count", "coordd_ephemeral_znodes"},
				{"zk_approximate_data_size", "coordd_approximate_data_size_bytes"},
				{"zk_watch_count", "coordd_watches"},
				{"zk_global_sessions", "coordd_sessions"},
				{"zk_local_sessions", "coordd_sessions_connected"},
				{"zk_num_alive_connections", "coordd_sessions_connected"},
				{"zk_outstanding_requests", "coordd_outstanding_requests"},
			} {
				got, b, a := num(p.mntr), metricValue(t, before, p.metric), metricValue(t, after, p.metric)
				if got != b || got != a {
					differ = append(differ, fmt.Sprintf("mntr %s = %v, /metrics %s = %v then %v", p.mntr, got, p.metric, b, a))
				}
			}
			if len(differ) == 0 || time.Now().After(deadline) {
				break
			}
		}
		for _, d := range differ {
			t.Errorf("server %s: %s", m.ID, d)
		}
		for _, p := range []struct {
			mntr, metric string
		}{
			{"zk_packets_received", "coordd_packets_received_total"},
			{"zk_packets_sent", "coordd_packets_sent_total"},
		} {
			got, b, a := num(p.mntr), metricValue(t, before, p.metric), metricValue(t, after, p.metric)
			if got < b || got > a {
				t.Errorf("server %s: mntr %s = %v, not between /metrics %s = %v and %v", m.ID, p.mntr, got, p.metric, b, a)
			}
		}
		if i == f {
			// Four nodes of the test's, the root, ZooKeeper's three; both
			// sessions connected here; a data and an exists watch.
			if num("zk_ephemerals_count") != 3 || num("zk_local_sessions") != 2 || num("zk_watch_count") != 2 ||
				metricValue(t, after, "coordd_watches", "kind", "data") != 2 || num("zk_znode_count") != 8 {
				t.Errorf("server %s: mntr %v", m.ID, mntr)
			}
			if num("zk_packets_received") < 8 || num("zk_avg_latency") <= 0 {
				t.Errorf("server %s: the requests of both protocols are not counted: mntr %v", m.ID, mntr)
			}
		}
	}
}

// TestRaftMetrics: the Raft figures move as the cluster works: a leader
// seen, proposals and forwarded commands, log appends and their fsyncs,
// read-index rounds, applied batches, a snapshot's size and duration, and
// an expiry counted on every server.
func TestRaftMetrics(t *testing.T) {
	c := New(t, 3, Options{Admin: true})
	ctx := context.Background()
	leader := c.LeaderIndex()
	f := c.Follower()
	cl, err := client.Connect(ctx, []string{c.Members[f].Cfg.ClientAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)
	for i := 0; i < 20; i++ {
		if _, err := cl.Create(ctx, fmt.Sprintf("/r%02d", i), nil, client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	// A ZooKeeper session whose client goes away without closing it.
	zc, err := net.Dial("tcp", c.Members[leader].Cfg.ClientAddr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zc.Write(jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: 400, Passwd: make([]byte, 16)})); err != nil {
		t.Fatal(err)
	}
	if _, err := jute.ReadFrame(zc, 1<<20); err != nil {
		t.Fatal(err)
	}
	zc.Close()
	for i := range c.Members {
		c.Eventually(20*time.Second, "server "+c.Members[i].ID+" to count the expiry", func() bool {
			return metricValue(t, scrape(t, c.Members[i].Cfg.MetricsAddr), "coordd_session_expirations_total") == 1
		})
	}
	if err := c.Members[f].Node().Snapshot(); err != nil {
		t.Fatal(err)
	}

	lm := scrape(t, c.Members[leader].Cfg.MetricsAddr)
	fm := scrape(t, c.Members[f].Cfg.MetricsAddr)
	// On a loaded machine the leader may change meanwhile: then who led
	// when is not known, and only what does not depend on it is checked.
	stable := true
	for i := range c.Members {
		if metricValue(t, scrape(t, c.Members[i].Cfg.MetricsAddr), "coordd_raft_leader_changes_total") != 1 {
			stable = false
		}
	}
	if !stable {
		t.Logf("the leader changed during the test: the checks of who leads and who forwards are left out")
	}
	for _, chk := range []struct {
		what   string
		mfs    map[string]*dto.MetricFamily
		name   string
		lbl    []string
		min    float64
		stable bool // holds only if the first leader led throughout
	}{
		{"leader: a leader seen", lm, "coordd_raft_leader_changes_total", nil, 1, false},
		{"follower: a leader seen", fm, "coordd_raft_leader_changes_total", nil, 1, false},
		{"leader: is the leader", lm, "coordd_raft_is_leader", nil, 1, true},
		{"follower: follows", fm, "coordd_raft_state", []string{"state", "follower"}, 1, true},
		{"follower: knows the leader", fm, "coordd_raft_has_leader", nil, 1, true},
		{"follower: its writes proposed", fm, "coordd_raft_proposals_total", nil, 21, false},
		{"follower: its writes forwarded", fm, "coordd_raft_forwarded_commands_total", nil, 21, true},
		{"leader: log appends", lm, "coordd_raft_log_append_duration_seconds", nil, 1, false},
		{"follower: log appends", fm, "coordd_raft_log_append_entries", nil, 1, false},
		{"follower: fsyncs timed", fm, "coordd_raft_log_fsync_duration_seconds", nil, 1, false},
		{"follower: read-index calls", fm, "coordd_read_index_duration_seconds", []string{"role", "follower"}, 1, false},
		{"leader: read-index rounds", lm, "coordd_read_index_duration_seconds", []string{"role", "leader"}, 1, false},
		{"leader: applied batches", lm, "coordd_fsm_apply_batch_entries", nil, 1, false},
		{"follower: a snapshot written", fm, "coordd_raft_snapshot_persist_duration_seconds", nil, 1, false},
		{"follower: the snapshot's size", fm, "coordd_raft_snapshot_size_bytes", nil, 100, false},
		{"follower: its creates timed", fm, "coordd_request_duration_seconds", []string{"op", "create", "type", "write"}, 20, false},
		{"follower: its sync timed", fm, "coordd_request_duration_seconds", []string{"op", "sync"}, 1, false},
		{"leader: term", lm, "coordd_raft_term", nil, 1, false},
		{"leader: commit index", lm, "coordd_raft_commit_index", nil, 22, false},
		{"follower: voters", fm, "coordd_raft_members", []string{"suffrage", "voter"}, 3, false},
	} {
		if chk.stable && !stable {
			continue
		}
		if got := metricValue(t, chk.mfs, chk.name, chk.lbl...); got < chk.min {
			t.Errorf("%s: %s%v = %v, want at least %v", chk.what, chk.name, chk.lbl, got, chk.min)
		}
	}
	applied := metricValue(t, fm, "coordd_raft_applied_index")
	if last := metricValue(t, fm, "coordd_raft_last_log_index"); applied < 22 || last < applied {
		t.Errorf("follower: applied %v, last log index %v", applied, last)
	}
}
