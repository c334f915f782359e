package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"
)

// compare scale: the scale figures of issue 41, for one system at a time
// (scripts/scale.sh, make scale, runs it against ZooKeeper 3.8 and coordd
// in turn, each as three real server processes with their data on disk,
// and compare scale-table prints both side by side).
//
// Every figure is taken with go-zookeeper, or for many sessions and
// watches with the minimal session of zkraw.go, on both systems alike, and
// in this order (a size of 0 skips its figure):
//
//  1. memory: every server's resident memory idle, after --znodes znodes
//     of 100 bytes below 100 parents (multis of 100 creates, 16 sessions),
//     and after --children more below one parent; ZooKeeper's live heap
//     after a full collection too (jcmd GC.run, GC.heap_info);
//  2. the big parent: its getChildren (time, bytes, outcome) on a
//     follower while 8 other sessions on that server read and write (their
//     worst latency during it against their p99 before), then the create of
//     one more child;
//  3. snapshots: --write-clients sessions setData on random znodes for
//     --write-time; each write's latency is classed by whether some server
//     was writing a snapshot when it began (the data dirs are watched:
//     coordd's snapshots/*.tmp, ZooKeeper's growing version-2/snapshot.*),
//     with the snapshots' durations and sizes, leader changes (srvr, every
//     250 ms) and expired sessions;
//  4. a follower restarted (SIGTERM, the same command line): until it
//     serves a read, until its srvr reports the leader's zxid;
//  5. a follower stopped while --catchup-writes writes went by, restarted;
//  6. a follower whose data was wiped (coordd: its whole data dir;
//     ZooKeeper: version-2, keeping myid), restarted, while 16 sessions
//     write on the others;
//  7. watches: --watches one-shot getData watches and --recursive
//     persistent recursive ones, on distinct znodes, held by 64 sessions:
//     memory per watch, and setData throughput before and with them;
//  8. sessions: --sessions sessions, each pinging every third of its 30 s
//     timeout, held for --hold: memory per session, the leader's CPU, and
//     how many expired.
//
// A figure that finds a leader change, an expired session or a failed
// request among what must not fail says so, and the command exits 1 after
// writing its results: that is what make scale's short run in CI checks.

// scaleConfig is one system's run.
type scaleConfig struct {
	system        string // its name in the table
	servers       []string
	pids          []int
	dataDirs      []string
	znodes        int
	children      int
	catchupWrites int
	watches       int
	recursive     int
	sessions      int
	grpcSessions  int
	coordctl      string
	writeClients  int
	writeTime     time.Duration
	hold          time.Duration
	settle        time.Duration
	sourceIPs     []string
	figures       []string
	out           string
	pidFile       string
}

