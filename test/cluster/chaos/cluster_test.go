package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/rpc/apipb"
)

// Ports every node uses on its own address.
const (
	clientPort = 32181
	peerPort   = 32888
)

// Server timing, chosen for 2 loaded cores: a 200ms tick (sessions of
// 0.4s..10s, --max-session-timeout raised to 10s), Raft heartbeat and
// election timeouts of 500ms (a failover takes ~1-2s here, well under the
// workload sessions' 6s timeout), and a low snapshot threshold so that
// snapshots and log truncation happen during the run.
var serverTiming = struct {
	Tick, Heartbeat, Election, MaxSession time.Duration
	SnapshotThreshold, TrailingLogs       int
}{200 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 10 * time.Second, 2048, 1024}

// procNode is one coordd server process.
type procNode struct {
	idx        int // 0-based
	id         string
	ip         string // its own loopback address
	clientAddr string
	peerAddr   string
	dataDir    string
	logPath    string

	mu         sync.Mutex
	join       bool // start with --join (it was replaced: membership fault)
	generation int  // how many times its data dir was replaced
	cmd        *exec.Cmd
	exited     chan struct{}
	paused     bool
	starts     int
	logFile    *os.File
}

// procCluster runs real coordd processes.
type procCluster struct {
	t     testing.TB
	bin   string
	dir   string
	slot  int
	nodes []*procNode
	log   func(format string, args ...any)

	statusMu sync.Mutex
	conns    map[string]*grpc.ClientConn

	tls *clusterTLS // nil: plaintext (-chaos.tls)
	acl *clusterACL // nil: every node open, nobody authenticates (-chaos.acl)
	// filesMu keeps certificate rotation and server starts apart: a server
	// reads its files as it starts, and must not read half a rotation.
	filesMu   sync.Mutex
	lastStart time.Time
}

// nodeIP is node i's (0-based) address in slot s.
func nodeIP(slot, i int) string { return fmt.Sprintf("127.0.%d.%d", slot, 11+i) }

func newProcCluster(t testing.TB, bin, dir string, slot, n int, logf func(string, ...any)) *procCluster {
	c := &procCluster{t: t, bin: bin, dir: dir, slot: slot, log: logf, conns: map[string]*grpc.ClientConn{}}
	for i := 0; i < n; i++ {
		ip := nodeIP(slot, i)
		c.nodes = append(c.nodes, &procNode{
			idx: i, id: fmt.Sprint(i + 1), ip: ip,
			clientAddr: fmt.Sprintf("%s:%d", ip, clientPort),
			peerAddr:   fmt.Sprintf("%s:%d", ip, peerPort),
			dataDir:    filepath.Join(dir, fmt.Sprintf("data%d", i+1)),
			logPath:    filepath.Join(dir, fmt.Sprintf("coordd%d.log", i+1)),
		})
	}
	return c
}

func (c *procCluster) servers() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.clientAddr)
	}
	return out
}

func (c *procCluster) peersFlag() string {
	var parts []string
	for _, n := range c.nodes {
		parts = append(parts, n.id+"="+n.peerAddr)
	}
	return strings.Join(parts, ",")
}

// start starts node i (again, on the same data dir) unless it runs.
func (c *procCluster) start(i int) error {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	if n.logFile == nil {
		f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		n.logFile = f
	}
	fmt.Fprintf(n.logFile, "=== chaos: start #%d at %s\n", n.starts+1, time.Now().Format(time.RFC3339Nano))
	args := []string{
		"--id", n.id, "--data-dir", n.dataDir,
		"--client-addr", n.clientAddr, "--peer-addr", n.peerAddr, "--peers", c.peersFlag(),
		"--tick", serverTiming.Tick.String(),
		"--max-session-timeout", serverTiming.MaxSession.String(),
		"--heartbeat-timeout", serverTiming.Heartbeat.String(),
		"--election-timeout", serverTiming.Election.String(),
		"--snapshot-threshold", fmt.Sprint(serverTiming.SnapshotThreshold),
		"--trailing-logs", fmt.Sprint(serverTiming.TrailingLogs),
		"--reap-interval", "500ms",
		"--log-level", "info"}
	if c.tls != nil {
		args = append(args, c.tls.flags(i)...)
	}
	args = append(args, c.aclFlags()...)
	if n.join {
		args = append(args, "--join")
	}
	args = append(args, raftLogArgs(n.idx)...)
	args = append(args, lockDelayArgs()...)
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout = n.logFile
	cmd.Stderr = n.logFile
	// The servers die with the test process even if it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	c.filesMu.Lock()
	err := cmd.Start()
	c.lastStart = time.Now()
	c.filesMu.Unlock()
	if err != nil {
		return err
	}
	n.cmd = cmd
	n.starts++
	n.paused = false
	exited := make(chan struct{})
	n.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	return nil
}

