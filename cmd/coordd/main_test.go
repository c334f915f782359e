package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestStartupErrors: a bad flag, a busy port or a data dir of another server
// id gives a clear message and a non-zero exit.
func TestStartupErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	otherDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(otherDir, "server-id"), []byte("7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown flag", []string{"--nope"}, 2, "flag provided but not defined"},
		{"stray argument", []string{"serve"}, 2, `unexpected argument "serve"`},
		{"bad peers", []string{"--peers", "1=nowhere"}, 2, "bad peer address"},
		{"bad log level", []string{"--log-level", "loud"}, 2, "bad --log-level"},
		{"busy client port", []string{"--data-dir", t.TempDir(), "--client-addr", busy.Addr().String(), "--peer-addr", freeAddr(t)}, 1, "address already in use"},
		{"busy peer port", []string{"--data-dir", t.TempDir(), "--client-addr", freeAddr(t), "--peer-addr", busy.Addr().String()}, 1, "address already in use"},
		{"data dir of another id", []string{"--id", "1", "--data-dir", otherDir, "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t)}, 1, `created by server "7"`},
		{"self not in peers", []string{"--id", "4", "--data-dir", t.TempDir(), "--peers", "1=127.0.0.1:1,2=127.0.0.1:2,3=127.0.0.1:3"}, 1, "not in the peers list"},
		{"min above max", []string{"--data-dir", t.TempDir(), "--min-session-timeout", "30s", "--max-session-timeout", "10s"}, 1, "exceeds max"},
	} {
		var stderr bytes.Buffer
		code := run(tc.args, io.Discard, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", tc.name, code, stderr.String(), tc.code, tc.msg)
		}
	}
}

func TestHelp(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--help"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	for _, flag := range []string{"-id", "-data-dir", "-client-addr", "-peer-addr", "-peers", "-tick", "-ttl-nodes", "-idle-memory-check"} {
		if !strings.Contains(stderr.String(), flag) {
			t.Errorf("--help does not document %s", flag)
		}
	}
}
