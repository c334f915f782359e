package chaos

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
)

var (
	flagSeed     = flag.Int64("chaos.seed", 0, "fault schedule seed (0: random for long runs, 1 for the short pass)")
	flagDuration = flag.Duration("chaos.duration", 0, "how long faults are injected (0: the short pass of make test)")
	flagNodes    = flag.Int("chaos.nodes", 0, "cluster size, 3 or 5 (default 3)")
	flagOut      = flag.String("chaos.out", "", "where failures save histories and logs (default ./chaos-out/<seed>)")
	flagNoNet    = flag.Bool("chaos.nonet", false, "skip partitions and slow links even where iptables works")
	flagCheckFor = flag.Duration("chaos.check-timeout", 0, "porcupine's time limit (default 30s, 2m for long runs)")
)

// tlsRotateEvery is how often a TLS run issues new server and peer
// certificates.
const tlsRotateEvery = 15 * time.Second

// shortDuration is the fault phase of the short pass (make test): about
// one step of each of the eight fault kinds (seed 1 reaches all of them);
// with the build, start-up, final checks and shutdown it takes about 60s.
const shortDuration = 48 * time.Second

type config struct {
	seed     int64
	duration time.Duration
	nodes    int
	short    bool
	outDir   string
	checkFor time.Duration
	tls      bool
	acl      bool
}

func getConfig() config {
	cfg := config{seed: *flagSeed, duration: *flagDuration, nodes: *flagNodes, outDir: *flagOut, checkFor: *flagCheckFor, tls: *flagTLS, acl: *flagACL}
	if cfg.duration <= 0 {
		cfg.short = true
		cfg.duration = shortDuration
		if cfg.seed == 0 {
			cfg.seed = 1
		}
	}
	if cfg.seed == 0 {
		cfg.seed = time.Now().UnixNano() % 1000000
	}
	if cfg.nodes == 0 {
		cfg.nodes = 3
	}
	if cfg.outDir == "" {
		cfg.outDir = filepath.Join("chaos-out", fmt.Sprint(cfg.seed))
	}
	if cfg.checkFor <= 0 {
		cfg.checkFor = 30 * time.Second
		if !cfg.short {
			cfg.checkFor = 2 * time.Minute
		}
	}
	return cfg
}

