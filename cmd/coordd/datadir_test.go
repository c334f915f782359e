package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDamagedDataDirRefused: a server whose WAL holds damage in entries it
// already wrote (64 bytes flipped at 40% of the segment's written part, as
// a bad disk would) exits 1 and says which file is damaged, and where,
// instead of serving (issue 37).
func TestDamagedDataDirRefused(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t),
		"--heartbeat-timeout", "200ms", "--election-timeout", "200ms"}
	stop := make(chan os.Signal, 1)
	done := make(chan int, 1)
	stderr := &syncBuffer{}
	go func() { done <- runUntil(args, io.Discard, stderr, stop) }()
	// Serving, and past its first election: its log holds a few batches
	// (bootstrap, the leader's first entries).
	seg := filepath.Join(dir, "wal", "00000000000000000001-0000000000000000.wal")
	written := func() int {
		b, _ := os.ReadFile(seg)
		return len(bytes.TrimRight(b, "\x00"))
	}
	waitFor(t, "the server to start", func() bool { return strings.Contains(stderr.String(), "serving clients on") })
	waitFor(t, "the leader's first entries", func() bool { return written() > 200 })
	stop <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("coordd exit %d; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("coordd did not stop; stderr:\n%s", stderr.String())
	}

	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	at := written() * 4 / 10
	for i := at; i < at+64; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}

	out := &syncBuffer{}
	go func() { done <- runUntil(args, io.Discard, out, stop) }()
	var code int
	select {
	case code = <-done:
	case <-time.After(20 * time.Second):
		stop <- syscall.SIGTERM
		t.Fatalf("coordd started on a damaged data dir; stderr:\n%s, then exit %d", out.String(), <-done)
	}
	if code != 1 || !strings.Contains(out.String(), "data dir damaged") || !strings.Contains(out.String(), seg+": offset ") {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming %s and an offset", code, out.String(), seg)
	}
	t.Logf("exit %d: %s", code, strings.TrimSpace(out.String()))
}
