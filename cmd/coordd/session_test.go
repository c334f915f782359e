package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkLog keeps go-zookeeper's log lines.
type zkLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *zkLog) Printf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// granted returns the session timeout go-zookeeper was granted, in ms,
// once it says so (-1 before).
func (l *zkLog) granted() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		var id, ms int64
		if _, err := fmt.Sscanf(s, "authenticated: id=%d, timeout=%d", &id, &ms); err == nil {
			return ms
		}
	}
	return -1
}

// TestSessionTimeoutBounds: with the default flags a ZooKeeper client
// (go-zookeeper) is granted up to 40 s, ZooKeeper's stock maximum (Patroni
// asks for its ttl, 30 s), and at least 2 s; a timeout clamped into those
// bounds is logged at info with the session, what it asked and what it got.
func TestSessionTimeoutBounds(t *testing.T) {
	addr := freeAddr(t)
	stop := make(chan os.Signal, 1)
	done := make(chan int, 1)
	var stderr syncBuffer
	go func() {
		done <- runUntil([]string{"--data-dir", t.TempDir(), "--client-addr", addr, "--peer-addr", freeAddr(t),
			"--heartbeat-timeout", "200ms", "--election-timeout", "200ms", "--log-level", "info"}, io.Discard, &stderr, stop)
	}()
	defer func() {
		stop <- syscall.SIGTERM
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("coordd did not stop; stderr:\n%s", stderr.String())
		}
	}()

	for _, tc := range []struct {
		ask       time.Duration
		grantedMs int64
		clamped   bool
	}{
		{30 * time.Second, 30_000, false},
		{40 * time.Second, 40_000, false},
		{time.Minute, 40_000, true},
		{time.Second, 2_000, true},
	} {
		log := &zkLog{}
		conn, _, err := zk.Connect([]string{addr}, tc.ask, zk.WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		if !waitUntil(20*time.Second, func() bool { return log.granted() >= 0 }) {
			conn.Close()
			t.Fatalf("asked %v: no session; go-zookeeper: %q; stderr:\n%s", tc.ask, log.lines, stderr.String())
		}
		id := conn.SessionID()
		conn.Close()
		if got := log.granted(); got != tc.grantedMs {
			t.Errorf("asked %v: granted %d ms, want %d", tc.ask, got, tc.grantedMs)
		}
		line := regexp.MustCompile(fmt.Sprintf(`msg="session timeout clamped into the server's bounds"[^\n]* session=%d asked=(\S+) granted=(\S+)`, id))
		if !tc.clamped {
			if line.MatchString(stderr.String()) {
				t.Errorf("asked %v: logged as clamped", tc.ask)
			}
			continue
		}
		want := []string{tc.ask.String(), (time.Duration(tc.grantedMs) * time.Millisecond).String()}
		if !waitUntil(5*time.Second, func() bool { return line.MatchString(stderr.String()) }) {
			t.Errorf("asked %v: no log line; stderr:\n%s", tc.ask, stderr.String())
		} else if m := line.FindAllStringSubmatch(stderr.String(), -1); len(m) != 1 || strings.Join(m[0][1:], " ") != strings.Join(want, " ") {
			t.Errorf("asked %v: logged %q, want once asked=%s granted=%s", tc.ask, m, want[0], want[1])
		}
	}
}
