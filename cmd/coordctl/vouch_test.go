package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/test/cluster"
)

// TestLockKilledBeforeTakeover: coordctl lock runs a command that ignores
// SIGTERM, with --grace 10s, on a server that is then cut off from the
// others (it goes on answering pings for seconds: a 2s election timeout).
// The session is suspended before the leader can expire it, and coordctl
// kills the command (SIGTERM, then SIGKILL once the grace, capped by the
// time left before the session's earliest expiry, runs out) before a
// waiter on the other servers takes the lock. It warned at the start that
// --grace 10s cannot be honoured.
func TestLockKilledBeforeTakeover(t *testing.T) {
	needExitStatus(t)
	c := cluster.New(t, 3, cluster.Options{ElectionTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := c.Follower()
	const path = "/t/lock/killed"
	dir := t.TempDir()
	pidFile, marks := filepath.Join(dir, "pid"), filepath.Join(dir, "marks")
	script := `trap 'echo term >> "$2"' TERM; echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; while :; do sleep 1 & wait $!; done`
	b := &background{sig: make(chan os.Signal, 1), done: make(chan int, 1)}
	go func() {
		b.done <- runWith([]string{"--servers", c.Members[f].Cfg.ClientAddr, "--session-timeout", "6s", "--timeout", "2s",
			"lock", "--grace", "10s", path, "--", "sh", "-c", script, "sh", pidFile, marks}, strings.NewReader(""), &b.stdout, &b.stderr, b.sig)
	}()
	t.Cleanup(func() {
		select {
		case b.sig <- syscall.SIGTERM:
		default:
		}
		b.wait(t)
	})
	waitFile(t, pidFile, "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.stderr.String(), "warning: --grace 10s exceeds the 100ms") {
		t.Errorf("no warning about --grace; stderr:\n%s", b.stderr.String())
	}

	var others []string
	for i, m := range c.Members {
		if i != f {
			others = append(others, m.Cfg.ClientAddr)
		}
	}
	wcl, err := client.Connect(ctx, others, client.WithSessionTimeout(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close(context.Background())
	waiter := lockrecipe.NewMutex(lockrecipe.NewSession(wcl), path)
	acquired := make(chan time.Time, 1)
	go func() {
		if _, err := waiter.Lock(ctx); err == nil {
			acquired <- time.Now()
		}
	}()
	cluster.Eventually(t, 10*time.Second, "the waiter in line", func() bool {
		kids, _, _ := wcl.Children(ctx, path)
		return len(kids) == 2
	})

	c.Isolate(f)
	var killed time.Time
	cluster.Eventually(t, 20*time.Second, "CMD to be killed", func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			killed = time.Now()
			return true
		}
		return false
	})
	var took time.Time
	select {
	case took = <-acquired:
	case <-ctx.Done():
		t.Fatal("the waiter never acquired")
	}
	if !killed.Before(took) {
		t.Fatalf("CMD was killed %v after the waiter acquired; stderr:\n%s", killed.Sub(took), b.stderr.String())
	}
	t.Logf("CMD killed %v before the waiter acquired", took.Sub(killed).Round(time.Millisecond))
	if code := b.wait(t); code != exitLost {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitLost, b.stderr.String())
	}
	if got := readFile(marks); got != "term\n" {
		t.Errorf("CMD saw %q, want one SIGTERM", got)
	}
	for _, want := range []string{"coordctl: lock lost\n", "coordctl: the session may expire soon: SIGKILL in "} {
		if !strings.Contains(b.stderr.String(), want) {
			t.Errorf("no %q in stderr:\n%s", want, b.stderr.String())
		}
	}
}

// TestShellReportsSuspension: the shell says when its session is suspended
// (its only server stopped: the leader confirms nothing any more), after
// the disconnection.
func TestShellReportsSuspension(t *testing.T) {
	c := cluster.New(t, 1, cluster.Options{})
	pr, pw := io.Pipe()
	defer pw.Close()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	x := newCLI(pr, &stdout, &stderr, make(chan os.Signal, 1))
	go func() {
		done <- x.main([]string{"--servers", c.Members[0].Cfg.ClientAddr, "--session-timeout", "4s", "--timeout", "2s"})
	}()
	io.WriteString(pw, "create /s\n")
	if !poll(10*time.Second, func() bool { return strings.Contains(stdout.String(), "/s") }) {
		t.Fatalf("create did not run; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	c.Stop(0)
	if !poll(15*time.Second, func() bool { return strings.Contains(stderr.String(), "suspended: it may expire") }) {
		t.Fatalf("no suspension reported; stderr:\n%s", stderr.String())
	}
	if i, j := strings.Index(stderr.String(), "disconnected from"), strings.Index(stderr.String(), "suspended"); i < 0 || j < i {
		t.Errorf("the suspension is not reported after the disconnection; stderr:\n%s", stderr.String())
	}
	pw.Close()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the shell did not exit at EOF")
	}
}

// TestLockHelpSaysGraceIsCapped: lock's and elect's help say that the
// grace is capped before the session's earliest expiry; elect's speaks of
// leadership.
func TestLockHelpSaysGraceIsCapped(t *testing.T) {
	for _, v := range []*verb{lockVerb, electVerb} {
		if !strings.Contains(v.detail, "--grace is capped") {
			t.Errorf("%s's help does not say that --grace is capped:\n%s", v.name, v.detail)
		}
	}
	if strings.Contains(electVerb.detail, `"coordctl: lock lost"`) || !strings.Contains(electVerb.detail, `"coordctl: leadership lost"`) {
		t.Errorf("elect's help:\n%s", electVerb.detail)
	}
}
