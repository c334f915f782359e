package main

import (
	"bytes"
	"context"
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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/rpc/apipb"
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

// TestJoinerSaysItWaits: a server started with --join says it waits to be
// added, and the command that adds it, not that it serves; once added it
// says it serves; and at the default level neither it nor the leader logs
// a warning on the way (it used to log two).
func TestJoinerSaysItWaits(t *testing.T) {
	type server struct {
		stop   chan os.Signal
		done   chan int
		stderr *syncBuffer
	}
	start := func(args ...string) *server {
		s := &server{stop: make(chan os.Signal, 1), done: make(chan int, 1), stderr: &syncBuffer{}}
		go func() {
			s.done <- runUntil(append(args, "--heartbeat-timeout", "200ms", "--election-timeout", "200ms", "--tick", "200ms"), io.Discard, s.stderr, s.stop)
		}()
		t.Cleanup(func() {
			s.stop <- syscall.SIGTERM
			select {
			case <-s.done:
			case <-time.After(20 * time.Second):
				t.Errorf("a server did not stop; stderr:\n%s", s.stderr.String())
			}
		})
		return s
	}
	client1 := freeAddr(t)
	first := start("--id", "1", "--data-dir", t.TempDir(), "--client-addr", client1, "--peer-addr", freeAddr(t))
	if !waitUntil(30*time.Second, func() bool { return strings.Contains(first.stderr.String(), "server 1 serving clients") }) {
		t.Fatalf("server 1 did not start:\n%s", first.stderr.String())
	}
	client4, peer4 := freeAddr(t), freeAddr(t)
	joiner := start("--id", "4", "--join", "--data-dir", t.TempDir(), "--client-addr", client4, "--peer-addr", peer4)
	waiting := fmt.Sprintf("server 4 waiting to be added (coordctl member add 4 %s)", peer4)
	if !waitUntil(30*time.Second, func() bool { return strings.Contains(joiner.stderr.String(), waiting) }) {
		t.Fatalf("the joiner does not say %q:\n%s", waiting, joiner.stderr.String())
	}
	if strings.Contains(joiner.stderr.String(), "serving clients") {
		t.Fatalf("the joiner says it serves before it is added:\n%s", joiner.stderr.String())
	}

	cc, err := grpc.NewClient(client1, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Added once server 1 has elected itself (it serves before).
	var addErr error
	if !waitUntil(30*time.Second, func() bool {
		_, addErr = apipb.NewCoordClient(cc).AddMember(ctx, &apipb.AddMemberRequest{Id: "4", PeerAddress: peer4, NonVoter: true})
		return addErr == nil
	}) {
		t.Fatalf("adding server 4: %v", addErr)
	}
	serving := "server 4 serving clients on " + client4
	if !waitUntil(30*time.Second, func() bool { return strings.Contains(joiner.stderr.String(), serving) }) {
		t.Fatalf("the added server does not say %q:\n%s", serving, joiner.stderr.String())
	}
	// Its first client: what it serves, it has caught up to.
	if !waitUntil(30*time.Second, func() bool {
		cc4, err := grpc.NewClient(client4, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return false
		}
		defer cc4.Close()
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		resp, err := apipb.NewCoordClient(cc4).Status(sctx, &apipb.StatusRequest{})
		return err == nil && len(resp.GetMembers()) == 2
	}) {
		t.Fatal("the added server never reports both members")
	}
	for name, s := range map[string]*server{"the joiner": joiner, "the leader": first} {
		if out := s.stderr.String(); strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
			t.Errorf("%s logged at warn or above at the default level:\n%s", name, out)
		}
	}
}
