package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
)

// TestHelperClientProcess is not a test: it is the body of a client process
// that the session tests start and SIGKILL. It connects, creates the
// ephemerals named in its environment, prints "ready <session>" and waits
// to be killed.
func TestHelperClientProcess(t *testing.T) {
	if os.Getenv("COORDD_HELPER_CLIENT") != "1" {
		return
	}
	ctx := context.Background()
	servers := strings.Split(os.Getenv("COORDD_SERVERS"), ",")
	timeout, _ := time.ParseDuration(os.Getenv("COORDD_SESSION_TIMEOUT"))
	c, err := client.Connect(ctx, servers, client.WithSessionTimeout(timeout))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for _, p := range strings.Split(os.Getenv("COORDD_EPHEMERALS"), ",") {
		if _, err := c.Create(ctx, p, nil, client.CreateMode{Kind: client.Ephemeral}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
	}
	fmt.Printf("ready %d\n", c.SessionID())
	select {}
}

// startClientProcess runs TestHelperClientProcess in a child process.
func startClientProcess(t *testing.T, servers []string, timeout time.Duration, ephemerals ...string) (*exec.Cmd, int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperClientProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), "COORDD_HELPER_CLIENT=1",
		"COORDD_SERVERS="+strings.Join(servers, ","),
		"COORDD_SESSION_TIMEOUT="+timeout.String(),
		"COORDD_EPHEMERALS="+strings.Join(ephemerals, ","))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("client process: %v", err)
	}
	var id int64
	if _, err := fmt.Sscanf(line, "ready %d", &id); err != nil {
		t.Fatalf("client process said %q", line)
	}
	return cmd, id
}

