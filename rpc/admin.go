package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
)

// The admin HTTP server (Config.MetricsAddr): Prometheus metrics at
// /metrics, /livez and /readyz for probes and load balancers, and Go's
// profiles under /debug/pprof/ with Config.MetricsPprof. Its mux is the
// Node's (Admin), so that more handlers can be mounted on it; "/" is left
// free for them.
//
// Readiness also drives gRPC's standard health service on the client port
// (grpc.health.v1.Health), for the server ("") and for coordd's API.

// newAdmin makes the admin mux with coordd's handlers.
func (n *Node) newAdmin() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", n.metrics.Handler())
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) {
		probeAnswer(w, r, n.Live())
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		var err error
		if ok, why := n.Ready(); !ok {
			err = errors.New(why)
		}
		probeAnswer(w, r, err)
	})
	if n.cfg.MetricsPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// probeAnswer answers a probe: 200 "ok", or 503 and why not.
func probeAnswer(w http.ResponseWriter, r *http.Request, err error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "%v\n", err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// serveAdmin serves the admin mux on ln until the node closes.
func (n *Node) serveAdmin(ln net.Listener) {
	n.adminSrv = &http.Server{
		Handler:           n.adminMux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(n.log.With("component", "admin").Handler(), slog.LevelInfo),
	}
	srv := n.adminSrv
	n.start(func() { _ = srv.Serve(ln) })
}

// Admin returns the admin HTTP server's mux: handlers mounted on it are
// served on Config.MetricsAddr (nowhere when it is empty), beside
// /metrics, /livez and /readyz.
func (n *Node) Admin() *http.ServeMux { return n.adminMux }

// MetricsAddr returns the address the admin HTTP server listens on, or ""
// when it has none.
func (n *Node) MetricsAddr() string {
	if n.adminLn == nil {
		return ""
	}
	return n.adminLn.Addr().String()
}

// readiness is what the last read-index round of trackReadiness learnt.
type readiness struct {
	mu    sync.Mutex
	index int64     // the read index of the last round that succeeded
	at    time.Time // when it was obtained (zero: never)
	err   error     // the last round's failure, nil if it succeeded
}

// readyInterval is how often a server asks the leader for a read index to
// know whether it is caught up: twice a tick, within [50ms, 1s].
func (n *Node) readyInterval() time.Duration {
	return min(max(n.cfg.Tick/2, 50*time.Millisecond), time.Second)
}

// readyStale is how old the last read index may be for the server to be
// ready: rounds are bounded by an election timeout, so an older one means
// they have stopped answering.
func (n *Node) readyStale() time.Duration {
	return n.cfg.ElectionTimeout + 2*n.readyInterval()
}

// Ready reports whether this server is ready to serve clients, and if not,
// why: it knows a leader, its last read index (as a sync gets one, asked
// every readyInterval) came in moments ago, and it has applied that index,
// that is everything the leader had committed then. A server cut off from
// the leader is not ready: it knows no leader, or its rounds fail; nor is
// one catching up after a restart or a partition (an index from before
// one never counts: the rounds during it failed).
func (n *Node) Ready() (bool, string) {
	if n.ctx.Err() != nil {
		return false, "shutting down"
	}
	if !n.raftSet.Load() {
		return false, "starting"
	}
	if _, id := n.raft.LeaderWithID(); id == "" {
		return false, "no leader"
	}
	if n.disk.logFull() {
		return false, diskFullWhy
	}
	n.ready.mu.Lock()
	idx, at, err := n.ready.index, n.ready.at, n.ready.err
	n.ready.mu.Unlock()
	switch age := time.Since(at); {
	case err != nil:
		return false, fmt.Sprintf("no read index from the leader: %v", err)
	case at.IsZero():
		return false, "no read index from the leader yet"
	case age > n.readyStale():
		return false, fmt.Sprintf("no read index from the leader for %v", age.Round(time.Millisecond))
	}
	if applied := n.fsm.AppliedIndex(); applied < idx {
		return false, fmt.Sprintf("catching up with the leader: applied %d of %d", applied, idx)
	}
	return true, "ok"
}

// trackReadiness asks for a read index every readyInterval, and keeps the
// gRPC health service's status in step with Ready.
func (n *Node) trackReadiness() {
	tk := time.NewTicker(n.readyInterval())
	defer tk.Stop()
	for {
		if idx, err := n.readinessRound(); err == nil {
			// Caught up within the interval is ready within it, rather than
			// at the next round.
			ctx, cancel := context.WithTimeout(n.ctx, n.readyInterval())
			n.fsm.WaitApplied(ctx.Done(), idx)
			cancel()
		}
		status := healthpb.HealthCheckResponse_NOT_SERVING
		if ok, _ := n.Ready(); ok {
			status = healthpb.HealthCheckResponse_SERVING
		}
		for _, svc := range []string{"", apipb.Coord_ServiceDesc.ServiceName} {
			n.health.SetServingStatus(svc, status)
		}
		select {
		case <-n.ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// readinessRound asks for a read index once (as the leader: its commit
// index, confirmed by a majority; as a follower: the leader's), bounded by
// an election timeout, and records and returns it.
func (n *Node) readinessRound() (int64, error) {
	var idx int64
	var err error
	if _, id := n.raft.LeaderWithID(); id == "" {
		err = errNoLeader
	} else {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ElectionTimeout)
		if n.raft.State() == raft.Leader {
			idx, err = n.leaderReadIndex(ctx)
		} else {
			idx, err = n.asked.do(ctx)
		}
		cancel()
	}
	n.ready.mu.Lock()
	defer n.ready.mu.Unlock()
	n.ready.err = err
	if err == nil {
		n.ready.index, n.ready.at = idx, time.Now()
	}
	return idx, err
}

// newHealth returns gRPC's health service, not serving until the first
// readiness round says otherwise.
func newHealth() *health.Server {
	hs := health.NewServer()
	for _, svc := range []string{"", apipb.Coord_ServiceDesc.ServiceName} {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return hs
}

// liveTimeout bounds how long Live waits for the state machine.
const liveTimeout = 2 * time.Second

// Live reports whether this server is alive, as /livez does: it is not
// shutting down, Raft runs, and its state machine answers a read within
// liveTimeout (its lock is not stuck). A server cut off from the others is
// alive: restarting it would not help.
func (n *Node) Live() error {
	if n.ctx.Err() != nil {
		return errors.New("shutting down")
	}
	if n.raftSet.Load() && n.raft.State() == raft.Shutdown {
		return errors.New("raft has shut down")
	}
	// One read at a time: while one is stuck, the next probe fails at once
	// instead of piling up goroutines.
	if !n.liveReading.CompareAndSwap(false, true) {
		return errors.New("the state machine has not answered the previous probe's read yet")
	}
	done := make(chan struct{})
	go func() {
		n.fsm.Read(func(fsm.View) {})
		n.liveReading.Store(false)
		close(done)
	}()
	t := time.NewTimer(liveTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("the state machine has not answered a read in %v", liveTimeout)
	}
}
