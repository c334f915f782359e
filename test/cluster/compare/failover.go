package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"
)

// The failover figures (issue 40), against ZooKeeper: the same load on
// both sides, go-zookeeper clients (coordd through its ZooKeeper
// protocol), and the same fault at the same moment.
//
// A run: --failover-clients writers (setData on a key of their own) and as
// many readers (getData of a random key), client i first connected to
// server i mod 3 and able to move to the others (as a ZooKeeper client
// with the whole connection string does; hostOrder), every one with a
// watch on one node; after a third of --failover-duration, the fault:
//
//   - leader-kill: the leader gets SIGKILL.
//   - leader-term: the leader gets SIGTERM (a rolling restart's step).
//   - follower-kill: a follower gets SIGKILL.
//   - rolling: each server in turn, followers first, gets SIGTERM, is
//     started again and waited for until it serves and has caught up, and
//     3 s later the next; the run ends 5 s after the last is back.
//
// At the end the watched node is changed, and every client's watch must
// fire (its session and watches survived, wherever it went). The servers
// stopped are started again, as they were, before the next run. The
// figures, for the clients of the servers that stayed up and for all:
// failed operations, connections lost, the longest stall (the longest time
// a client went without a successful operation, over the gaps that
// overlap the fault and what follows), how long until the throughput was
// back to 90% of the 5 s before (recovery, in failover_stats.go), sessions
// expired and watches lost; and for follower-kill the p99 latency of the
// other servers' clients in the 5 s before and after, and how long the
// killed server's clients took to be served elsewhere.

// failoverScenarios are the faults, in the order they run.
var failoverScenarios = []string{"leader-kill", "leader-term", "rolling", "follower-kill"}

// stallSpan is how long after a fault a stall must begin, or go on, to be
// the fault's.
const stallSpan = 2 * time.Second

// failoverTimeout is the session timeout every client asks for.
const failoverTimeout = 10 * time.Second

// failoverRoot is where the runs' nodes live.
const failoverRoot = "/compare-failover"

