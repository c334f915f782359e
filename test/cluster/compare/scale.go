package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

	Sessions            int      `json:"sessions"`
	SessionsOpenS       float64  `json:"sessions_open_s"`
	BytesPerSession     float64  `json:"bytes_per_session_rss"`
	HeapPerSession      float64  `json:"bytes_per_session_heap,omitempty"`
	LeaderCores         float64  `json:"leader_cores"`
	SessionsExpired     int      `json:"sessions_expired"`
	SessionsHeldS       float64  `json:"sessions_held_s"`
	GRPCSessions        int      `json:"grpc_sessions,omitempty"`
	GRPCSessionsLost    int      `json:"grpc_sessions_lost,omitempty"`
	GRPCBytesPerSession float64  `json:"grpc_bytes_per_session,omitempty"`
	GRPCLeaderCores     float64  `json:"grpc_leader_cores,omitempty"`
	LeaderChanges       int      `json:"leader_changes"`
	ExpiredSessions     int64    `json:"expired_sessions"`
	FailedOperations    []string `json:"failed,omitempty"`
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

func flatPath(k int) string  { return fmt.Sprintf("%s/d%03d/n%08d", scaleRoot, k%100, k) }
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
	runErr := s.run()
	s.stopLeaderWatch()
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

// memory reads every server's memory after the settle.
func (s *scaler) memory() mem {
	time.Sleep(s.c.settle)
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

// loadMulti creates n znodes of 100 bytes at path(k), in multis of 100
// from 16 sessions.
func (s *scaler) loadMulti(n int, path func(int) string) error {
	conns, err := s.sessionsOn(s.c.servers, 16)
	if err != nil {
		return err
	}
	defer closeConns(conns)
	value := bytes.Repeat([]byte("v"), 100)
	const batch = 100
	return parallel((n+batch-1)/batch, len(conns), func(w, b int) error {
		ops := make([]any, 0, batch)
		for k := b * batch; k < min(n, (b+1)*batch); k++ {
			ops = append(ops, &zk.CreateRequest{Path: path(k), Data: value, Acl: acl})
		}
		_, err := conns[w].Multi(ops...)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil // an earlier run's
		}
		return err
	})
}

func (s *scaler) load() error {
	admin, err := s.session(s.c.servers[0])
	if err != nil {
		return err
	}
	defer admin.Close()
	for d := range 100 {
		if err := ensure(admin, fmt.Sprintf("%s/d%03d", scaleRoot, d)); err != nil {
			return err
		}
	}
	if err := ensure(admin, scaleRoot+"/big"); err != nil {
		return err
	}
	if s.c.znodes > 0 {
		start := time.Now()
		if err := s.loadMulti(s.c.znodes, flatPath); err != nil {
			return fmt.Errorf("loading %d znodes: %w", s.c.znodes, err)
		}
		if err := waitApplied(s.c.servers, 10*time.Minute); err != nil {
			return err
		}
		s.r.LoadS = time.Since(start).Seconds()
		m := s.memory()
		s.r.LoadedRSSMB, s.r.LoadedAnonMB, s.r.LoadedHeapMB = m.rss, m.anon, m.heap
		s.r.BeyondDataRSS = beyondData(s.r.IdleRSSMB, s.r.LoadedRSSMB, s.c.znodes)
		s.r.BeyondDataAnon = beyondData(s.r.IdleAnonMB, s.r.LoadedAnonMB, s.c.znodes)
		s.r.BeyondDataHeap = beyondData(s.r.IdleHeapMB, s.r.LoadedHeapMB, s.c.znodes)
		s.logf("%d znodes loaded in %.1fs; resident MB %s, anonymous %s (%.0f B per znode beyond its data, %.0f anonymous)", s.c.znodes, s.r.LoadS,
			mbList(s.r.LoadedRSSMB), mbList(s.r.LoadedAnonMB), s.r.BeyondDataRSS, s.r.BeyondDataAnon)
	}
	if s.c.children > 0 {
		if err := s.loadMulti(s.c.children, childPath); err != nil {
			return fmt.Errorf("loading %d children: %w", s.c.children, err)
		}
		if err := waitApplied(s.c.servers, 10*time.Minute); err != nil {
			return err
		}
		s.r.Children = s.c.children
		m := s.memory()
		s.r.ChildrenRSSMB, s.r.ChildrenAnonMB = m.rss, m.anon
		s.r.ChildBeyondRSS = beyondData(s.r.LoadedRSSMB, s.r.ChildrenRSSMB, s.c.children)
		s.r.ChildBeyondAnon = beyondData(s.r.LoadedAnonMB, s.r.ChildrenAnonMB, s.c.children)
		s.r.ChildBeyondHeap = beyondData(s.r.LoadedHeapMB, m.heap, s.c.children)
		s.logf("%d children of one parent loaded; resident MB %s, anonymous %s (%.0f B per child beyond its data, %.0f anonymous)", s.c.children,
			mbList(s.r.ChildrenRSSMB), mbList(s.r.ChildrenAnonMB), s.r.ChildBeyondRSS, s.r.ChildBeyondAnon)
	}
	return nil
}