// scaleResult is what one run measured; every size and figure is in the
// units its name says. It is written as JSON for scale-table.
type scaleResult struct {
	System  string `json:"system"`
	Znodes  int    `json:"znodes"`
	Started string `json:"started"`
	Load    string `json:"load_avg"` // /proc/loadavg when the run began

	IdleRSSMB         []float64 `json:"idle_rss_mb"`
	IdleAnonMB        []float64 `json:"idle_anon_mb"`
	IdleHeapMB        []float64 `json:"idle_heap_mb,omitempty"`
	LoadedRSSMB       []float64 `json:"loaded_rss_mb"`
	LoadedAnonMB      []float64 `json:"loaded_anon_mb"`
	LoadedHeapMB      []float64 `json:"loaded_heap_mb,omitempty"`
	LoadS             float64   `json:"load_s"`
	BeyondDataRSS     float64   `json:"beyond_data_rss_b"`
	BeyondDataAnon    float64   `json:"beyond_data_anon_b"`
	BeyondDataHeap    float64   `json:"beyond_data_heap_b,omitempty"`
	Children          int       `json:"children"`
	ChildrenRSSMB     []float64 `json:"children_rss_mb"`
	ChildrenAnonMB    []float64 `json:"children_anon_mb"`
	ChildBeyondRSS    float64   `json:"child_beyond_data_rss_b"`
	ChildBeyondAnon   float64   `json:"child_beyond_data_anon_b"`
	ChildBeyondHeap   float64   `json:"child_beyond_data_heap_b,omitempty"`
	GetChildrenMS     float64   `json:"get_children_ms"`
	GetChildrenMB     float64   `json:"get_children_mb"`
	GetChildrenResult string    `json:"get_children_result"`
	OthersQuietP99MS  float64   `json:"others_quiet_p99_ms"`
	OthersMaxMS       float64   `json:"others_max_during_ms"`
	CreateChildMS     float64   `json:"create_child_ms"`

	Writes           writeFigures `json:"writes"`
	Snapshots        []snapFigure `json:"snapshots"`
	RestartServingS  float64      `json:"restart_serving_s"`
	RestartCaughtUpS float64      `json:"restart_caught_up_s"`
	CatchupWrites    int          `json:"catchup_writes"`
	CatchupServingS  float64      `json:"catchup_serving_s"`
	CatchupS         float64      `json:"catchup_s"`
	WipedServingS    float64      `json:"wiped_serving_s"`
	WipedCaughtUpS   float64      `json:"wiped_caught_up_s"`
	WipedWrites      writeFigures `json:"wiped_writes"`

	Watches          int     `json:"watches"`
	Recursive        int     `json:"recursive"`
	WatchRegisterS   float64 `json:"watch_register_s"`
	BytesPerWatch    float64 `json:"bytes_per_watch_anon"`
	HeapPerWatch     float64 `json:"bytes_per_watch_heap,omitempty"`
	WritesNoWatches  float64 `json:"writes_without_watches_per_s"`
	WritesAndWatches float64 `json:"writes_with_watches_per_s"`
	Notifications    int64   `json:"notifications"`

	Sessions            int     `json:"sessions"`
	SessionsOpenS       float64 `json:"sessions_open_s"`
	BytesPerSession     float64 `json:"bytes_per_session_rss"`
	HeapPerSession      float64 `json:"bytes_per_session_heap,omitempty"`
	LeaderCores         float64 `json:"leader_cores"`
	SessionsExpired     int     `json:"sessions_expired"`
	SessionsHeldS       float64 `json:"sessions_held_s"`
	GRPCSessions        int     `json:"grpc_sessions,omitempty"`
	GRPCSessionsLost    int     `json:"grpc_sessions_lost,omitempty"`
	GRPCBytesPerSession float64 `json:"grpc_bytes_per_session,omitempty"`
	GRPCLeaderCores     float64 `json:"grpc_leader_cores,omitempty"`
	// MachineWorstLateMS is how late, at worst, a process that only
	// sleeps 10 ms at a time woke up during the run, and MachineLate500
	// how often it was more than 500 ms late: what the machine's load
	// alone does to every process (a Raft follower hears nothing for as
	// long).
	MachineWorstLateMS float64  `json:"machine_worst_late_ms"`
	MachineLate500     int      `json:"machine_late_500ms"`
	LeaderChanges      int      `json:"leader_changes"`
	ExpiredSessions    int64    `json:"expired_sessions"`
	FailedOperations   []string `json:"failed,omitempty"`
}

// writeFigures is a write workload's outcome.
type writeFigures struct {
	Ops        int     `json:"ops"`
	OpsPerS    float64 `json:"ops_per_s"`
	Errors     int64   `json:"errors"`
	P99MS      float64 `json:"p99_ms"`
	QuietN     int     `json:"quiet_n,omitempty"`
	QuietP99MS float64 `json:"quiet_p99_ms,omitempty"`
	SnapN      int     `json:"snap_n,omitempty"`
	SnapP99MS  float64 `json:"snap_p99_ms,omitempty"`
	MaxMS      float64 `json:"max_ms"`
}

// snapFigure is one snapshot a server wrote.
type snapFigure struct {
	Server string  `json:"server"`
	S      float64 `json:"s"`
	MB     float64 `json:"mb"`
}

const scaleRoot = "/scale"

func flatPath(k int) string { return fmt.Sprintf("%s/d%03d/n%08d", scaleRoot, k%100, k) }

