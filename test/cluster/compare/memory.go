package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"
)

// The memory and catch-up figures, against ZooKeeper. Both sides are driven
// by go-zookeeper (coordd through its ZooKeeper protocol), and both are
// watched through the four-letter word srvr, which ZooKeeper and coordd
// answer alike (Zxid: the last zxid applied; Mode: leader or follower).
//
//   - Memory: every server's resident memory (VmRSS, and its anonymous and
//     file-backed parts) when the runs begin,
//     and after --memory-znodes znodes of 100 bytes were loaded (multis of
//     100 creates, 16 sessions) and every server applied them, plus 15
//     seconds of rest.
//   - Catch-up: a follower is stopped (SIGTERM), --catchup-writes setData
//     calls on the loaded znodes go to the other servers (64 sessions), the
//     leader's zxid is noted, and the follower is started again with the
//     very command line, directory, environment and log it had. Serving:
//     the time until a new session on it answers a read. Caught up: the
//     time until its srvr reports the leader's zxid.

// memRoot is where the memory figure's znodes live.
const memRoot = "/compare-mem"

// settle is the rest between the load and the memory reading: long enough
// for coordd to notice it is idle and return its free heap to the OS
// (--idle-memory-check, every 5 s), as it does after any burst of writes.
const settle = 15 * time.Second

// usageFigures measures both sides' memory and catch-up; its methods do
// nothing when it is off.
type usageFigures struct {
	c     config
	on    bool
	names [2]string // the other system, coordd
	addrs [2][]string
	pids  [2][]int

	idleMB     [2][]resident
	loadedMB   [2][]resident
	loadS      [2]float64
	servingS   [2]float64
	caughtUpS  [2]float64
	writesS    [2]float64
	restartedN [2]string // which server was restarted

	mu        sync.Mutex
	restarted []*restartedProc
}

func newUsage(c config, other string) *usageFigures {
	u := &usageFigures{c: c, names: [2]string{other, "coordd"}}
	u.addrs = [2][]string{c.servers, strings.Split(c.coordd, ",")}
	u.pids = [2][]int{c.otherPids, c.coorddPids}
	u.on = c.system == "zookeeper" && c.memZnodes > 0 &&
		len(u.pids[0]) == len(u.addrs[0]) && len(u.pids[1]) == len(u.addrs[1])
	if !u.on && c.system == "zookeeper" && c.memZnodes > 0 {
		fmt.Fprintln(os.Stderr, "compare: no memory or catch-up figures (they need --other-pids and --coordd-pids, one per server)")
	}
	return u
}

// resident is a process's resident memory in MB (VmRSS), and the two parts
// it is made of: anonymous memory (RssAnon: the heap, stacks, what the
// process itself allocated) and file pages (RssFile: its executable and
// libraries as mapped, shared with every other process mapping the same
// files). How much of an executable is mapped is the kernel's choice, not
// the program's: on Linux 6.18 with ext4, nearly all of a binary counts as
// resident however little of it runs. Both parts are reported so that a
// reader can tell the server's own memory from the kernel's mapping of its
// code. Index it with totalRSS, anonRSS and fileRSS.
type resident [3]float64

// The figures of a resident.
const (
	totalRSS = iota // VmRSS
	anonRSS         // RssAnon
	fileRSS         // RssFile
)

// rssMB is a process's resident memory in MB, or all -1.
func rssMB(pid int) resident {
	r := resident{-1, -1, -1}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return r
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			r[totalRSS] = kb / 1024
		case "RssAnon":
			r[anonRSS] = kb / 1024
		case "RssFile":
			r[fileRSS] = kb / 1024
		}
	}
	return r
}

func (u *usageFigures) rss(side int) []resident {
	out := make([]resident, len(u.pids[side]))
	for i, p := range u.pids[side] {
		out[i] = rssMB(p)
	}
	return out
}