// leaderOf finds the leader among servers, asking for up to 30 s (a
// server busy with a large batch may answer srvr late).
func leaderOf(servers []string) (int, int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		i, z, err := leaderIndex(servers)
		if err == nil || time.Now().After(deadline) {
			return i, z, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// follower returns the index of a server that does not lead.
func (s *scaler) follower() (int, error) {
	lead, _, err := leaderOf(s.c.servers)
	if err != nil {
		return 0, err
	}
	return (lead + 1) % len(s.c.servers), nil
}

// bigParent lists the big parent on a follower while 8 other sessions on
// that server read and write, then creates one more child.
func (s *scaler) bigParent() error {
	if s.c.children == 0 {
		return nil
	}
	f, err := s.follower()
	if err != nil {
		return err
	}
	server := s.c.servers[f]
	probes, err := s.sessionsOn([]string{server}, 8)
	if err != nil {
		return err
	}
	defer closeConns(probes)
	lister, events, err := zk.Connect([]string{server}, 30*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false), zk.WithMaxBufferSize(256<<20))
	if err != nil {
		return err
	}
	go func() {
		for range events { // drain: the client blocks on a full channel
		}
	}()
	defer lister.Close()
	if _, _, err := lister.Exists("/"); err != nil {
		return err
	}
	// The probes: a getData and a setData each, over and over.
	type sample struct {
		at  time.Time
		lat time.Duration
	}
	var mu sync.Mutex
	var samples []sample
	stop := make(chan struct{})
	var wg sync.WaitGroup
	value := bytes.Repeat([]byte("p"), 100)
	for i, c := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				p := flatPath((i*7919 + k) % max(1, s.c.znodes))
				t0 := time.Now()
				var err error
				if s.c.znodes > 0 {
					if k%2 == 0 {
						_, _, err = c.Get(p)
					} else {
						_, err = c.Set(p, value, -1)
					}
				} else {
					_, _, err = c.Get("/")
				}
				lat := time.Since(t0)
				if err != nil {
					continue
				}
				mu.Lock()
				samples = append(samples, sample{t0, lat})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(3 * time.Second)
	begin := time.Now()
	names, _, err := lister.Children(scaleRoot + "/big")
	took := time.Since(begin)
	end := time.Now()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	s.r.GetChildrenMS = float64(took.Microseconds()) / 1000
	switch {
	case err != nil:
		s.r.GetChildrenResult = err.Error()
	case len(names) != s.c.children:
		s.r.GetChildrenResult = fmt.Sprintf("%d names of %d", len(names), s.c.children)
		s.fail("getChildren of the big parent: %s", s.r.GetChildrenResult)
	default:
		s.r.GetChildrenResult = "ok"
		size := 0
		for _, n := range names {
			size += 4 + len(n)
		}
		s.r.GetChildrenMB = float64(size) / (1 << 20)
	}
	var quiet, during []float64
	for _, x := range samples {
		ms := float64(x.lat.Microseconds()) / 1000
		switch {
		case x.at.Before(begin) && x.at.Add(x.lat).Before(begin):
			quiet = append(quiet, ms)
		case x.at.Before(end) && x.at.Add(x.lat).After(begin):
			during = append(during, ms)
		}
	}
	s.r.OthersQuietP99MS = percentile(quiet, 0.99)
	if len(during) > 0 {
		s.r.OthersMaxMS = slices.Max(during)
	}
	t0 := time.Now()
	if _, err := lister.Create(childPath(s.c.children), bytes.Repeat([]byte("v"), 100), 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		s.fail("create child %d of the big parent: %v", s.c.children+1, err)
	}
	s.r.CreateChildMS = float64(time.Since(t0).Microseconds()) / 1000
	s.logf("getChildren of %d children on %s: %s in %.0f ms (%.1f MB); other sessions there: p99 %.1f ms before, worst %.1f ms during; child %d created in %.1f ms",
		s.c.children, server, s.r.GetChildrenResult, s.r.GetChildrenMS, s.r.GetChildrenMB, s.r.OthersQuietP99MS, s.r.OthersMaxMS, s.c.children+1, s.r.CreateChildMS)
	return nil
}

// percentile returns the p-quantile of v (0 when empty); it sorts v.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	i := int(p * float64(len(v)))
	return v[min(i, len(v)-1)]
}