// TestEphemeralsVanishAfterClientKilled: a SIGKILLed client's ephemerals
// disappear on every server within timeout + a tick, and not before the
// timeout (less the ping interval) has run.
func TestEphemeralsVanishAfterClientKilled(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	if _, err := obs.Create(ctx, "/e", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	const timeout = 2 * time.Second
	proc, id := startClientProcess(t, c.Servers(), timeout, "/e/a", "/e/b")
	st, ok, err := obs.Exists(ctx, "/e/a")
	if err != nil || !ok || st.EphemeralOwner != id {
		t.Fatalf("ephemeral before kill: %+v %v %v (want owner %d)", st, ok, err, id)
	}
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var gone time.Duration
	Eventually(t, timeout+5*time.Second, "ephemerals to vanish", func() bool {
		kids, _, err := obs.Children(ctx, "/e")
		if err == nil && len(kids) == 0 {
			gone = time.Since(killed)
			return true
		}
		return false
	})
	tick := c.Members[0].Cfg.Tick
	t.Logf("ephemerals gone %v after the kill (timeout %v, tick %v)", gone.Round(time.Millisecond), timeout, tick)
	if gone < timeout-timeout/3-tick {
		t.Fatalf("ephemerals vanished after %v, before the session timeout %v could have run", gone, timeout)
	}
	if gone > timeout+tick+time.Second {
		t.Fatalf("ephemerals vanished only after %v (timeout %v + tick %v)", gone, timeout, tick)
	}
	// Gone on every server, and the session with them.
	last := obs.LastZxid()
	c.WaitConverged(5*time.Second, last)
	for _, m := range c.Members {
		r := connect(t, m.Cfg.ClientAddr)
		if _, ok, _ := r.Exists(ctx, "/e/b"); ok {
			t.Fatalf("server %s still has /e/b", m.ID)
		}
	}
}

// TestLeaderKillExpiresNoHealthySession: stopping the leader expires no
// session whose client is alive; their ephemerals stay. Checked on the
// replicated state after two session timeouts (each client writes through
// its session, then each ephemeral is read linearizably), so that no late
// expiry event can slip past.
func TestLeaderKillExpiresNoHealthySession(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	// Clients on every server (each may fail over anywhere), at least one
	// of them on the leader.
	leaderAddr := c.Members[c.LeaderIndex()].Cfg.ClientAddr
	var clients []*client.Client
	onLeader := -1
	for i := 0; i < 20 && (len(clients) < 3 || onLeader < 0); i++ {
		cl := connect(t, c.Servers()...)
		if cl.Server() == leaderAddr && onLeader < 0 {
			onLeader = len(clients)
		}
		if _, err := cl.Create(ctx, fmt.Sprintf("/alive%d", len(clients)), nil, client.CreateMode{Kind: client.Ephemeral}); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
	}
	if onLeader < 0 {
		t.Fatal("no client landed on the leader in 20 tries")
	}
	old := c.LeaderIndex()
	c.Stop(old)
	c.WaitLeader(10 * time.Second)
	// Two full session timeouts under the new leader: time enough for it to
	// expire a session it wrongly took for silent. An ephemeral vanishing
	// meanwhile fails the test at once (a lagging server can show a deleted
	// node, never a missing one that exists).
	deadline := time.Now().Add(2 * clients[0].SessionTimeout())
	obs := connect(t, c.Servers()...)
	for time.Now().Before(deadline) {
		for i := range clients {
			if _, ok, err := obs.Exists(ctx, fmt.Sprintf("/alive%d", i)); err == nil && !ok {
				t.Fatalf("ephemeral of live client %d vanished after the leader stopped", i)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Then the replicated state decides, not the clients' expiry events,
	// which could arrive after any window. Each client writes through its
	// own session (an expired session cannot); every write goes through the
	// leader after any CloseSession it proposed before, so once they have
	// applied, a linearizable read (SyncGet) of each ephemeral shows whether
	// its session was closed.
	for i, cl := range clients {
		p := fmt.Sprintf("/alive%d", i)
		if _, err := cl.Set(ctx, p, []byte("still here"), -1); err != nil {
			what := ""
			if i == onLeader {
				what = " (the client of the stopped server)"
			}
			t.Fatalf("live client %d%s writing its ephemeral %s: %v", i, what, p, err)
		}
	}
	for i, cl := range clients {
		p := fmt.Sprintf("/alive%d", i)
		data, st, err := obs.SyncGet(ctx, p)
		switch {
		case errors.Is(err, client.ErrNoNode):
			t.Errorf("live client %d (session %#x): its ephemeral %s is gone: its session was closed", i, cl.SessionID(), p)
		case err != nil:
			t.Fatalf("reading %s: %v", p, err)
		case st.EphemeralOwner != cl.SessionID() || string(data) != "still here":
			t.Errorf("%s: owner %#x, data %q; want live client %d's session %#x and its write", p, st.EphemeralOwner, data, i, cl.SessionID())
		}
	}
}

// TestClientResumesOnAnotherServer: when its server stops, the client
// resumes the same session elsewhere, ephemerals intact, never seeing an
// older state than before.
func TestClientResumesOnAnotherServer(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	id := cl.SessionID()
	if _, err := cl.Create(ctx, "/mine", nil, client.CreateMode{Kind: client.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	before := cl.LastZxid()
	var stopped int
	for i, m := range c.Members {
		if m.Cfg.ClientAddr == cl.Server() {
			stopped = i
		}
	}
	c.Stop(stopped)
	c.WaitLeader(10 * time.Second)
	st, ok, err := cl.Exists(ctx, "/mine")
	if err != nil || !ok || st.EphemeralOwner != id {
		t.Fatalf("after failover: %+v %v %v", st, ok, err)
	}
	if cl.SessionID() != id || cl.Server() == c.Members[stopped].Cfg.ClientAddr {
		t.Fatalf("session %d on %s, want %d elsewhere", cl.SessionID(), cl.Server(), id)
	}
	if cl.LastZxid() < before {
		t.Fatalf("zxid went back from %d to %d", before, cl.LastZxid())
	}
}

// TestInFlightWritesExactlyOnceAcrossLeaderKill: writes in flight while the
// leader stops are applied exactly once: versions equal the acknowledged
// sets, sequential children equal the acknowledged creates.
func TestInFlightWritesExactlyOnceAcrossLeaderKill(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	setup := connect(t, c.Servers()...)
	const workers = 6
	for w := 0; w < workers; w++ {
		if _, err := setup.Create(ctx, fmt.Sprintf("/ctr%d", w), nil, client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := setup.Create(ctx, "/seq", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	var sets, creates [workers]int
	var wg sync.WaitGroup
	var started atomic.Int64
	for w := 0; w < workers; w++ {
		cl := connect(t, c.Servers()...)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				_, err := cl.Set(wctx, fmt.Sprintf("/ctr%d", w), []byte(fmt.Sprint(i)), -1)
				if err == nil {
					sets[w]++
					_, err = cl.Create(wctx, "/seq/s-", nil, client.CreateMode{Sequential: true})
					if err == nil {
						creates[w]++
					}
				}
				cancel()
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				started.Add(1)
			}
		}(w)
	}
	c.Eventually(10*time.Second, "writes under way", func() bool { return started.Load() > 40 })
	c.Stop(c.LeaderIndex())
	wg.Wait()
	totalCreates := 0
	for w := 0; w < workers; w++ {
		_, st, err := setup.Get(ctx, fmt.Sprintf("/ctr%d", w))
		if err != nil {
			t.Fatal(err)
		}
		if int(st.Version) != sets[w] {
			t.Fatalf("/ctr%d has version %d after %d acknowledged sets", w, st.Version, sets[w])
		}
		totalCreates += creates[w]
	}
	kids, _, err := setup.Children(ctx, "/seq")
	if err != nil || len(kids) != totalCreates {
		t.Fatalf("/seq has %d children after %d acknowledged creates (%v)", len(kids), totalCreates, err)
	}
}

// TestMinorityPartition: a follower cut off from the majority serves no
// write; its client moves to the majority with the same session, which is
// never both alive and expired.
func TestMinorityPartition(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	f := c.Follower()
	fAddr := c.Members[f].Cfg.ClientAddr
	// Connect to the follower first, with the others as fallbacks.
	cl := connect(t, fAddr)
	_ = cl
	id := cl.SessionID()
	if _, err := cl.Create(ctx, "/p", nil, client.CreateMode{Kind: client.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	mover := connect(t, append([]string{fAddr}, c.Servers()...)...)
	var expired atomic.Bool
	go func() {
		for ev := range mover.States() {
			if ev.State == client.StateExpired {
				expired.Store(true)
			}
		}
	}()
	c.Isolate(f)
	isolated := c.Members[f].Node()
	// The mover's writes succeed: through the majority.
	var wrote string
	c.Eventually(15*time.Second, "a write from the client of the isolated server", func() bool {
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		p, err := mover.Create(wctx, "/during-", nil, client.CreateMode{Sequential: true})
		wrote = p
		return err == nil
	})
	if mover.Server() == fAddr {
		t.Fatalf("write acknowledged by the isolated server")
	}
	// It may still apply what committed before the cut, but never the
	// write made after it.
	if got, during := isolated.FSM().AppliedIndex(), mover.LastZxid(); got >= during {
		t.Fatalf("isolated server applied index %d while cut off, the write made during the cut has zxid %d", got, during)
	}
	if expired.Load() {
		t.Fatal("moving client's session expired")
	}
	// The client that could only reach the isolated server loses its
	// session once it is expired by the majority, and is told so.
	c.Eventually(15*time.Second, "the stranded session to expire", func() bool { return cl.State() == client.StateExpired })
	c.Net.Heal()
	c.WaitConverged(15*time.Second, mover.LastZxid())
	r := connect(t, fAddr)
	if _, ok, _ := r.Exists(ctx, wrote); !ok {
		t.Fatalf("healed server lacks %s", wrote)
	}
	// The client gave its session up on its own clock, when no server
	// accepted it within its timeout (client.go); the leader expires it on
	// its own, which may come after the mover's last write: the ephemeral
	// goes then, and must go.
	c.Eventually(15*time.Second, fmt.Sprintf("expired session %d's ephemeral to go", id), func() bool {
		_, ok, err := r.Exists(ctx, "/p")
		return err == nil && !ok
	})
	_, _, err := cl.Get(ctx, "/")
	if !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("stranded client after expiry: %v", err)
	}
}

// TestSessionsSurviveSnapshotAndRestart: the session table is in snapshots
// and survives a whole-cluster restart; the client resumes its session.
func TestSessionsSurviveSnapshotAndRestart(t *testing.T) {
	c := New(t, 3, Options{Tick: 500 * time.Millisecond})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	id := cl.SessionID()
	if _, err := cl.Create(ctx, "/eph", nil, client.CreateMode{Kind: client.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	c.WaitConverged(5*time.Second, cl.LastZxid())
	for _, m := range c.Members {
		if err := m.Node().Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	c.StopAll()
	for i := range c.Members {
		c.Start(i)
	}
	c.WaitLeader(10 * time.Second)
	st, ok, err := cl.Exists(ctx, "/eph")
	if err != nil || !ok || st.EphemeralOwner != id || cl.SessionID() != id {
		t.Fatalf("after restart: %+v %v %v session %d (want %d)", st, ok, err, cl.SessionID(), id)
	}
}