// idle notes every server's resident memory before the runs.
func (u *usageFigures) idle() {
	if !u.on {
		return
	}
	for side := range 2 {
		u.idleMB[side] = u.rss(side)
	}
}

// loaded measures memory with the znodes loaded, then the catch-up, on
// each side in turn.
func (u *usageFigures) loaded() error {
	if !u.on {
		return nil
	}
	for side := range 2 {
		if err := u.loadSide(side); err != nil {
			return fmt.Errorf("%s: memory: %w", u.names[side], err)
		}
		if u.c.catchupWrites > 0 {
			if err := u.catchUp(side); err != nil {
				return fmt.Errorf("%s: catch-up: %w", u.names[side], err)
			}
		}
	}
	return nil
}

// connectAll opens n go-zookeeper sessions, session i on servers[i % len].
func connectAll(servers []string, n int) ([]*zk.Conn, error) {
	conns := make([]*zk.Conn, n)
	for i := range conns {
		c, err := connect(servers[i%len(servers)])
		if err != nil {
			closeConns(conns)
			return nil, err
		}
		conns[i] = c
	}
	return conns, nil
}

func closeConns(conns []*zk.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// parallel runs f(i) for i in [0, n) on workers goroutines, each taking
// the next i, and returns the first error.
func parallel(n, workers int, f func(worker, i int) error) error {
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(w, i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return e.(error)
	}
	return nil
}

const memDirs = 100

func memPath(k int) string { return fmt.Sprintf("%s/d%03d/n%07d", memRoot, k%memDirs, k) }

// loadSide loads the znodes on one side and reads its servers' memory.
func (u *usageFigures) loadSide(side int) error {
	servers := u.addrs[side]
	conns, err := connectAll(servers, 16)
	if err != nil {
		return err
	}
	defer closeConns(conns)
	if err := ensure(conns[0], memRoot); err != nil {
		return err
	}
	for d := range memDirs {
		if err := ensure(conns[0], fmt.Sprintf("%s/d%03d", memRoot, d)); err != nil {
			return err
		}
	}
	value := bytes.Repeat([]byte("v"), 100)
	const batch = 100
	n := u.c.memZnodes
	start := time.Now()
	err = parallel((n+batch-1)/batch, len(conns), func(w, b int) error {
		var ops []any
		for k := b * batch; k < min(n, (b+1)*batch); k++ {
			ops = append(ops, &zk.CreateRequest{Path: memPath(k), Data: value, Acl: acl})
		}
		_, err := conns[w].Multi(ops...)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil // an earlier run's
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("loading %d znodes: %w", n, err)
	}
	if err := waitApplied(servers, 2*time.Minute); err != nil {
		return err
	}
	u.loadS[side] = time.Since(start).Seconds()
	time.Sleep(settle)
	u.loadedMB[side] = u.rss(side)
	fmt.Fprintf(os.Stderr, "%-10s %d znodes loaded and applied everywhere in %.1fs; resident MB %s\n",
		u.names[side], n, u.loadS[side], mbList(part(u.loadedMB[side], totalRSS)))
	return nil
}

// srvr asks a server the four-letter word srvr; it returns the Mode line's
// value and the Zxid.
func srvr(addr string) (mode string, zxid int64, err error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", 0, err
	}
	out, err := io.ReadAll(c)
	if err != nil && len(out) == 0 {
		return "", 0, err
	}
	zxid = -1
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Zxid: "); ok {
			if z, err := strconv.ParseInt(strings.TrimPrefix(v, "0x"), 16, 64); err == nil {
				zxid = z
			}
		}
		if v, ok := strings.CutPrefix(line, "Mode: "); ok {
			mode = strings.TrimSpace(v)
		}
	}
	if zxid < 0 || mode == "" {
		return "", 0, fmt.Errorf("%s: srvr answered %q", addr, strings.TrimSpace(string(out)))
	}
	return mode, zxid, nil
}