// writeSample is one write: when it began and how long it took.
type writeSample struct {
	at  time.Time
	lat time.Duration
}

// writeLoad runs n sessions on servers doing setData on random flat znodes
// until stop is closed, and returns what they measured.
func (s *scaler) writeLoad(servers []string, n int, stop <-chan struct{}) (func() ([]writeSample, int64, time.Duration), error) {
	conns, err := s.sessionsOn(servers, n)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var all []writeSample
	var errs atomic.Int64
	var wg sync.WaitGroup
	value := bytes.Repeat([]byte("w"), 100)
	start := time.Now()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 41))
			var mine []writeSample
			for {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
					return
				default:
				}
				p := flatPath(rng.IntN(max(1, s.c.znodes)))
				t0 := time.Now()
				if _, err := c.Set(p, value, -1); err != nil {
					errs.Add(1)
					continue
				}
				mine = append(mine, writeSample{t0, time.Since(t0)})
			}
		}()
	}
	return func() ([]writeSample, int64, time.Duration) {
		wg.Wait()
		took := time.Since(start)
		closeConns(conns)
		return all, errs.Load(), took
	}, nil
}

// figures sums up a write load.
func figures(samples []writeSample, errs int64, took time.Duration) writeFigures {
	lat := make([]float64, len(samples))
	for i, x := range samples {
		lat[i] = float64(x.lat.Microseconds()) / 1000
	}
	w := writeFigures{Ops: len(samples), OpsPerS: float64(len(samples)) / took.Seconds(), Errors: errs, P99MS: percentile(lat, 0.99)}
	if len(lat) > 0 {
		w.MaxMS = lat[len(lat)-1]
	}
	return w
}

// interval is a span of time, a snapshot being written.
type interval struct{ from, to time.Time }

// classify splits write latencies (ms) by whether the write overlapped one
// of the intervals.
func classify(samples []writeSample, during []interval) (quiet, snap []float64) {
	for _, x := range samples {
		end := x.at.Add(x.lat)
		in := false
		for _, iv := range during {
			if x.at.Before(iv.to) && end.After(iv.from) {
				in = true
				break
			}
		}
		ms := float64(x.lat.Microseconds()) / 1000
		if in {
			snap = append(snap, ms)
		} else {
			quiet = append(quiet, ms)
		}
	}
	return quiet, snap
}

// snapWatcher follows the snapshots the servers write: coordd's (Raft's
// file store: a directory TERM-INDEX-MILLIS.tmp while being written,
// renamed without .tmp when done) and ZooKeeper's (version-2/snapshot.ZXID,
// written in place: being written while it grows).
type snapWatcher struct {
	mu    sync.Mutex
	snaps map[string]*snapSeen // by file
	stop  chan struct{}
	done  chan struct{}
}

type snapSeen struct {
	server     int
	from, last time.Time // first seen (coordd: its name's time), last growth
	size       int64
	finished   bool
	path       string
}