// pid returns node i's process id, or 0.
func (c *procCluster) pid(i int) int {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// kill SIGKILLs node i and waits for it to be gone.
func (c *procCluster) kill(i int) {
	n := c.nodes[i]
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.paused = false
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		c.log("node %s (pid %d) did not exit 10s after SIGKILL", n.id, cmd.Process.Pid)
	}
	fmt.Fprintf(n.logFile, "=== chaos: killed at %s\n", time.Now().Format(time.RFC3339Nano))
}

// running reports whether node i's process is up (possibly paused).
func (c *procCluster) running(i int) bool {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// exitedUnexpectedly lists nodes whose process ended without a kill.
func (c *procCluster) exitedUnexpectedly() []string {
	var out []string
	for _, n := range c.nodes {
		n.mu.Lock()
		if n.cmd != nil {
			select {
			case <-n.exited:
				out = append(out, fmt.Sprintf("node %s (%v)", n.id, n.cmd.ProcessState))
			default:
			}
		}
		n.mu.Unlock()
	}
	return out
}

func (c *procCluster) pause(i int) {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !n.paused {
		_ = n.cmd.Process.Signal(syscall.SIGSTOP)
		n.paused = true
	}
}

func (c *procCluster) resume(i int) {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.paused {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
		n.paused = false
	}
}

func (c *procCluster) isPaused(i int) bool {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// stopAll kills every server by PID (resuming paused ones first, so that
// nothing is left stopped) and closes the status connections.
func (c *procCluster) stopAll() {
	for i := range c.nodes {
		c.resume(i)
		c.kill(i)
	}
	c.statusMu.Lock()
	for _, cc := range c.conns {
		cc.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
	c.statusMu.Unlock()
	for _, n := range c.nodes {
		if n.logFile != nil {
			n.logFile.Close()
		}
	}
}

func (c *procCluster) conn(addr string) (*grpc.ClientConn, error) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, c.grpcCredentials())
	if err != nil {
		return nil, err
	}
	c.conns[addr] = cc
	return cc, nil
}

// status asks node i for its view (nil when it does not answer in time).
func (c *procCluster) status(i int, d time.Duration) *apipb.StatusResponse {
	if !c.running(i) || c.isPaused(i) {
		return nil
	}
	cc, err := c.conn(c.nodes[i].clientAddr)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	st, err := apipb.NewCoordClient(cc).Status(ctx, &apipb.StatusRequest{})
	if err != nil {
		return nil
	}
	return st
}

// statuses asks every node at once.
func (c *procCluster) statuses(d time.Duration) []*apipb.StatusResponse {
	out := make([]*apipb.StatusResponse, len(c.nodes))
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func(i int) { defer wg.Done(); out[i] = c.status(i, d) }(i)
	}
	wg.Wait()
	return out
}

// leader returns the index of the node that says it leads with the highest
// term, or -1.
func (c *procCluster) leader() int {
	best, term := -1, uint64(0)
	for i, st := range c.statuses(1500 * time.Millisecond) {
		if st != nil && st.Role == "leader" && st.Term >= term {
			best, term = i, st.Term
		}
	}
	return best
}

// healthy reports whether every node runs, answers, and agrees on one
// leader that itself says it leads, with applied indexes close together.
func (c *procCluster) healthy() (bool, string) {
	sts := c.statuses(1500 * time.Millisecond)
	leaderID := ""
	var applied []int64
	for i, st := range sts {
		if st == nil {
			return false, fmt.Sprintf("node %s does not answer", c.nodes[i].id)
		}
		if st.Leader == "" {
			return false, fmt.Sprintf("node %s knows no leader", c.nodes[i].id)
		}
		if leaderID == "" {
			leaderID = st.Leader
		} else if st.Leader != leaderID {
			return false, fmt.Sprintf("nodes disagree on the leader (%s vs %s)", leaderID, st.Leader)
		}
		applied = append(applied, st.Applied)
	}
	for i, st := range sts {
		if c.nodes[i].id == leaderID && st.Role != "leader" {
			return false, fmt.Sprintf("node %s is named leader but is %s", leaderID, st.Role)
		}
	}
	sort.Slice(applied, func(i, j int) bool { return applied[i] < applied[j] })
	if applied[len(applied)-1]-applied[0] > 5000 {
		return false, fmt.Sprintf("applied indexes still far apart: %v", applied)
	}
	return true, ""
}

// waitHealthy polls healthy until it holds or d passes.
func (c *procCluster) waitHealthy(ctx context.Context, d time.Duration) (bool, string) {
	deadline := time.Now().Add(d)
	why := ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ok, w := c.healthy()
		if ok {
			return true, ""
		}
		why = w
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false, why
}