// TestChaosHelperClient is not a test: it is the body of a client process
// that the sessions workload starts and SIGKILLs. It opens a session,
// creates the ephemeral named in its environment, prints
// "ready <session> <timeout ms>" and waits to be killed (at most 5 minutes).
func TestChaosHelperClient(t *testing.T) {
	if os.Getenv("COORDD_CHAOS_HELPER") != "1" {
		t.Skip("helper process for TestChaos")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	timeout, _ := time.ParseDuration(os.Getenv("COORDD_SESSION_TIMEOUT"))
	tlsOpts, err := helperClientOptions()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	c, err := client.Connect(ctx, strings.Split(os.Getenv("COORDD_SERVERS"), ","),
		append(tlsOpts, client.WithSessionTimeout(timeout), client.WithDialTimeout(time.Second))...)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	acl, err := helperAuth(ctx, c)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if _, err := c.Create(ctx, os.Getenv("COORDD_EPHEMERAL"), nil, client.CreateMode{Kind: client.Ephemeral, ACL: acl}); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("ready %d %d\n", c.SessionID(), c.SessionTimeout().Milliseconds())
	time.Sleep(5 * time.Minute)
	os.Exit(0)
}

// workload is one of the concurrent workloads.
type workload interface {
	name() string
	counters() *counters
	setup(ctx context.Context, cl *client.Client) error
	run(ctx context.Context)
}

// TestChaos runs the whole suite once: cluster, nemesis, workloads,
// checkers, summary.
func TestChaos(t *testing.T) {
	cfg := getConfig()
	if cfg.nodes != 3 && cfg.nodes != 5 {
		t.Fatalf("-chaos.nodes=%d: want 3 or 5", cfg.nodes)
	}
	if testing.Short() && !cfg.short {
		t.Skip("long chaos run skipped in -short mode")
	}
	var logMu sync.Mutex
	start := time.Now()
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		t.Logf("[%7.2fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	mode := "long run"
	if cfg.short {
		mode = "short pass (no -chaos.duration)"
	}
	tlsNote, tlsArg := "", ""
	if cfg.tls {
		tlsNote, tlsArg = ", TLS on both ports (certificates rotated during the run)", " TLS=1"
	}
	if cfg.acl {
		tlsNote, tlsArg = tlsNote+", ACLs on every workload node (clients authenticated, an unauthenticated observer)", tlsArg+" ACL=1"
	}
	logf("chaos: seed %d, %d nodes, %v of faults, %s%s, %s; reproduce with: make chaos SEED=%d DURATION=%v NODES=%d%s",
		cfg.seed, cfg.nodes, cfg.duration, mode, tlsNote, raftLogDesc(), cfg.seed, cfg.duration, cfg.nodes, tlsArg)

	work := t.TempDir()
	ctx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()

	// Cleanup runs once: at the end, on a failure, or on SIGINT/SIGTERM.
	var cleanups []func()
	var cleanMu sync.Mutex
	var cleanOnce sync.Once
	addCleanup := func(f func()) { cleanMu.Lock(); cleanups = append(cleanups, f); cleanMu.Unlock() }
	cleanup := func() {
		cleanOnce.Do(func() {
			cleanMu.Lock()
			defer cleanMu.Unlock()
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		})
	}
	defer cleanup()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "chaos: %v: killing the servers and removing the iptables rules\n", s)
			cancelAll()
			cleanup()
			os.Exit(2)
		case <-ctx.Done():
		}
	}()

	slot, lock, err := claimSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addCleanup(lock.release)

	bin := filepath.Join(work, "coordd")
	goTool := "go"
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		goTool = p
	}
	bstart := time.Now()
	if out, err := exec.Command(goTool, "build", "-o", bin, "github.com/coordd/coordd/cmd/coordd").CombinedOutput(); err != nil {
		t.Fatalf("building coordd: %v\n%s", err, out)
	}
	logf("built coordd in %v", time.Since(bstart).Round(time.Millisecond))

	c := newProcCluster(t, bin, work, slot, cfg.nodes, logf)
	addCleanup(c.stopAll)
	if cfg.tls {
		if err := c.enableTLS(filepath.Join(work, "tls")); err != nil {
			t.Fatal(err)
		}
		logf("TLS on the client and peer ports, client certificates required; files in %s", c.tls.dir)
	}
	if cfg.acl {
		if err := c.enableACL(); err != nil {
			t.Fatal(err)
		}
		logf("ACLs: workload nodes under %v grant everything to digest %s only; checkers are the --superdigest user %s; an unauthenticated observer probes them", protectedRoots, aclUser, superUser)
	}

	nm := &nemesis{steps: plan(cfg.seed, cfg.nodes, cfg.duration), injected: map[faultKind]int{}, skipped: map[faultKind]int{}}
	noNet := iptablesUsable()
	if *flagNoNet {
		noNet = "-chaos.nonet"
	}
	if noNet == "" {
		cleanStaleRules(logf)
		ipt := newIptables(logf)
		addCleanup(func() {
			if err := ipt.removeAll(); err != nil {
				logf("removing iptables rules: %v", err)
			}
		})
		nm.net = &network{c: c, ipt: ipt}
		nm.noSlow = natUsable()
		if nm.noSlow == "" {
			px, err := startProxy(c, ipt, logf)
			if err == nil {
				addCleanup(px.close)
				nm.net.px = px
			} else {
				nm.noSlow = fmt.Sprintf("slow-link proxy: %v", err)
			}
		}
		logf("network faults: iptables partitions on 127.0.%d.0/24 (rules tagged %s)", slot, ipt.tag)
		if nm.noSlow != "" {
			logf("SLOW LINKS DISABLED: %s -- slow-link faults are SKIPPED in this run", nm.noSlow)
		} else {
			logf("slow links: every peer link goes through the in-test delaying proxy")
		}
	} else {
		nm.noNet = noNet
		logf("NETWORK FAULTS DISABLED: %s -- partitions and slow links are SKIPPED in this run (kills and pauses still run)", noNet)
	}

	for i := range c.nodes {
		if err := c.start(i); err != nil {
			t.Fatalf("starting node %d: %v", i+1, err)
		}
	}
	e := &env{c: c, start: time.Now(), tl: &timeline{}, outDir: cfg.outDir, logf: logf}
	addCleanup(e.closeClients)
	saveLogs := func() {
		if err := os.MkdirAll(cfg.outDir, 0o755); err != nil {
			return
		}
		for _, n := range c.nodes {
			_ = copyFile(n.logPath, filepath.Join(cfg.outDir, filepath.Base(n.logPath)))
		}
		logf("server logs saved in %s", cfg.outDir)
	}
	if ok, why := c.waitHealthy(ctx, 60*time.Second); !ok {
		saveLogs()
		t.Fatalf("cluster of %d never became healthy: %s", cfg.nodes, why)
	}
	logf("cluster of %d healthy: servers %v", cfg.nodes, c.servers())

	steps := nm.steps
	var lines []string
	for _, s := range steps {
		lines = append(lines, "  "+s.String())
	}
	logf("fault schedule for seed %d (%d steps):\n%s", cfg.seed, len(steps), strings.Join(lines, "\n"))
	nm.e = e

	// Workloads.
	regs := newRegisters(e, cfg.seed, 4, 3)
	seq := newSeqset(e, cfg.seed, 2)
	lk := newLockWork(e, cfg.seed, 3, 3)
	lk.longestCut = longestCut(nm.steps)
	ses := newSessionsWork(e, cfg.seed, 2)
	wat := newWatchWork(e, cfg.seed, 2, 3)
	kz := newZKRenumber(regs, cfg.seed, 2)
	workloads := []workload{regs, newZKRegisters(regs, 1), kz, seq, lk, ses, wat}
	var aw *aclWork
	if cfg.acl {
		aw = newACLWork(e, cfg.seed, ses)
		workloads = append(workloads, aw)
	}
	setupCl, _, err := e.newClient(ctx, "setup")
	if err != nil {
		saveLogs()
		t.Fatal(err)
	}
	for _, w := range workloads {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := w.setup(sctx, setupCl)
		cancel()
		if err != nil {
			saveLogs()
			t.Fatalf("setting up %s: %v", w.name(), err)
		}
	}

	runCtx, stopRun := context.WithTimeout(ctx, cfg.duration)
	defer stopRun()
	var wg sync.WaitGroup
	for _, w := range workloads {
		wg.Add(1)
		go func(w workload) { defer wg.Done(); w.run(runCtx) }(w)
	}
	nemDone := make(chan struct{})
	go func() { defer close(nemDone); nm.run(runCtx) }()
	if c.tls != nil {
		wg.Add(1)
		go func() { defer wg.Done(); c.rotateTLSEvery(runCtx, tlsRotateEvery, logf) }()
	}
	<-runCtx.Done()
	<-nemDone
	logf("fault phase over; waiting for the workloads to stop")
	wdone := make(chan struct{})
	go func() { wg.Wait(); close(wdone) }()
	select {
	case <-wdone:
	case <-time.After(time.Minute):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("workloads did not stop within a minute of the end of the run; goroutines:\n%s", buf)
	}

	// Quiesce, then check.
	healthyOK, why := c.waitHealthy(ctx, 60*time.Second)
	if healthyOK {
		e.tl.healthyAt(e.since())
	}
	ses.waitDead(helperSessionTimeout + serverTiming.Tick + 15*time.Second)
	checkCl, _, err := e.newAdminClient(ctx, "checker")
	if err != nil {
		saveLogs()
		t.Fatalf("checker client: %v", err)
	}
	verdicts := map[string]*verdict{}
	order := []string{"registers", "zk-renumber", "seqset", "lock", "sessions", "watches", "order", "cluster"}
	if aw != nil {
		order = append(order, "acl")
	}
	for _, n := range order {
		verdicts[n] = &verdict{pass: true}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	regs.check(cctx, verdicts["registers"], cfg.checkFor)
	kz.check(cctx, checkCl, verdicts["zk-renumber"])
	seq.check(cctx, checkCl, verdicts["seqset"])
	lk.check(cctx, checkCl, verdicts["lock"])
	ses.check(cctx, checkCl, verdicts["sessions"])
	wat.check(cctx, checkCl, verdicts["watches"])
	checkOrder(e, verdicts["order"])
	if aw != nil {
		aw.check(cctx, checkCl, verdicts["acl"])
	}
	cv := verdicts["cluster"]
	if !healthyOK {
		cv.failf("cluster not healthy 60s after the last fault: %s", why)
	}
	for _, u := range nm.unhealed {
		cv.notef("%s", u)
	}
	if dead := c.exitedUnexpectedly(); len(dead) > 0 {
		cv.failf("servers exited on their own: %v", dead)
	}
	checkConverged(cctx, c, checkCl, cv)

	// Summary.
	var sb strings.Builder
	fmt.Fprintf(&sb, "==== chaos summary: seed %d, %d nodes, %v of faults (%s%s), run %v ====\n", cfg.seed, cfg.nodes, cfg.duration, mode, tlsNote, time.Since(start).Round(time.Second))
	fmt.Fprintf(&sb, "timing: tick %v, heartbeat %v, election %v, client sessions %v, killed clients %v\n",
		serverTiming.Tick, serverTiming.Heartbeat, serverTiming.Election, workloadSessionTimeout, helperSessionTimeout)
	fmt.Fprintf(&sb, "operations:\n")
	for _, w := range workloads {
		fmt.Fprintf(&sb, "  %-10s %s\n", w.name(), w.counters())
	}
	fmt.Fprintf(&sb, "  %-10s %s\n", "lock-acq", &lk.acq)
	fmt.Fprintf(&sb, "  %-10s %s (go-zookeeper's Lock; its writes: %s; lock-delay %v)\n", "zklock-acq", &lk.zkAcq, &lk.zkCnt, lk.lockDelay)
	fmt.Fprintf(&sb, "faults:")
	for _, k := range allKinds {
		fmt.Fprintf(&sb, " %s=%d", k, nm.injected[k])
		if nm.skipped[k] > 0 {
			fmt.Fprintf(&sb, "(+%d SKIPPED)", nm.skipped[k])
		}
	}
	sb.WriteString("\n")
	if nm.noNet != "" {
		fmt.Fprintf(&sb, "network faults skipped: %s\n", nm.noNet)
	} else if nm.noSlow != "" {
		fmt.Fprintf(&sb, "slow links skipped: %s\n", nm.noSlow)
	}
	failed := false
	sb.WriteString("verdicts:\n")
	for _, n := range order {
		v := verdicts[n]
		res := "PASS"
		switch {
		case !v.pass:
			res, failed = "FAIL", true
		case v.inconclusive:
			res = "INCONCLUSIVE"
		}
		fmt.Fprintf(&sb, "  %-10s %s\n", n, res)
		for _, note := range v.notes {
			fmt.Fprintf(&sb, "      %s\n", note)
		}
		for _, p := range v.problems {
			fmt.Fprintf(&sb, "      ! %s\n", p)
		}
	}
	t.Log("\n" + sb.String())
	if failed {
		saveLogs()
		_ = os.WriteFile(filepath.Join(cfg.outDir, "summary.txt"), []byte(sb.String()), 0o644)
		t.Errorf("chaos run with seed %d failed (see the summary above and %s)", cfg.seed, cfg.outDir)
	}
}