func (s *scaler) watchSnapshots() *snapWatcher {
	w := &snapWatcher{snaps: map[string]*snapSeen{}, stop: make(chan struct{}), done: make(chan struct{})}
	seenBefore := map[string]bool{}
	for i := range s.c.dataDirs {
		for _, f := range snapFiles(s.c.dataDirs[i]) {
			seenBefore[f] = true
		}
	}
	go func() {
		defer close(w.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			now := time.Now()
			w.mu.Lock()
			for i, d := range s.c.dataDirs {
				for _, f := range snapFiles(d) {
					if seenBefore[f] {
						continue
					}
					key := strings.TrimSuffix(f, ".tmp")
					sn := w.snaps[key]
					if sn == nil {
						sn = &snapSeen{server: i, from: now, last: now, path: f}
						if t, ok := raftSnapTime(f); ok {
							sn.from = t
						}
						w.snaps[key] = sn
					}
					fi, err := os.Stat(snapState(f))
					if err == nil && fi.Size() != sn.size {
						sn.size, sn.last = fi.Size(), now
					}
					if !strings.HasSuffix(f, ".tmp") && strings.Contains(f, "/snapshots/") && !sn.finished {
						// coordd's: renamed, so complete.
						sn.finished, sn.last, sn.path = true, now, f
					}
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// intervals returns the snapshots seen and stops watching.
func (w *snapWatcher) intervals(servers []string) ([]interval, []snapFigure) {
	close(w.stop)
	<-w.done
	var ivs []interval
	var figs []snapFigure
	for _, sn := range w.snaps {
		ivs = append(ivs, interval{sn.from, sn.last})
		if fi, err := os.Stat(snapState(sn.path)); err == nil {
			sn.size = fi.Size()
		}
		figs = append(figs, snapFigure{Server: servers[sn.server], S: sn.last.Sub(sn.from).Seconds(), MB: float64(sn.size) / (1 << 20)})
	}
	slices.SortFunc(figs, func(a, b snapFigure) int { return strings.Compare(a.Server, b.Server) })
	return ivs, figs
}

// snapFiles lists a data dir's snapshots: coordd's directories in
// snapshots/, ZooKeeper's files version-2/snapshot.*.
func snapFiles(dir string) []string {
	a, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*"))
	b, _ := filepath.Glob(filepath.Join(dir, "version-2", "snapshot.*"))
	return append(a, b...)
}

// snapState is the file of a snapshot holding the state.
func snapState(f string) string {
	if strings.Contains(f, "/snapshots/") {
		return filepath.Join(f, "state.bin")
	}
	return f
}

// raftSnapTime reads the time in a Raft snapshot's name, TERM-INDEX-MILLIS.
func raftSnapTime(f string) (time.Time, bool) {
	parts := strings.Split(strings.TrimSuffix(filepath.Base(f), ".tmp"), "-")
	if !strings.Contains(f, "/snapshots/") || len(parts) != 3 {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// snapshots runs the write workload and classes its latencies by the
// snapshots being written meanwhile.
func (s *scaler) snapshots() error {
	if s.c.writeTime <= 0 || s.c.znodes == 0 {
		return nil
	}
	w := s.watchSnapshots()
	stop := make(chan struct{})
	wait, err := s.writeLoad(s.c.servers, s.c.writeClients, stop)
	if err != nil {
		return err
	}
	time.Sleep(s.c.writeTime)
	close(stop)
	samples, errs, took := wait()
	ivs, figs := w.intervals(s.c.servers)
	s.r.Writes = figures(samples, errs, took)
	quiet, snap := classify(samples, ivs)
	s.r.Writes.QuietN, s.r.Writes.SnapN = len(quiet), len(snap)
	s.r.Writes.QuietP99MS, s.r.Writes.SnapP99MS = percentile(quiet, 0.99), percentile(snap, 0.99)
	s.r.Snapshots = figs
	if errs > 0 {
		s.fail("%d writes failed while snapshots were taken", errs)
	}
	var durs []string
	for _, f := range figs {
		durs = append(durs, fmt.Sprintf("%s %.1fs %.0fMB", f.Server, f.S, f.MB))
	}
	s.logf("%d writes in %v (%.0f/s, %d errors): p99 %.1f ms without a snapshot (%d writes), %.1f ms during one (%d writes); snapshots: %s",
		len(samples), took.Round(time.Second), s.r.Writes.OpsPerS, errs, s.r.Writes.QuietP99MS, len(quiet), s.r.Writes.SnapP99MS, len(snap), strings.Join(durs, ", "))
	return nil
}

// stopServer stops server i and returns how to start it again.
func (s *scaler) stopServer(i int) (*procSpec, error) {
	s.mu.Lock()
	s.stopped[i] = true
	s.mu.Unlock()
	return stopProc(s.c.pids[i])
}

// startServer starts server i again and times it: until a new session on
// it answers a read, and until its srvr reports target.
func (s *scaler) startServer(i int, spec *procSpec, target int64) (serving, caughtUp float64, err error) {
	t0 := time.Now()
	pid, err := s.procs.start(spec)
	if err != nil {
		return 0, 0, err
	}
	s.c.pids[i] = pid
	server := s.c.servers[i]
	servingC := make(chan float64, 1)
	go func() {
		for time.Since(t0) < 15*time.Minute {
			if c, err := connectWithin(server, 250*time.Millisecond); err == nil {
				_, _, err := c.Get("/")
				c.Close()
				if err == nil {
					servingC <- time.Since(t0).Seconds()
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		servingC <- -1
	}()
	for {
		if _, z, err := srvr(server); err == nil && z >= target {
			break
		}
		if time.Since(t0) > 15*time.Minute {
			return 0, 0, fmt.Errorf("%s not caught up after 15 minutes", server)
		}
		time.Sleep(20 * time.Millisecond)
	}
	caughtUp = time.Since(t0).Seconds()
	serving = <-servingC
	s.mu.Lock()
	delete(s.stopped, i)
	s.mu.Unlock()
	return serving, caughtUp, nil
}

// others returns the servers but i.
func (s *scaler) others(i int) []string {
	var out []string
	for k, a := range s.c.servers {
		if k != i {
			out = append(out, a)
		}
	}
	return out
}

// restarts: a follower restarted, one that missed writes, one wiped.
func (s *scaler) restarts() error {
	// Restarted, nothing missed.
	f, err := s.follower()
	if err != nil {
		return err
	}
	spec, err := s.stopServer(f)
	if err != nil {
		return err
	}
	_, target, err := leaderOf(s.others(f))
	if err != nil {
		return err
	}
	if s.r.RestartServingS, s.r.RestartCaughtUpS, err = s.startServer(f, spec, target); err != nil {
		return err
	}
	s.logf("follower %s restarted: serving after %.2fs, caught up after %.2fs", s.c.servers[f], s.r.RestartServingS, s.r.RestartCaughtUpS)

	// Missed writes.
	if s.c.catchupWrites > 0 && s.c.znodes > 0 {
		if f, err = s.follower(); err != nil {
			return err
		}
		if spec, err = s.stopServer(f); err != nil {
			return err
		}
		conns, err := s.sessionsOn(s.others(f), 64)
		if err != nil {
			return err
		}
		value := bytes.Repeat([]byte("m"), 100)
		err = parallel(s.c.catchupWrites, len(conns), func(w, k int) error {
			_, err := conns[w].Set(flatPath(k%s.c.znodes), value, -1)
			return err
		})
		closeConns(conns)
		if err != nil {
			return fmt.Errorf("writing with %s stopped: %w", s.c.servers[f], err)
		}
		_, target, err := leaderOf(s.others(f))
		if err != nil {
			return err
		}
		if s.r.CatchupServingS, s.r.CatchupS, err = s.startServer(f, spec, target); err != nil {
			return err
		}
		s.r.CatchupWrites = s.c.catchupWrites
		s.logf("follower %s missed %d writes: serving after %.2fs, caught up after %.2fs", s.c.servers[f], s.c.catchupWrites, s.r.CatchupServingS, s.r.CatchupS)
	}

	// Wiped, while the others take writes.
	if f, err = s.follower(); err != nil {
		return err
	}
	if spec, err = s.stopServer(f); err != nil {
		return err
	}
	if err := wipe(s.c.dataDirs[f]); err != nil {
		return err
	}
	stop := make(chan struct{})
	var wait func() ([]writeSample, int64, time.Duration)
	if s.c.znodes > 0 {
		if wait, err = s.writeLoad(s.others(f), 16, stop); err != nil {
			return err
		}
	}
	time.Sleep(2 * time.Second)
	_, target, err = leaderOf(s.others(f))
	if err != nil {
		return err
	}
	s.r.WipedServingS, s.r.WipedCaughtUpS, err = s.startServer(f, spec, target)
	close(stop)
	if wait != nil {
		samples, errs, took := wait()
		s.r.WipedWrites = figures(samples, errs, took)
		if errs > 0 {
			s.fail("%d writes failed while %s was rebuilt", errs, s.c.servers[f])
		}
	}
	if err != nil {
		return err
	}
	s.logf("follower %s wiped: serving after %.2fs, caught up after %.2fs; meanwhile %.0f writes/s on the others, p99 %.1f ms, %d errors",
		s.c.servers[f], s.r.WipedServingS, s.r.WipedCaughtUpS, s.r.WipedWrites.OpsPerS, s.r.WipedWrites.P99MS, s.r.WipedWrites.Errors)
	return nil
}

// wipe empties a server's data: ZooKeeper's version-2 (its myid and
// configuration stay), or all of a coordd data dir.
func wipe(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "myid")); err == nil {
		return os.RemoveAll(filepath.Join(dir, "version-2"))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// rawSessions opens n minimal sessions over servers, from the source
// addresses in turn, 256 at a time.
func (s *scaler) rawSessions(servers []string, n int) ([]*rawSession, error) {
	out := make([]*rawSession, n)
	var from []net.Addr
	for _, ip := range s.c.sourceIPs {
		from = append(from, &net.TCPAddr{IP: net.ParseIP(ip)})
	}
	err := parallel(n, min(n, 256), func(_, i int) error {
		var err error
		out[i], err = dialRaw(servers[i%len(servers)], from[(i/len(servers))%len(from)], 30*time.Second)
		return err
	})
	if err != nil {
		for _, r := range out {
			if r != nil {
				r.close()
			}
		}
		return nil, err
	}
	return out, nil
}

// pinger pings every session every third of its timeout until stop.
func pinger(sessions []*rawSession, stop <-chan struct{}) {
	if len(sessions) == 0 {
		return
	}
	period := sessions[0].timeout / 3
	t := time.NewTicker(period / 10)
	defer t.Stop()
	next := 0
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		// A tenth of them each tick.
		for k := 0; k < (len(sessions)+9)/10; k++ {
			_ = sessions[next].ping()
			next = (next + 1) % len(sessions)
		}
	}
}

func sumMB(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// watchFigures registers the watches and measures memory and writes.
func (s *scaler) watchFigures() error {
	if (s.c.watches == 0 && s.c.recursive == 0) || s.c.znodes == 0 {
		return nil
	}
	throughput := func() (float64, error) {
		stop := make(chan struct{})
		wait, err := s.writeLoad(s.c.servers, 16, stop)
		if err != nil {
			return 0, err
		}
		time.Sleep(10 * time.Second)
		close(stop)
		samples, errs, took := wait()
		if errs > 0 {
			s.fail("%d writes failed in the watch figure", errs)
		}
		return figures(samples, errs, took).OpsPerS, nil
	}
	var err error
	if s.r.WritesNoWatches, err = throughput(); err != nil {
		return err
	}
	m0 := s.memory()
	sessions, err := s.rawSessions(s.c.servers, 64)
	if err != nil {
		return err
	}
	defer func() {
		for _, r := range sessions {
			r.closeSession()
		}
	}()
	stopPing := make(chan struct{})
	go pinger(sessions, stopPing)
	defer close(stopPing)
	// Recursive watches on the last znodes, one-shot ones on the first:
	// each znode has one watch at most.
	recursive := min(s.c.recursive, s.c.znodes)
	watches := min(s.c.watches, s.c.znodes-recursive)
	start := time.Now()
	err = parallel(len(sessions), len(sessions), func(_, i int) error {
		r := sessions[i]
		for k := i; k < watches; k += len(sessions) {
			if err := r.getDataWatch(flatPath(k)); err != nil {
				return err
			}
		}
		for k := i; k < recursive; k += len(sessions) {
			if err := r.addRecursiveWatch(flatPath(s.c.znodes - 1 - k)); err != nil {
				return err
			}
		}
		return r.waitReplies(5 * time.Minute)
	})
	if err != nil {
		return fmt.Errorf("registering watches: %w", err)
	}
	s.r.WatchRegisterS = time.Since(start).Seconds()
	s.r.Watches, s.r.Recursive = watches, recursive
	m1 := s.memory()
	n := float64(watches + recursive)
	s.r.BytesPerWatch = (sumMB(m1.anon) - sumMB(m0.anon)) * (1 << 20) / n
	if len(m0.heap) > 0 && len(m1.heap) == len(m0.heap) {
		s.r.HeapPerWatch = (sumMB(m1.heap) - sumMB(m0.heap)) * (1 << 20) / n
	}
	if s.r.WritesAndWatches, err = throughput(); err != nil {
		return err
	}
	for _, r := range sessions {
		s.r.Notifications += r.notified.Load()
	}
	s.logf("%d one-shot and %d persistent recursive watches set in %.1fs: %.0f B each (anonymous memory, all servers); writes/s %.0f without, %.0f with them (%d notifications)",
		watches, recursive, s.r.WatchRegisterS, s.r.BytesPerWatch, s.r.WritesNoWatches, s.r.WritesAndWatches, s.r.Notifications)
	return nil
}

// sessionFigures holds many sessions and measures them: ZooKeeper-protocol
// sessions, a connection each, opened by worker processes of at most
// holdPerWorker each (a process here may open 20 000 files), and on coordd
// also sessions of its Go client over shared connections (coordctl bench
// session-hold).
func (s *scaler) sessionFigures() error {
	if s.c.sessions > 0 {
		if err := s.zkSessionFigures(); err != nil {
			return err
		}
	}
	if s.c.grpcSessions > 0 && s.c.coordctl != "" {
		return s.grpcSessionFigures()
	}
	return nil
}

// holdPerWorker is the most sessions one worker process opens.
const holdPerWorker = 15000

func (s *scaler) zkSessionFigures() error {
	m0 := s.memory()
	start := time.Now()
	var workers []*holdWorker
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	for k := 0; k*holdPerWorker < s.c.sessions; k++ {
		n := min(holdPerWorker, s.c.sessions-k*holdPerWorker)
		// Each worker from addresses of its own: a source address has
		// about 28 000 ports in all.
		from := s.c.sourceIPs[k%len(s.c.sourceIPs)]
		w, err := startHoldWorker(s.c.servers, n, from)
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		if err := w.expect("open"); err != nil {
			return fmt.Errorf("opening sessions: %w", err)
		}
	}
	s.r.SessionsOpenS = time.Since(start).Seconds()
	s.r.Sessions = s.c.sessions
	s.logf("%d sessions open in %.1fs", s.c.sessions, s.r.SessionsOpenS)
	lead, _, err := leaderOf(s.c.servers)
	if err != nil {
		return err
	}
	cpu0, t0 := procCPU([]int{s.c.pids[lead]}), time.Now()
	time.Sleep(s.c.hold)
	s.r.LeaderCores = float64(procCPU([]int{s.c.pids[lead]})-cpu0) / float64(time.Since(t0))
	s.r.SessionsHeldS = time.Since(t0).Seconds()
	m1 := s.memory() // the pings go on meanwhile
	for _, w := range workers {
		lost, err := w.check()
		if err != nil {
			return err
		}
		s.r.SessionsExpired += lost
	}
	s.r.BytesPerSession = (sumMB(m1.anon) - sumMB(m0.anon)) * (1 << 20) / float64(s.c.sessions)
	if len(m0.heap) > 0 && len(m1.heap) == len(m0.heap) {
		s.r.HeapPerSession = (sumMB(m1.heap) - sumMB(m0.heap)) * (1 << 20) / float64(s.c.sessions)
	}
	s.logf("%d sessions held %.0fs: %d expired or lost, %.0f B each (anonymous memory, all servers), the leader used %.2f cores",
		s.c.sessions, s.r.SessionsHeldS, s.r.SessionsExpired, s.r.BytesPerSession, s.r.LeaderCores)
	return nil
}

// grpcSessionFigures runs coordctl bench session-hold.
func (s *scaler) grpcSessionFigures() error {
	out, err := exec.Command(s.c.coordctl, "--servers", strings.Join(s.c.servers, ","), "bench",
		fmt.Sprintf("session-hold:%d", s.c.grpcSessions), "--duration", s.c.hold.String(), "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("coordctl bench session-hold: %w", err)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var r struct {
		Errors       int64   `json:"errors"`
		HeldSessions int     `json:"held_sessions"`
		KBPerSession float64 `json:"kb_per_session"`
		LeaderCores  float64 `json:"leader_cores"`
		FirstError   string  `json:"first_error"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &r); err != nil {
		return fmt.Errorf("coordctl bench session-hold: %w", err)
	}
	s.r.GRPCSessions, s.r.GRPCSessionsLost = r.HeldSessions, int(r.Errors)
	s.r.GRPCBytesPerSession, s.r.GRPCLeaderCores = r.KBPerSession*1024, r.LeaderCores
	if r.Errors > 0 {
		s.fail("%d of %d gRPC sessions failed: %s", r.Errors, r.HeldSessions, r.FirstError)
	}
	s.logf("%d gRPC sessions (shared connections) held %v: %d failed, %.0f B each, the leader used %.2f cores",
		r.HeldSessions, s.c.hold, r.Errors, s.r.GRPCBytesPerSession, r.LeaderCores)
	return nil
}

// holdWorker is a child process (compare scale-hold) holding sessions.
type holdWorker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startHoldWorker(servers []string, n int, from string) (*holdWorker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "scale-hold", strings.Join(servers, ","), strconv.Itoa(n), from)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &holdWorker{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// expect reads the worker's next line, which must start with word.
func (w *holdWorker) expect(word string) error {
	if !w.out.Scan() {
		return fmt.Errorf("session worker ended: %v", w.out.Err())
	}
	if line := w.out.Text(); !strings.HasPrefix(line, word) {
		return fmt.Errorf("session worker: %s", line)
	}
	return nil
}

// check asks the worker how many of its sessions are lost.
func (w *holdWorker) check() (int, error) {
	fmt.Fprintln(w.in, "check")
	if !w.out.Scan() {
		return 0, fmt.Errorf("session worker ended: %v", w.out.Err())
	}
	var lost int
	if _, err := fmt.Sscanf(w.out.Text(), "lost %d", &lost); err != nil {
		return 0, fmt.Errorf("session worker: %s", w.out.Text())
	}
	return lost, nil
}

// stop has the worker close its sessions, and waits for it.
func (w *holdWorker) stop() {
	w.in.Close()
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = w.cmd.Process.Kill()
		<-done
	}
}

// holdMain is compare scale-hold SERVERS N FROM: it opens N minimal
// sessions over SERVERS from local address FROM, says "open", pings them
// until stdin says "check" (it answers "lost K", the sessions lost so
// far), and closes them when stdin ends.
func holdMain(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: compare scale-hold SERVERS N FROM")
	}
	servers := strings.Split(args[0], ",")
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 {
		return fmt.Errorf("scale-hold: bad count %q", args[1])
	}
	from := &net.TCPAddr{IP: net.ParseIP(args[2])}
	sessions := make([]*rawSession, n)
	err = parallel(n, min(n, 128), func(_, i int) error {
		var err error
		sessions[i], err = dialRaw(servers[i%len(servers)], from, 30*time.Second)
		return err
	})
	if err != nil {
		fmt.Printf("failed %v\n", err)
		return err
	}
	fmt.Println("open")
	stop := make(chan struct{})
	go pinger(sessions, stop)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "check" {
			lost := 0
			for _, r := range sessions {
				if !r.alive() {
					lost++
				}
			}
			fmt.Printf("lost %d\n", lost)
		}
	}
	close(stop)
	_ = parallel(n, min(n, 128), func(_, i int) error {
		sessions[i].closeSession()
		return nil
	})
	return nil
}