// parseFailover parses --failover: a comma-separated list of scenarios,
// "all" for every one, "" for none.
func parseFailover(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if s == "all" {
		return failoverScenarios, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(failoverScenarios, f) {
			return nil, fmt.Errorf("unknown failover scenario %q (want %s or all)", f, strings.Join(failoverScenarios, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// step is one fault of a run: when it struck, and which server.
type step struct {
	at     time.Duration
	server int
	leader bool   // the server led when it struck
	on     []bool // by client: the client was connected to the server
	back   time.Duration
}

// failoverRun is the record of one run.
type failoverRun struct {
	scenario string
	side     string
	clients  []*clientRec
	steps    []step
	end      time.Duration
}

// failoverFigures are a run's figures, for the clients of the servers that
// stayed up ("stayed": not connected to the server struck when it was) and
// for all.
type failoverFigures struct {
	FailedStayed, FailedAll int
	LostStayed, LostAll     int // clients that lost their connection (once or more)
	StallStayed, StallAll   time.Duration
	Recovery                time.Duration // -1: not within the run
	Expired, WatchesLost    int
	// follower-kill only.
	QuietP99, AfterP99 time.Duration // the other servers' clients
	MovedBack          time.Duration // the killed server's clients: the slowest to be served again (-1: one never was)
}

// figures computes a run's figures; a rolling run's are the worst of its
// steps, each step's window lasting until the next step.
func (r *failoverRun) figures() failoverFigures {
	f := failoverFigures{Recovery: 0}
	for k, s := range r.steps {
		w := window{s.at, r.end}
		if k+1 < len(r.steps) {
			w.to = r.steps[k+1].at
		}
		// The stalls the fault caused: the gaps that overlap its first
		// seconds (until the server is back and a second more, in a
		// rolling restart), not a loaded machine's hiccup later on.
		sw := window{s.at, min(w.to, max(s.at+stallSpan, s.back+time.Second))}
		var stayed []*clientRec
		for i, c := range r.clients {
			lost, failed, stall := 0, c.failedIn(w), c.longestStall(sw, r.end)
			if c.lossesIn(w) > 0 {
				lost = 1
			}
			f.FailedAll += failed
			f.LostAll += lost
			f.StallAll = max(f.StallAll, stall)
			if !s.on[i] {
				stayed = append(stayed, c)
				f.FailedStayed += failed
				f.LostStayed += lost
				f.StallStayed = max(f.StallStayed, stall)
			}
		}
		rec := recovery(r.clients, s.at, w.to-s.at-rateWindow)
		if rec < 0 || f.Recovery < 0 {
			f.Recovery = -1
		} else {
			f.Recovery = max(f.Recovery, rec)
		}
		if r.scenario == "follower-kill" {
			var quiet, after []time.Duration
			for _, c := range stayed {
				quiet = append(quiet, c.latencies(window{s.at - baseline, s.at})...)
				after = append(after, c.latencies(window{s.at, s.at + baseline})...)
			}
			f.QuietP99, f.AfterP99 = durPercentile(quiet, 0.99), durPercentile(after, 0.99)
			for i, c := range r.clients {
				if !s.on[i] {
					continue
				}
				b := c.backAfter(s.at)
				if b < 0 || f.MovedBack < 0 {
					f.MovedBack = -1
				} else {
					f.MovedBack = max(f.MovedBack, b)
				}
			}
		}
	}
	for _, c := range r.clients {
		if c.expired {
			f.Expired++
		}
		if !c.watched {
			f.WatchesLost++
		}
	}
	return f
}

// failoverSide is one system under the fault: its client addresses and
// its servers' processes, which the runs stop and start again.
type failoverSide struct {
	name    string
	servers []string
	u       *usageFigures
	side    int // index into u.pids
}

// runFailover runs every scenario on both sides, rounds times, alternating
// the side that goes first, and prints the table.
func runFailover(c config, u *usageFigures, names [2]string, scenarios []string) error {
	if len(u.pids[0]) != len(u.addrs[0]) || len(u.pids[1]) != len(u.addrs[1]) {
		return errors.New("failover: needs every server's process id (--other-pids, --coordd-pids)")
	}
	sides := [2]failoverSide{
		{name: names[0], servers: u.addrs[0], u: u, side: 0},
		{name: names[1], servers: u.addrs[1], u: u, side: 1},
	}
	runs := map[string][2][]failoverFigures{}
	for r := 1; r <= c.failoverRounds; r++ {
		for _, sc := range scenarios {
			for k := range 2 {
				sd := sides[(k+r-1)%2]
				run, err := sd.run(c, sc)
				if err != nil {
					return fmt.Errorf("failover %s, round %d, %s: %w", sc, r, sd.name, err)
				}
				f := run.figures()
				fmt.Fprintf(os.Stderr, "round %d  %-10s %-14s failed %d/%d, lost %d/%d, stall %.2f/%.2fs, back to 90%% after %s\n",
					r, sd.name, sc, f.FailedStayed, f.FailedAll, f.LostStayed, f.LostAll,
					f.StallStayed.Seconds(), f.StallAll.Seconds(), secs(f.Recovery))
				if c.failoverTrace {
					for _, st := range run.steps {
						w := window{st.at - 2*time.Second, min(run.end, st.at+8*time.Second)}
						var worst *clientRec
						var stall time.Duration
						for _, cl := range run.clients {
							if d := cl.longestStall(window{st.at, st.at + stallSpan}, run.end); d > stall {
								worst, stall = cl, d
							}
						}
						fmt.Fprintf(os.Stderr, "  %s: server %d (leader %v) at %.2fs; longest stall %.2fs from %.2fs (a client of server %d); ops per 250 ms from 2 s before:\n   %v\n",
							sd.name, st.server, st.leader, st.at.Seconds(), stall.Seconds(), worst.stallAt(window{st.at, st.at + stallSpan}, run.end).Seconds(), worst.home,
							rates(run.clients, w, 250*time.Millisecond))
					}
				}
				all := runs[sc]
				all[sd.side] = append(all[sd.side], f)
				runs[sc] = all
			}
		}
	}
	printFailover(c, names, scenarios, runs)
	return nil
}

func secs(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// printFailover prints the medians over the rounds of every figure.
func printFailover(c config, names [2]string, scenarios []string, runs map[string][2][]failoverFigures) {
	fmt.Printf("\nfailover: 3 servers, %d writers + %d readers spread over them (go-zookeeper, session timeout %v), the fault after %v of %v;\n",
		c.failoverClients, c.failoverClients, failoverTimeout, c.failoverDuration/3, c.failoverDuration)
	fmt.Printf("median of %d round(s); a/b: the clients of the servers that stayed up / all clients; a stall: the longest time a client went without a successful operation\n\n", c.failoverRounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "scenario\tmeasure\t%s\t%s\t\n", names[0], names[1])
	med := func(fs []failoverFigures, get func(failoverFigures) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	type row struct {
		name   string
		format func(fs []failoverFigures) string
	}
	count := func(a, b func(failoverFigures) int) func([]failoverFigures) string {
		return func(fs []failoverFigures) string {
			return fmt.Sprintf("%.0f/%.0f", med(fs, func(f failoverFigures) float64 { return float64(a(f)) }),
				med(fs, func(f failoverFigures) float64 { return float64(b(f)) }))
		}
	}
	one := func(get func(failoverFigures) int) func([]failoverFigures) string {
		return func(fs []failoverFigures) string {
			return fmt.Sprintf("%.0f", med(fs, func(f failoverFigures) float64 { return float64(get(f)) }))
		}
	}
	dur := func(get func(failoverFigures) time.Duration) func([]failoverFigures) string {
		return func(fs []failoverFigures) string {
			v := med(fs, func(f failoverFigures) float64 {
				if d := get(f); d >= 0 {
					return d.Seconds()
				}
				return 1e9
			})
			if v >= 1e9 {
				return "never"
			}
			return fmt.Sprintf("%.2f", v)
		}
	}
	for _, sc := range scenarios {
		rows := []row{
			{"failed operations", count(func(f failoverFigures) int { return f.FailedStayed }, func(f failoverFigures) int { return f.FailedAll })},
			{"clients that lost their connection", count(func(f failoverFigures) int { return f.LostStayed }, func(f failoverFigures) int { return f.LostAll })},
			{"longest stall (s)", func(fs []failoverFigures) string {
				return dur(func(f failoverFigures) time.Duration { return f.StallStayed })(fs) + "/" + dur(func(f failoverFigures) time.Duration { return f.StallAll })(fs)
			}},
			{"back to 90% throughput (s)", dur(func(f failoverFigures) time.Duration { return f.Recovery })},
			{"sessions expired (all clients)", one(func(f failoverFigures) int { return f.Expired })},
			{"watches lost (all clients)", one(func(f failoverFigures) int { return f.WatchesLost })},
		}
		if sc == "follower-kill" {
			rows = append(rows,
				row{"p99 of the others' clients, ms (before/after)", func(fs []failoverFigures) string {
					return fmt.Sprintf("%.1f/%.1f", med(fs, func(f failoverFigures) float64 { return ms(f.QuietP99) }),
						med(fs, func(f failoverFigures) float64 { return ms(f.AfterP99) }))
				}},
				row{"killed server's clients served again (s)", dur(func(f failoverFigures) time.Duration { return f.MovedBack })})
		}
		for i, r := range rows {
			name := ""
			if i == 0 {
				name = sc
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, r.name, r.format(runs[sc][0]), r.format(runs[sc][1]))
		}
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// hostOrder is the order in which client i tries servers: its own, server
// i mod len(servers), first, then the others, every other client's in the
// opposite direction. So the clients of a server that goes away split
// evenly over the others, as ZooKeeper clients' shuffled connection
// strings do, and the clients of a rolling restart's last server are not
// all its clients by then.
func hostOrder(servers []string, i int) []string {
	m := len(servers)
	home := i % m
	order := []string{servers[home]}
	for k := 1; k < m; k++ {
		step := k
		if (i/m)%2 == 1 {
			step = m - k
		}
		order = append(order, servers[(home+step)%m])
	}
	return order
}

// orderedHosts is go-zookeeper's HostProvider for a client that connects to
// its own server first and moves to the next ones, in order, when that
// one goes away, as a client given the whole connection string does (but
// without shuffling it, so that the load stays spread as it was).
// go-zookeeper shuffles the servers it passes to Init, so the order is
// the one given here, servers.
type orderedHosts struct {
	mu      sync.Mutex
	servers []string
	next    int
	tried   int
}

// Init keeps the order of h.servers (those given are the same, shuffled).
func (h *orderedHosts) Init([]string) error { return nil }

func (h *orderedHosts) Len() int { return len(h.servers) }

func (h *orderedHosts) Next() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.servers[h.next]
	h.next = (h.next + 1) % len(h.servers)
	h.tried++
	retry := h.tried > len(h.servers)
	if retry {
		h.tried = 1
	}
	return s, retry
}

func (h *orderedHosts) Connected() {
	h.mu.Lock()
	h.tried = 0
	h.mu.Unlock()
}

// failoverClient is one client of a run.
type failoverClient struct {
	rec   clientRec
	conn  *zk.Conn
	watch <-chan zk.Event
	mu    sync.Mutex // guards rec.losses and rec.expired, which the event loop writes
}

// run runs one scenario on this side.
func (sd failoverSide) run(c config, scenario string) (*failoverRun, error) {
	if err := sd.awaitServing(2 * time.Minute); err != nil {
		return nil, err
	}
	// The admin session may move too: the fault may take its server.
	admin, err := connectAny(sd.servers)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	n := c.failoverClients
	value := make([]byte, c.valueSize)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/k%03d", failoverRoot, i)
		if err := ensure(admin, keys[i]); err != nil {
			return nil, err
		}
	}
	watched := failoverRoot + "/watched"
	if err := ensure(admin, watched); err != nil {
		return nil, err
	}
	// The clients, each with its session and its watch. Their event loops
	// record connections lost and sessions expired between the start of
	// the load (t0) and the end of the run (tEnd).
	clients := make([]*failoverClient, 2*n)
	var t0ns, tEndNs atomic.Int64
	tEndNs.Store(math.MaxInt64)
	var started, ended sync.WaitGroup
	closeAll := func() {
		for _, fc := range clients {
			if fc != nil && fc.conn != nil {
				fc.conn.Close()
			}
		}
	}
	defer closeAll()
	for i := range clients {
		home := i % len(sd.servers)
		order := hostOrder(sd.servers, i)
		fc := &failoverClient{rec: clientRec{home: home, writer: i < n}}
		conn, events, err := zk.Connect(order, failoverTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false), zk.WithHostProvider(&orderedHosts{servers: order}))
		if err != nil {
			return nil, err
		}
		fc.conn = conn
		clients[i] = fc
		has := make(chan struct{})
		go func() {
			once := sync.OnceFunc(func() { close(has) })
			for e := range events {
				if e.State == zk.StateHasSession {
					once()
				}
				start := t0ns.Load()
				if start == 0 {
					continue
				}
				at := time.Duration(time.Now().UnixNano() - start)
				if at >= time.Duration(tEndNs.Load()) {
					continue
				}
				fc.mu.Lock()
				switch e.State {
				case zk.StateDisconnected:
					fc.rec.losses = append(fc.rec.losses, at)
				case zk.StateExpired:
					fc.rec.expired = true
				}
				fc.mu.Unlock()
			}
		}()
		select {
		case <-has:
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("client %d: no session on %s within 10s", i, order[0])
		}
		_, _, fc.watch, err = conn.ExistsW(watched)
		if err != nil {
			return nil, fmt.Errorf("client %d: exists %s: %w", i, watched, err)
		}
	}
	// The load.
	stop := make(chan struct{})
	t0 := time.Now()
	t0ns.Store(t0.UnixNano())
	for i, fc := range clients {
		started.Add(1)
		ended.Add(1)
		go func() {
			defer ended.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(t0.UnixNano())))
			started.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := time.Since(t0)
				var err error
				if fc.rec.writer {
					_, err = fc.conn.Set(keys[i], value, -1)
				} else {
					_, _, err = fc.conn.Get(keys[rng.IntN(len(keys))])
				}
				fc.rec.ops = append(fc.rec.ops, opRec{start: s, end: time.Since(t0), ok: err == nil})
				if errors.Is(err, zk.ErrSessionExpired) {
					return // the session is gone for good
				}
				if err != nil {
					// As a client's retry would, not at once.
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	started.Wait()
	run := &failoverRun{scenario: scenario, side: sd.name}
	stopped := map[int]*procSpec{}
	defer func() {
		// Start every server stopped again, as it was.
		for i, spec := range stopped {
			if pid, err := sd.u.start(spec); err == nil {
				sd.u.pids[sd.side][i] = pid
			}
		}
	}()
	time.Sleep(time.Until(t0.Add(c.failoverDuration / 3)))
	lead, _, err := leaderIndex(sd.servers)
	if err != nil {
		close(stop)
		return nil, err
	}
	strike := func(i int, sig syscall.Signal) error {
		st := step{at: time.Since(t0), server: i, leader: i == lead, on: make([]bool, len(clients))}
		for k, fc := range clients {
			st.on[k] = fc.conn.Server() == sd.servers[i]
		}
		spec, err := signalProc(sd.u.pids[sd.side][i], sig)
		if err != nil {
			return err
		}
		stopped[i] = spec
		run.steps = append(run.steps, st)
		return nil
	}
	end := t0.Add(c.failoverDuration)
	switch scenario {
	case "leader-kill":
		err = strike(lead, syscall.SIGKILL)
	case "leader-term":
		err = strike(lead, syscall.SIGTERM)
	case "follower-kill":
		err = strike((lead+1)%len(sd.servers), syscall.SIGKILL)
	case "rolling":
		var order []int
		for i := range sd.servers {
			if i != lead {
				order = append(order, i)
			}
		}
		order = append(order, lead)
		for k, i := range order {
			if k > 0 {
				time.Sleep(3 * time.Second)
				if lead, _, err = leaderIndex(sd.servers); err != nil {
					break
				}
			}
			if err = strike(i, syscall.SIGTERM); err != nil {
				break
			}
			pid, serr := sd.u.start(stopped[i])
			if serr != nil {
				err = serr
				break
			}
			delete(stopped, i)
			sd.u.pids[sd.side][i] = pid
			if err = sd.awaitServing(time.Minute); err != nil {
				break
			}
			run.steps[len(run.steps)-1].back = time.Since(t0)
		}
		end = later(end, time.Now().Add(5*time.Second))
	}
	if err != nil {
		close(stop)
		ended.Wait()
		return nil, err
	}
	time.Sleep(time.Until(end))
	run.end = time.Since(t0)
	tEndNs.Store(int64(run.end))
	close(stop)
	ended.Wait()
	// Every watch must fire, wherever its client went.
	if _, err := admin.Set(watched, value, -1); err != nil {
		return nil, fmt.Errorf("set %s: %w", watched, err)
	}
	deadline := time.After(10 * time.Second)
	for _, fc := range clients {
		select {
		case e := <-fc.watch:
			fc.rec.watched = e.Type == zk.EventNodeDataChanged
		case <-deadline:
		}
	}
	for _, fc := range clients {
		fc.mu.Lock()
		rec := fc.rec
		fc.mu.Unlock()
		run.clients = append(run.clients, &rec)
	}
	return run, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// awaitServing waits until every server answers srvr as leader or
// follower and has applied what the leader had.
func (sd failoverSide) awaitServing(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		n := 0
		for _, a := range sd.servers {
			if mode, _, err := srvr(a); err == nil && (mode == "leader" || mode == "follower") {
				n++
			}
		}
		if n == len(sd.servers) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d servers serve after %v", n, len(sd.servers), d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A write, so that the servers' last zxid is one of this epoch's (a
	// ZooKeeper follower reports its last transaction's, the leader its
	// epoch's start), and then every server must have applied it.
	admin, err := connectAny(sd.servers)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := ensure(admin, failoverRoot); err != nil {
		return err
	}
	if _, err := admin.Set(failoverRoot, []byte(time.Now().String()), -1); err != nil {
		return fmt.Errorf("set %s: %w", failoverRoot, err)
	}
	return waitApplied(sd.servers, time.Until(deadline))
}

// connectAny opens a session on any of servers, which moves to another
// when its server goes away.
func connectAny(servers []string) (*zk.Conn, error) {
	conn, events, err := zk.Connect(servers, failoverTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-events:
			if e.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn, nil
			}
		case <-deadline:
			conn.Close()
			return nil, errors.New("no session within 10s")
		}
	}
}
