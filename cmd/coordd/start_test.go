package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDataDirInUse: a second coordd on the data dir of a running one fails
// at once, saying whose it is, and exits 1, whichever log store the dir
// holds; the first goes on serving. (It used to wait forever, silently, for
// raft-wal's bbolt lock, deaf to TERM and Ctrl-C.)
func TestDataDirInUse(t *testing.T) {
	bin := filepath.Join(coorddBin(t), "coordd")
	for _, kind := range []string{"wal", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			client := freeAddr(t)
			first := exec.Command(bin, "--id", "1", "--data-dir", dir, "--raft-log", kind,
				"--client-addr", client, "--peer-addr", freeAddr(t))
			first.Env = append(os.Environ(), asCoordd+"=1", "GOMAXPROCS=1")
			var out1 syncBuffer
			first.Stderr = &out1
			if err := first.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = first.Process.Signal(syscall.SIGKILL)
				_ = first.Wait()
			})
			if !waitUntil(30*time.Second, func() bool { return strings.Contains(out1.String(), "serving clients") }) {
				t.Fatalf("the first server did not start:\n%s", out1.String())
			}

			// What starting the binary costs at all (this test binary, built
			// with the race detector, on a machine others share), so that
			// the refusal itself is what is timed.
			version := exec.Command(bin, "--version")
			version.Env = first.Env
			begin := time.Now()
			if err := version.Run(); err != nil {
				t.Fatal(err)
			}
			baseline := time.Since(begin)

			second := exec.Command(bin, "--id", "1", "--data-dir", dir, "--raft-log", kind,
				"--client-addr", freeAddr(t), "--peer-addr", freeAddr(t))
			second.Env = first.Env
			var out2 bytes.Buffer
			second.Stderr = &out2
			start := time.Now()
			if err := second.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- second.Wait() }()
			select {
			case err := <-exited:
				took := time.Since(start)
				t.Logf("the second server exited after %v (coordd --version: %v): %v", took, baseline, err)
				want := fmt.Sprintf("data dir %s is in use by another coordd (pid %d)", dir, first.Process.Pid)
				if second.ProcessState.ExitCode() != 1 || !strings.Contains(out2.String(), want) {
					t.Errorf("second server: %v, stderr %q; want exit status 1 and %q", err, out2.String(), want)
				}
				if took-baseline > time.Second {
					t.Errorf("the second server took %v to refuse (coordd --version %v), want at most a second more", took, baseline)
				}
			case <-time.After(10 * time.Second):
				_ = second.Process.Signal(syscall.SIGKILL)
				<-exited
				t.Fatalf("the second server on a data dir in use still ran after 10s; stderr:\n%s", out2.String())
			}
			if c, err := net.DialTimeout("tcp", client, time.Second); err != nil {
				t.Errorf("the first server no longer serves: %v", err)
			} else {
				c.Close()
			}
		})
	}
}

// TestSignalWhileStarting: a TERM or Ctrl-C that arrives while the server
// starts stops the start (it used to be noticed only once the start was
// over, however long that took): coordd says so and exits 0, never having
// served, its ports free again.
func TestSignalWhileStarting(t *testing.T) {
	client, peer := freeAddr(t), freeAddr(t)
	stop := make(chan os.Signal, 1)
	stop <- syscall.SIGTERM // arrives as the start begins
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runUntil([]string{"--data-dir", t.TempDir(), "--client-addr", client, "--peer-addr", peer}, io.Discard, &stderr, stop)
	}()
	select {
	case code := <-done:
		out := stderr.String()
		if code != 0 || !strings.Contains(out, "coordd: terminated while starting: stopping") || strings.Contains(out, "serving clients") {
			t.Errorf("exit %d, stderr %q; want exit 0, the stop said and no serving", code, out)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("coordd did not stop; stderr:\n%s", stderr.String())
	}
	for _, a := range []string{client, peer} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s after the stopped start: %v", a, err)
			continue
		}
		ln.Close()
	}
}