// leaderIndex finds the leader among servers.
func leaderIndex(servers []string) (int, int64, error) {
	for i, a := range servers {
		if mode, z, err := srvr(a); err == nil && mode == "leader" {
			return i, z, nil
		}
	}
	return -1, 0, errors.New("no server says it leads (srvr)")
}

// waitApplied waits until every server has applied what the leader had
// when the wait began.
func waitApplied(servers []string, d time.Duration) error {
	_, target, err := leaderIndex(servers)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for _, a := range servers {
		for {
			if _, z, err := srvr(a); err == nil && z >= target {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not apply zxid 0x%x within %v", a, target, d)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// catchUp stops a follower, writes, restarts it and times its return.
func (u *usageFigures) catchUp(side int) error {
	servers := u.addrs[side]
	lead, _, err := leaderIndex(servers)
	if err != nil {
		return err
	}
	f := (lead + 1) % len(servers)
	u.restartedN[side] = servers[f]
	spec, err := stopProc(u.pids[side][f])
	if err != nil {
		return err
	}
	var rest []string
	for i, a := range servers {
		if i != f {
			rest = append(rest, a)
		}
	}
	conns, err := connectAll(rest, 64)
	if err != nil {
		return err
	}
	value := bytes.Repeat([]byte("w"), 100)
	n := u.c.catchupWrites
	start := time.Now()
	err = parallel(n, len(conns), func(w, k int) error {
		_, err := conns[w].Set(memPath(k%u.c.memZnodes), value, -1)
		return err
	})
	closeConns(conns)
	if err != nil {
		return fmt.Errorf("writing with %s stopped: %w", servers[f], err)
	}
	u.writesS[side] = time.Since(start).Seconds()
	// The leader's zxid once every write was answered (and the write
	// sessions closed): what the follower must reach.
	_, target, err := leaderIndex(rest)
	if err != nil {
		return err
	}
	t0 := time.Now()
	pid, err := u.start(spec)
	if err != nil {
		return err
	}
	u.pids[side][f] = pid
	serving := make(chan float64, 1)
	go func() {
		for time.Since(t0) < 5*time.Minute {
			if c, err := connectWithin(servers[f], 250*time.Millisecond); err == nil {
				_, _, err := c.Get("/")
				c.Close()
				if err == nil {
					serving <- time.Since(t0).Seconds()
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		serving <- -1
	}()
	for {
		if _, z, err := srvr(servers[f]); err == nil && z >= target {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return fmt.Errorf("%s not caught up after 5 minutes", servers[f])
		}
		time.Sleep(20 * time.Millisecond)
	}
	u.caughtUpS[side] = time.Since(t0).Seconds()
	u.servingS[side] = <-serving
	fmt.Fprintf(os.Stderr, "%-10s follower %s stopped for %d writes (%.1fs), restarted: serving after %.2fs, caught up after %.2fs\n",
		u.names[side], servers[f], n, u.writesS[side], u.servingS[side], u.caughtUpS[side])
	return nil
}

// connectWithin opens a session on server, giving up after d.
func connectWithin(server string, d time.Duration) (*zk.Conn, error) {
	conn, events, err := zk.Connect([]string{server}, 10*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(d)
	defer t.Stop()
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
		case <-t.C:
			conn.Close()
			return nil, errors.New("no session")
		}
	}
}

// print writes the memory and catch-up table.
func (u *usageFigures) print() {
	if !u.on {
		return
	}
	fmt.Printf("\nmemory (resident MB, each server) and a follower's catch-up (seconds after its restart); one run each\n\n")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%s\t%s\tcoordd/%s\t\n", u.names[0], u.names[1], u.names[0])
	for _, m := range []struct {
		name string
		v    [2][]resident
	}{{"RSS idle", u.idleMB}, {fmt.Sprintf("RSS with %d znodes", u.c.memZnodes), u.loadedMB}} {
		for k, name := range []string{m.name, "  anonymous (RssAnon)", "  file pages (RssFile)"} {
			a, b := part(m.v[0], k), part(m.v[1], k)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t\n", name, mbList(a), mbList(b), maxOf(b)/maxOf(a))
		}
	}
	fmt.Fprintf(tw, "load %d znodes (s)\t%.1f\t%.1f\t%.2f\t\n", u.c.memZnodes, u.loadS[0], u.loadS[1], u.loadS[1]/u.loadS[0])
	if u.c.catchupWrites > 0 {
		fmt.Fprintf(tw, "serving after restart (s)\t%.2f\t%.2f\t%.2f\t\n", u.servingS[0], u.servingS[1], u.servingS[1]/u.servingS[0])
		fmt.Fprintf(tw, "caught up %d writes (s)\t%.2f\t%.2f\t%.2f\t\n", u.c.catchupWrites, u.caughtUpS[0], u.caughtUpS[1], u.caughtUpS[1]/u.caughtUpS[0])
	}
	tw.Flush()
}

// part picks figure k (totalRSS, anonRSS, fileRSS) of each server's.
func part(v []resident, k int) []float64 {
	out := make([]float64, len(v))
	for i, r := range v {
		out[i] = r[k]
	}
	return out
}

func mbList(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, "/")
}

func maxOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Max(v)
}

// procSpec is how a server was started: enough to start it again alike.
type procSpec struct {
	args []string
	dir  string
	env  []string
	log  string // where its standard output and error went
}

// stopProc records how process pid was started, sends it SIGTERM and waits
// until it is gone (SIGKILL after 30 seconds).
func stopProc(pid int) (*procSpec, error) { return signalProc(pid, syscall.SIGTERM) }

// signalProc records how process pid was started, sends it sig and waits
// until it is gone (SIGKILL after 30 seconds).
func signalProc(pid int, sig syscall.Signal) (*procSpec, error) {
	proc := fmt.Sprintf("/proc/%d", pid)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return nil, err
	}
	env, err := os.ReadFile(proc + "/environ")
	if err != nil {
		return nil, err
	}
	dir, err := os.Readlink(proc + "/cwd")
	if err != nil {
		return nil, err
	}
	log, err := os.Readlink(proc + "/fd/1")
	if err != nil || !filepath.IsAbs(log) {
		log = os.DevNull
	}
	spec := &procSpec{args: split0(cmdline), dir: dir, env: split0(env), log: log}
	if len(spec.args) == 0 {
		return nil, fmt.Errorf("process %d has no command line", pid)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return spec, nil
}

func split0(b []byte) []string {
	var out []string
	for _, f := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		if len(f) > 0 {
			out = append(out, string(f))
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// restartedProc is a server this tool started again.
type restartedProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// start starts a stopped server again as spec says. The process is this
// tool's child: it gets SIGKILL if this tool dies (Pdeathsig, which follows
// the thread that started it, so that thread stays locked and waits for
// it), and stopRestarted ends it. Its pid is appended to --pid-file.
func (u *usageFigures) start(spec *procSpec) (int, error) {
	out, err := os.OpenFile(spec.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(spec.args[0], spec.args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = spec.dir, spec.env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	p := &restartedProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // for good: Pdeathsig follows this thread
		defer close(p.done)
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		out.Close()
	}()
	if err := <-started; err != nil {
		return 0, err
	}
	u.mu.Lock()
	u.restarted = append(u.restarted, p)
	u.mu.Unlock()
	if u.c.pidFile != "" {
		if f, err := os.OpenFile(u.c.pidFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			fmt.Fprintln(f, cmd.Process.Pid)
			f.Close()
		}
	}
	return cmd.Process.Pid, nil
}

// stopRestarted ends the servers this tool started (SIGTERM, SIGKILL after
// 10 seconds).
func (u *usageFigures) stopRestarted() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, p := range u.restarted {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	u.restarted = nil
}
