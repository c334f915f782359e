package bench

import (
	"math"

	"github.com/coordd/coordd/rpc/apipb"
)

// Result is the outcome of one run; its JSON form is one line of coordctl
// bench -o json (scripts and test/cluster/compare parse it: keep its
// fields and their order).
type Result struct {
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
	Servers           []ServerUsage  `json:"servers,omitempty"`
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

// ServerUsage is one server's resources: resident memory after the run and
// CPU seconds used during the measured part.
type ServerUsage struct {
	ID      string  `json:"id"`
	Address string  `json:"address"`
	Role    string  `json:"role,omitempty"`
	RssMB   float64 `json:"rss_mb"`
	CPUS    float64 `json:"cpu_s"`
	// RssStartMB is the resident memory at the start of the run
	// (session-hold only: before its sessions were opened).
	RssStartMB float64 `json:"rss_start_mb,omitempty"`
}

// result is the start of spec s's result: what it is, before it runs.
func (b *Bench) result(s Spec) Result {
	return Result{Workload: s.Workload, Clients: s.Clients, Protocol: b.cfg.Protocol, ValueSize: b.cfg.ValueSize,
		Latency: "op", SharedConns: b.cfg.ShareConns}
}

// finish fills in the result's counts, percentiles and server usage.
func (b *Bench) finish(r *Result, h *histogram, st *runState, before, after *apipb.StatusResponse) {
	r.DurationS = b.cfg.Duration.Seconds()
	r.Ops = st.ops.Load()
	r.Errors = st.errs.Load()
	if st.firstErr != nil {
		r.FirstError = b.cfg.errText(st.firstErr)
	}
	r.OpsPerS = round(float64(r.Ops)/b.cfg.Duration.Seconds(), 1)
	r.setLatencies(h)
	r.Servers = usage(before, after)
	for _, u := range r.Servers {
		if u.Role == "leader" {
			r.LeaderCores = round(u.CPUS/b.cfg.Duration.Seconds(), 3)
		}
	}
}

// setLatencies fills in the mean, the percentiles and the maximum of h,
// in milliseconds.
func (r *Result) setLatencies(h *histogram) {
	ms := func(ns int64) float64 { return round(float64(ns)/1e6, 3) }
	r.MeanMs = ms(int64(h.mean()))
	r.P50Ms = ms(h.quantile(0.50))
	r.P95Ms = ms(h.quantile(0.95))
	r.P99Ms = ms(h.quantile(0.99))
	r.MaxMs = ms(h.max)
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// usage is each member's RSS after and CPU seconds between the two statuses;
// nil when the servers do not report them.
func usage(before, after *apipb.StatusResponse) []ServerUsage {
	if after == nil {
		return nil
	}
	cpu0 := map[string]float64{}
	if before != nil {
		for _, m := range before.GetMembers() {
			cpu0[m.GetId()] = m.GetCpuSeconds()
		}
	}
	var out []ServerUsage
	for _, m := range after.GetMembers() {
		if m.GetRssBytes() == 0 {
			continue // unreachable, or a server that does not report usage
		}
		u := ServerUsage{ID: m.GetId(), Address: m.GetClientAddress(), Role: m.GetRole(), RssMB: round(float64(m.GetRssBytes())/(1<<20), 1)}
		if c0, ok := cpu0[m.GetId()]; ok {
			u.CPUS = round(m.GetCpuSeconds()-c0, 2)
		}
		out = append(out, u)
	}
	return out
}