// checkOrder collects the per-session zxid order violations.
func checkOrder(e *env, v *verdict) {
	e.mu.Lock()
	obs := append([]*zxObserver(nil), e.observers...)
	e.mu.Unlock()
	var msgs, streams, stale int64
	for _, o := range obs {
		o.mu.Lock()
		msgs += o.messages
		streams += int64(o.streams)
		stale += o.stale
		for _, x := range o.violations {
			v.failf("%s", x)
		}
		o.mu.Unlock()
	}
	v.notef("%d sessions, %d streams (%d moves), %d messages checked, %d from replaced streams ignored",
		len(obs), streams, streams-int64(len(obs)), msgs, stale)
}

// checkConverged: after the run every server has applied the same index
// and holds the same number of znodes and sessions.
func checkConverged(ctx context.Context, c *procCluster, cl *client.Client, v *verdict) {
	_ = cl.Sync(ctx, "/")
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		sts := c.statuses(2 * time.Second)
		var applied, znodes []int64
		ok := true
		for _, st := range sts {
			if st == nil {
				ok = false
				break
			}
			applied = append(applied, st.Applied)
			znodes = append(znodes, st.Znodes)
		}
		if ok && allSame(applied) && allSame(znodes) {
			v.notef("all %d servers at applied index %d with %d znodes", len(sts), applied[0], znodes[0])
			return
		}
		last = fmt.Sprintf("applied %v, znodes %v", applied, znodes)
		time.Sleep(250 * time.Millisecond)
	}
	v.failf("servers did not converge within 20s: %s", last)
}

func allSame(xs []int64) bool {
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return len(s) > 0 && s[0] == s[len(s)-1]
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	defer out.Close()
	_, err = io.Copy(out, in)
	return err
}