func childPath(k int) string { return fmt.Sprintf("%s/big/c%08d", scaleRoot, k) }

func scaleMain(args []string) error {
	fs := flag.NewFlagSet("compare scale", flag.ExitOnError)
	var c scaleConfig
	fs.StringVar(&c.system, "system", "", "the system's name in the table (ZooKeeper, coordd)")
	servers := fs.String("servers", "", "the servers' client addresses")
	pids := fs.String("pids", "", "their process ids, in the same order")
	dirs := fs.String("data-dirs", "", "their data directories, in the same order")
	fs.IntVar(&c.znodes, "znodes", 1_000_000, "znodes of 100 bytes below 100 parents")
	fs.IntVar(&c.children, "children", 1_000_000, "znodes of 100 bytes below one parent")
	fs.IntVar(&c.catchupWrites, "catchup-writes", 1_000_000, "writes a stopped follower misses")
	fs.IntVar(&c.watches, "watches", 1_000_000, "one-shot watches")
	fs.IntVar(&c.recursive, "recursive", 100_000, "persistent recursive watches")
	fs.IntVar(&c.sessions, "sessions", 50_000, "ZooKeeper-protocol sessions held, a connection each")
	fs.IntVar(&c.grpcSessions, "grpc-sessions", 0, "coordd only: Go-client sessions held over shared connections (coordctl bench session-hold)")
	fs.StringVar(&c.coordctl, "coordctl", "", "the coordctl binary, for --grpc-sessions")
	fs.IntVar(&c.writeClients, "write-clients", 64, "sessions of the write workload under snapshots")
	fs.DurationVar(&c.writeTime, "write-time", time.Minute, "how long the write workload under snapshots runs")
	fs.DurationVar(&c.hold, "hold", time.Minute, "how long the sessions are held")
	fs.DurationVar(&c.settle, "settle", 15*time.Second, "rest before a memory reading (coordd returns free heap after 5 s idle)")
	figs := fs.String("figures", strings.Join(scaleFigures, ","), "the figures taken after the load (memory is always)")
	ips := fs.String("source-ips", "127.0.0.1", "local addresses the many sessions are opened from (a source address has ~28 000 ports)")
	fs.StringVar(&c.out, "out", "", "where to write the results (JSON)")
	fs.StringVar(&c.pidFile, "pid-file", "", "file to which the process id of every server this tool restarts is appended")
	_ = fs.Parse(args)
	c.servers = strings.Split(*servers, ",")
	c.sourceIPs = strings.Split(*ips, ",")
	c.figures = strings.FieldsFunc(*figs, func(r rune) bool { return r == ',' })
	for _, f := range c.figures {
		if !slices.Contains(scaleFigures, f) {
			return fmt.Errorf("scale: unknown figure %q (%s)", f, strings.Join(scaleFigures, ", "))
		}
	}
	var err error
	if c.pids, err = parsePids(*pids); err != nil {
		return err
	}
	c.dataDirs = strings.Split(*dirs, ",")
	if c.system == "" || c.out == "" || len(c.servers) < 3 || len(c.pids) != len(c.servers) || len(c.dataDirs) != len(c.servers) {
		return errors.New("scale: needs --system, --out, and --servers, --pids and --data-dirs of at least 3 servers each")
	}
	if c.children > 99_999_999 || c.znodes > 99_999_999 {
		return errors.New("scale: at most 99 999 999 znodes of each kind")
	}
	s := &scaler{c: c, procs: &usageFigures{c: config{pidFile: c.pidFile}}}
	defer s.procs.stopRestarted()
	s.r.System, s.r.Znodes, s.r.Started = c.system, c.znodes, time.Now().Format(time.RFC3339)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		s.r.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	s.watchLeader()
	stalls, err := startStallMonitor()
	if err != nil {
		return err
	}
	runErr := s.run()
	s.stopLeaderWatch()
	s.r.MachineWorstLateMS, s.r.MachineLate500 = stalls()
	s.r.LeaderChanges = int(s.leaderChanges.Load())
	s.r.ExpiredSessions = s.expired.Load()
	b, _ := json.MarshalIndent(&s.r, "", "  ")
	if err := os.WriteFile(c.out, b, 0o644); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	var bad []string
	if s.r.LeaderChanges > 0 {
		bad = append(bad, fmt.Sprintf("%d leader changes", s.r.LeaderChanges))
	}
	if s.r.ExpiredSessions > 0 || s.r.SessionsExpired > 0 {
		bad = append(bad, fmt.Sprintf("%d expired sessions", s.r.ExpiredSessions+int64(s.r.SessionsExpired)))
	}
	bad = append(bad, s.r.FailedOperations...)
	if len(bad) > 0 {
		return fmt.Errorf("scale: %s: %s", c.system, strings.Join(bad, "; "))
	}
	return nil
}

