package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// get fetches url and returns its status and body ("" and 0 on an error).
func get(url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startCoordd runs coordd with args (and fresh addresses and data dir)
// until the test ends.
func startCoordd(t *testing.T, args ...string) *syncBuffer {
	t.Helper()
	stop := make(chan os.Signal, 1)
	done := make(chan int, 1)
	stderr := &syncBuffer{}
	args = append([]string{"--data-dir", t.TempDir(), "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t),
		"--heartbeat-timeout", "200ms", "--election-timeout", "200ms"}, args...)
	go func() { done <- runUntil(args, io.Discard, stderr, stop) }()
	t.Cleanup(func() {
		stop <- syscall.SIGTERM
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("coordd exit %d; stderr:\n%s", code, stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("coordd did not stop; stderr:\n%s", stderr.String())
		}
	})
	return stderr
}

// waitFor polls cond every few milliseconds for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMetricsAddr: --metrics-addr serves the metrics (with the build's
// version), /livez and /readyz, and says so at start; --pprof-addr equal to
// it puts the profiles there.
func TestMetricsAddr(t *testing.T) {
	old := version
	version = "v9.8.7-test"
	defer func() { version = old }()
	addr := freeAddr(t)
	stderr := startCoordd(t, "--metrics-addr", addr, "--pprof-addr", addr)
	base := "http://" + addr
	waitFor(t, "/readyz to answer 200", func() bool { code, _ := get(base + "/readyz"); return code == http.StatusOK })
	if code, body := get(base + "/livez"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/livez: %d %q", code, body)
	}
	code, body := get(base + "/metrics")
	if code != http.StatusOK || !strings.Contains(body, `version="v9.8.7-test"`) || !strings.Contains(body, "\ncoordd_ready 1\n") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	if code, body := get(base + "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ on the metrics address: %d", code)
	}
	if !waitUntil(20*time.Second, func() bool { return strings.Contains(stderr.String(), "metrics and health on http://"+addr) }) {
		t.Errorf("the start lines do not say where the metrics are:\n%s", stderr.String())
	}
}

// TestPprofAddrApart: --pprof-addr on another address serves the profiles
// there, and the metrics address has none.
func TestPprofAddrApart(t *testing.T) {
	metrics, pprof := freeAddr(t), freeAddr(t)
	startCoordd(t, "--metrics-addr", metrics, "--pprof-addr", pprof)
	waitFor(t, "the profiles", func() bool { code, _ := get("http://" + pprof + "/debug/pprof/"); return code == http.StatusOK })
	if code, _ := get("http://" + metrics + "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ on the metrics address: %d, want 404", code)
	}
}

// TestBusyMetricsPort: a metrics address in use fails the start, with the
// address in the message, before the data dir is claimed.
func TestBusyMetricsPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "coordd-data")
	var stderr bytes.Buffer
	code := run([]string{"--data-dir", dir, "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t), "--metrics-addr", busy.Addr().String()}, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "metrics address "+busy.Addr().String()) || !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the metrics address in use", code, stderr.String())
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		t.Errorf("the failed start left %d files in its data dir", len(entries))
	}
}
