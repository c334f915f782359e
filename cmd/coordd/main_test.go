package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/tlsutil"
	"github.com/coordd/coordd/test/cluster/freeport"
)

// freeAddr returns a free 127.0.0.1 address, never the same twice in the
// test process (freeport.Addr): a port probed with port 0 and closed can be
// handed to the next probe, and a server's client and peer addresses must
// differ.
func freeAddr(t testing.TB) string { return freeport.Addr(t) }

// TestStartupErrors: a bad flag, a busy port or a data dir of another server
// id gives a clear message, without rpc's package prefix, and a non-zero
// exit.
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
	// A data dir with a raft-boltdb log, and one with a raft-wal log.
	boltDir, walDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(boltDir, "raft.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(walDir, "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	bootstrapped := t.TempDir() // as a server that bootstrapped leaves it
	for _, f := range []string{"server-id", "raft.db"} {
		if err := os.WriteFile(filepath.Join(bootstrapped, f), []byte("1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clientJAAS := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(clientJAAS, []byte(`Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="bob" password="x"; };`), 0o600); err != nil {
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
		{"unknown raft log", []string{"--data-dir", t.TempDir(), "--raft-log", "rocks", "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t)}, 1, `unknown raft log store "rocks"`},
		{"wal asked of a bolt dir", []string{"--data-dir", boltDir, "--raft-log", "wal", "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t)}, 1, "--raft-log wal, but " + boltDir + " holds a bolt log (raft.db)"},
		{"bolt asked of a wal dir", []string{"--data-dir", walDir, "--raft-log", "bolt", "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t)}, 1, "--raft-log bolt, but " + walDir + " holds a wal log (wal/)"},
		{"join with a bootstrapped data dir", []string{"--id", "1", "--join", "--data-dir", bootstrapped, "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t)}, 1, "--join needs an empty data dir"},
		{"join with a wal data dir", []string{"--id", "1", "--join", "--data-dir", walDir, "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t)}, 1, "--join needs an empty data dir"},
		{"super digest with a password", []string{"--data-dir", t.TempDir(), "--superdigest", "super:secret"}, 1, "super digest: the part after"},
		{"SASL users file missing", []string{"--data-dir", t.TempDir(), "--sasl-users", filepath.Join(t.TempDir(), "jaas.conf")}, 1, "--sasl-users: sasl: users file: open"},
		{"SASL users file without a Server section", []string{"--data-dir", t.TempDir(), "--sasl-users", clientJAAS}, 1, "no section Server (it has Client)"},
		{"SASL super user without users", []string{"--data-dir", t.TempDir(), "--sasl-super-user", "super"}, 1, "need --sasl-users"},
		{"min above max", []string{"--data-dir", t.TempDir(), "--min-session-timeout", "30s", "--max-session-timeout", "10s"}, 1, "exceeds max"},
		{"lock-delay without a duration", []string{"--lock-delay", "/locks"}, 2, `bad lock-delay "/locks": want PREFIX=DURATION`},
		{"lock-delay with a bad duration", []string{"--lock-delay", "/locks=10"}, 2, `bad lock-delay "/locks=10": time: missing unit`},
		{"lock-delay of no path", []string{"--data-dir", t.TempDir(), "--lock-delay", "locks=10s"}, 1, "lock-delay locks=10s: the prefix must be a node's path"},
		{"lock-delay too long", []string{"--data-dir", t.TempDir(), "--lock-delay", "/locks=2h"}, 1, "the delay must be from 0 to 1h0m0s"},
		{"lock-delay negative", []string{"--data-dir", t.TempDir(), "--lock-delay", "/locks=-1s"}, 1, "the delay must be from 0 to 1h0m0s"},
		{"lock-delay prefix twice", []string{"--data-dir", t.TempDir(), "--lock-delay", "/locks=1s", "--lock-delay", "/a=1s,/locks=2s"}, 1, "lock-delay prefix /locks is given twice"},
	} {
		var stderr bytes.Buffer
		code := run(tc.args, io.Discard, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", tc.name, code, stderr.String(), tc.code, tc.msg)
		}
		if strings.Contains(stderr.String(), "rpc: ") {
			t.Errorf("%s: stderr %q names the internal package rpc", tc.name, stderr.String())
		}
	}
}

func TestHelp(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--help"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	for _, flag := range []string{"-id", "-data-dir", "-client-addr", "-peer-addr", "-peers", "-join", "-tick", "-ttl-nodes", "-idle-memory-check", "-cert-file", "-key-file", "-trusted-ca-file", "-client-cert-auth", "-peer-cert-file", "-peer-key-file", "-peer-trusted-ca-file", "-console", "-console-writes", "-console-auth", "-console-cacert", "-console-cert", "-console-key", "-raft-log", "-sasl-users", "-sasl-section", "-sasl-super-user"} {
		if !strings.Contains(stderr.String(), flag) {
			t.Errorf("--help does not document %s", flag)
		}
	}
}

// TestBusyPortClaimsNoDataDir: a server that cannot bind its client or peer
// port fails before it claims its data dir, so that a second attempt, with
// the port free or another id, starts afresh (it used to leave server-id
// behind, and with it the id of a server that never ran).
func TestBusyPortClaimsNoDataDir(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name         string
		client, peer string
	}{
		{"client port", busy.Addr().String(), freeAddr(t)},
		{"peer port", freeAddr(t), busy.Addr().String()},
	} {
		dir := filepath.Join(t.TempDir(), "coordd-data")
		var stderr bytes.Buffer
		code := run([]string{"--data-dir", dir, "--client-addr", tc.client, "--peer-addr", tc.peer}, io.Discard, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "address already in use") {
			t.Errorf("%s taken: exit %d, stderr %q; want exit 1 and the address in use", tc.name, code, stderr.String())
		}
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("%s taken: the failed start left %v in its data dir", tc.name, names)
		}
	}
}

// TestVersion: --version prints the version make build stamps into
// main.version, and the running server reports it in status, as its own
// and as its member's.
func TestVersion(t *testing.T) {
	old := version
	version = "v1.2.3-test"
	defer func() { version = old }()
	var out bytes.Buffer
	if code := run([]string{"--version"}, &out, io.Discard); code != 0 || out.String() != "coordd v1.2.3-test\n" {
		t.Errorf("--version: exit %d, stdout %q", code, out.String())
	}

	addr := freeAddr(t)
	stop := make(chan os.Signal, 1)
	done := make(chan int, 1)
	var stderr syncBuffer
	go func() {
		done <- runUntil([]string{"--data-dir", t.TempDir(), "--client-addr", addr, "--peer-addr", freeAddr(t),
			"--heartbeat-timeout", "200ms", "--election-timeout", "200ms"}, io.Discard, &stderr, stop)
	}()
	defer func() {
		stop <- syscall.SIGTERM
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("coordd exit %d; stderr:\n%s", code, stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Errorf("coordd did not stop; stderr:\n%s", stderr.String())
		}
	}()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var resp *apipb.StatusResponse
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err = apipb.NewCoordClient(cc).Status(ctx, &apipb.StatusRequest{})
		cancel()
		if err == nil && len(resp.GetMembers()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no status with one member: %v, %v; stderr:\n%s", resp, err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp.GetVersion() != "v1.2.3-test" || resp.GetMembers()[0].GetVersion() != "v1.2.3-test" {
		t.Errorf("status version %q, member version %q; want v1.2.3-test", resp.GetVersion(), resp.GetMembers()[0].GetVersion())
	}
	// The server answers as soon as its listener is up; the start line is
	// written after that.
	line := "coordd v1.2.3-test: server 1 serving clients on " + addr
	if !waitUntil(20*time.Second, func() bool { return strings.Contains(stderr.String(), line) }) {
		t.Errorf("start line: %q", stderr.String())
	}
}

// syncBuffer is a bytes.Buffer that a running server and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTLSFlags: the TLS flags make both ports TLS-only: a client with the
// CA and a client certificate gets status, a plaintext one does not; a
// key that does not match its certificate stops coordd at startup with a
// message naming both files.
func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	if err := tlsutil.WriteLocalCluster(dir, []string{"127.0.0.1"}, "tester", time.Hour); err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(dir, name) }

	var stderr bytes.Buffer
	code := run([]string{"--data-dir", t.TempDir(), "--client-addr", freeAddr(t), "--peer-addr", freeAddr(t),
		"--cert-file", in("server.crt"), "--key-file", in("client.key")}, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "--key-file "+in("client.key")+" is not the private key of --cert-file "+in("server.crt")) {
		t.Errorf("mismatched key: exit %d, stderr %q", code, stderr.String())
	}

	addr := freeAddr(t)
	stop := make(chan os.Signal, 1)
	done := make(chan int, 1)
	var out syncBuffer
	go func() {
		done <- runUntil([]string{"--data-dir", t.TempDir(), "--client-addr", addr, "--peer-addr", freeAddr(t),
			"--heartbeat-timeout", "200ms", "--election-timeout", "200ms",
			"--cert-file", in("server.crt"), "--key-file", in("server.key"), "--trusted-ca-file", in("ca.crt"), "--client-cert-auth",
			"--peer-cert-file", in("peer.crt"), "--peer-key-file", in("peer.key"), "--peer-trusted-ca-file", in("ca.crt")}, io.Discard, &out, stop)
	}()
	defer func() {
		stop <- syscall.SIGTERM
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("coordd did not stop; stderr:\n%s", out.String())
		}
	}()
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(in("ca.crt"))
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt", err)
	}
	pair, err := tls.LoadX509KeyPair(in("client.crt"), in("client.key"))
	if err != nil {
		t.Fatal(err)
	}
	status := func(creds credentials.TransportCredentials) error {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := apipb.NewCoordClient(cc).Status(ctx, &apipb.StatusRequest{})
		if err == nil && len(resp.GetMembers()) != 1 {
			err = errors.New("no leader yet")
		}
		return err
	}
	good := credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}})
	if !waitUntil(20*time.Second, func() bool { return status(good) == nil }) {
		t.Fatalf("no status over TLS: %v; stderr:\n%s", status(good), out.String())
	}
	if err := status(insecure.NewCredentials()); err == nil {
		t.Error("a plaintext client got status")
	}
	startLine := func() bool {
		s := out.String()
		return strings.Contains(s, "serving clients on "+addr+" with TLS, client certificates required (peers on") &&
			strings.Contains(s, "with mutual TLS")
	}
	if !waitUntil(20*time.Second, startLine) { // written after the server answers
		t.Errorf("start line: %q", out.String())
	}
}