// scaler runs one system's figures.
type scaler struct {
	c     scaleConfig
	r     scaleResult
	procs *usageFigures // restarts servers

	mu            sync.Mutex
	stopped       map[int]bool // servers stopped on purpose
	leader        int
	leaderChanges atomic.Int64
	expired       atomic.Int64
	stopWatch     chan struct{}
	watchDone     chan struct{}
}

func (s *scaler) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %-9s "+format+"\n", append([]any{time.Now().Format("15:04:05"), s.c.system}, args...)...)
}

func (s *scaler) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.logf("FAILED: %s", msg)
	s.r.FailedOperations = append(s.r.FailedOperations, msg)
}

// scaleFigures are the figures after the load, in the order they run.
var scaleFigures = []string{"children", "snapshots", "restarts", "watches", "sessions"}

func (s *scaler) run() error {
	idle := s.memory()
	s.r.IdleRSSMB, s.r.IdleAnonMB, s.r.IdleHeapMB = idle.rss, idle.anon, idle.heap
	if err := s.load(); err != nil {
		return err
	}
	steps := map[string]func() error{
		"children": s.bigParent, "snapshots": s.snapshots, "restarts": s.restarts,
		"watches": s.watchFigures, "sessions": s.sessionFigures,
	}
	for _, f := range scaleFigures {
		if !slices.Contains(s.c.figures, f) {
			continue
		}
		if err := steps[f](); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// watchLeader polls every server's srvr every 250 ms and counts changes of
// the server that says it leads (servers stopped on purpose are skipped).
func (s *scaler) watchLeader() {
	s.stopWatch, s.watchDone, s.stopped, s.leader = make(chan struct{}), make(chan struct{}), map[int]bool{}, -1
	go func() {
		defer close(s.watchDone)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stopWatch:
				return
			case <-t.C:
			}
			for i, a := range s.c.servers {
				s.mu.Lock()
				skip := s.stopped[i]
				s.mu.Unlock()
				if skip {
					continue
				}
				if mode, _, err := srvr(a); err == nil && mode == "leader" {
					s.mu.Lock()
					if s.leader >= 0 && s.leader != i {
						s.leaderChanges.Add(1)
						s.logf("leader change: %s leads, %s did", a, s.c.servers[s.leader])
					}
					s.leader = i
					s.mu.Unlock()
				}
			}
		}
	}()
}

func (s *scaler) stopLeaderWatch() {
	close(s.stopWatch)
	<-s.watchDone
}

// session opens a go-zookeeper session on server that counts its expiry.
func (s *scaler) session(server string) (*zk.Conn, error) {
	var once sync.Once
	has := make(chan struct{})
	cb := func(e zk.Event) {
		switch e.State {
		case zk.StateHasSession:
			once.Do(func() { close(has) })
		case zk.StateExpired:
			s.expired.Add(1)
		}
	}
	conn, _, err := zk.Connect([]string{server}, 30*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false), zk.WithEventCallback(cb))
	if err != nil {
		return nil, err
	}
	select {
	case <-has:
		return conn, nil
	case <-time.After(30 * time.Second):
		conn.Close()
		return nil, fmt.Errorf("%s: no session within 30s", server)
	}
}

func (s *scaler) sessionsOn(servers []string, n int) ([]*zk.Conn, error) {
	conns := make([]*zk.Conn, n)
	for i := range conns {
		c, err := s.session(servers[i%len(servers)])
		if err != nil {
			closeConns(conns)
			return nil, err
		}
		conns[i] = c
	}
	return conns, nil
}

// mem is every server's memory at one time, in MB: resident, of it
// anonymous (the heap and stacks: the process's own, where file pages are
// its binary and the files it maps, such as raft-wal's segments), and for
// a JVM its live heap after a full collection (nil when not a JVM).
type mem struct{ rss, anon, heap []float64 }

// memory reads every server's memory after the settle, and then every 5
// s for at most a minute more until the servers' anonymous memory moves by
// less than 1% between two readings: a server busy writing a snapshot when
// the settle ends has not yet handed back what it used.
func (s *scaler) memory() mem {
	time.Sleep(s.c.settle)
	m := s.readMemory()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(5 * time.Second)
		next := s.readMemory()
		if a, b := sumMB(m.anon), sumMB(next.anon); a > 0 && b/a > 0.99 && b/a < 1.01 {
			return next
		}
		m = next
	}
	return m
}

// readMemory reads every server's memory now.
func (s *scaler) readMemory() mem {
	var m mem
	for _, pid := range s.c.pids {
		if h, ok := jvmLiveHeapMB(pid); ok {
			m.heap = append(m.heap, h)
		}
	}
	for _, pid := range s.c.pids {
		r := rssMB(pid)
		m.rss, m.anon = append(m.rss, r[totalRSS]), append(m.anon, r[anonRSS])
	}
	return m
}

var heapUsed = regexp.MustCompile(`total \d+K, used (\d+)K`)

// jvmLiveHeapMB runs a full collection in a JVM (jcmd GC.run) and returns
// the heap it uses then; false when pid is not a JVM jcmd reaches.
func jvmLiveHeapMB(pid int) (float64, bool) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(b)) != "java" {
		return 0, false
	}
	if err := exec.Command("jcmd", strconv.Itoa(pid), "GC.run").Run(); err != nil {
		return 0, false
	}
	out, err := exec.Command("jcmd", strconv.Itoa(pid), "GC.heap_info").Output()
	if err != nil {
		return 0, false
	}
	m := heapUsed.FindSubmatch(out)
	if m == nil {
		return 0, false
	}
	kb, _ := strconv.ParseFloat(string(m[1]), 64)
	return kb / 1024, true
}

// beyondData is the memory per znode beyond its 100 bytes of data: the
// mean growth over the servers, in bytes, divided by n.
func beyondData(before, after []float64, n int) float64 {
	if n == 0 || len(before) == 0 || len(before) != len(after) {
		return 0
	}
	var sum float64
	for i := range before {
		sum += after[i] - before[i]
	}
	return sum/float64(len(before))*(1<<20)/float64(n) - 100
}

// startStallMonitor starts a child process (compare scale-stallmon) that
// sleeps 10 ms at a time on one processor and notes how late it wakes up;
// the function it returns stops it and says how late it woke at worst
// (ms) and how many times by more than 500 ms.
func startStallMonitor() (func() (float64, int), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "scale-stallmon")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() (float64, int) {
		in.Close()
		_ = cmd.Wait()
		var worst float64
		var late int
		fmt.Sscanf(out.String(), "%f %d", &worst, &late)
		return worst, late
	}, nil
}

// stallMonMain is compare scale-stallmon: it sleeps 10 ms at a time until
// stdin ends, then prints how late it woke at worst (ms) and how many
// times it was more than 500 ms late.
func stallMonMain() error {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	var worst time.Duration
	late := 0
	for {
		select {
		case <-done:
			fmt.Printf("%.1f %d\n", float64(worst.Microseconds())/1000, late)
			return nil
		default:
		}
		t := time.Now()
		time.Sleep(10 * time.Millisecond)
		d := time.Since(t) - 10*time.Millisecond
		worst = max(worst, d)
		if d > 500*time.Millisecond {
			late++
		}
	}
}
