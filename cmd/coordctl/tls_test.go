package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc"
)

// tlsServer is a single-node server with TLS on both ports and client
// certificates required, on the files of a certs init in dir.
var (
	tlsOnce sync.Once
	tlsAddr string
	tlsDir  string
	tlsErr  error
)

func tlsTestServer(t *testing.T) (addr, dir string) {
	t.Helper()
	tlsOnce.Do(func() {
		tlsDir, tlsErr = os.MkdirTemp("", "coordctl-tls-")
		if tlsErr != nil {
			return
		}
		certs := filepath.Join(tlsDir, "tls")
		if r := bare(t, "certs", "init", certs, "--hosts", "127.0.0.1,localhost"); r.code != 0 {
			tlsErr = &usageError{msg: r.stderr}
			return
		}
		in := func(name string) string { return filepath.Join(certs, name) }
		var n *rpc.Node
		n, tlsErr = rpc.NewNode(rpc.Config{
			ID: "1", DataDir: filepath.Join(tlsDir, "data"), ClientAddr: freeAddr(t), PeerAddr: freeAddr(t),
			Tick: 100 * time.Millisecond, HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
			LeaderLeaseTimeout: 150 * time.Millisecond,
			ClientTLS:          rpc.TLSFiles{Cert: in("server.crt"), Key: in("server.key"), CA: in("ca.crt")}, ClientCertAuth: true,
			PeerTLS: rpc.TLSFiles{Cert: in("peer.crt"), Key: in("peer.key"), CA: in("ca.crt")},
		})
		if tlsErr != nil {
			return
		}
		tlsNode = n
		if !poll(10*time.Second, n.IsLeader) {
			tlsErr = &usageError{msg: "the TLS server did not become leader"}
		}
		tlsAddr = n.ClientAddr()
	})
	if tlsErr != nil {
		t.Fatalf("starting the TLS server: %v", tlsErr)
	}
	return tlsAddr, filepath.Join(tlsDir, "tls")
}

var tlsNode *rpc.Node

func init() {
	cleanups = append(cleanups, func() {
		if tlsNode != nil {
			tlsNode.Close()
		}
		if tlsDir != "" {
			os.RemoveAll(tlsDir)
		}
	})
}

// TestTLS: coordctl with --cacert, --cert and --key (or COORD_CACERT,
// COORD_CERT and COORD_KEY) works against a TLS server, its one-shot verbs,
// status and lock alike; without them, or with the wrong ones, it says at
// once what to pass or fix.
func TestTLS(t *testing.T) {
	addr, dir := tlsTestServer(t)
	in := func(name string) string { return filepath.Join(dir, name) }
	flags := []string{"--servers", addr, "--cacert", in("ca.crt"), "--cert", in("client.crt"), "--key", in("client.key")}
	node := fmt.Sprintf("/tls-%d", time.Now().UnixNano())
	if r := bare(t, append(flags, "create", node, "x")...); r.code != 0 {
		t.Fatalf("create over TLS: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := bare(t, append(flags, "status")...); r.code != 0 {
		t.Fatalf("status over TLS: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := bare(t, append(flags, "lock", "/tls-lock", "--", "true")...); r.code != 0 {
		t.Fatalf("lock over TLS: exit %d, stderr %q", r.code, r.stderr)
	}
	t.Setenv("COORD_CACERT", in("ca.crt"))
	t.Setenv("COORD_CERT", in("client.crt"))
	t.Setenv("COORD_KEY", in("client.key"))
	if r := bare(t, "--servers", addr, "get", node); r.code != 0 || r.stdout != "x\n" {
		t.Fatalf("get with the environment: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	t.Setenv("COORD_CACERT", "")
	t.Setenv("COORD_CERT", "")
	t.Setenv("COORD_KEY", "")

	other := filepath.Join(t.TempDir(), "other")
	if r := bare(t, "certs", "init", other); r.code != 0 {
		t.Fatal(r.stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"plaintext", nil, 1, addr + ": expects TLS: pass --cacert"},
		{"no client certificate", []string{"--cacert", in("ca.crt")}, 1, addr + ": it requires a client certificate: pass --cert and --key"},
		{"server of another CA", []string{"--cacert", filepath.Join(other, "ca.crt")}, 1, addr + ": its certificate is not signed by a CA in --cacert"},
		{"client certificate of another CA", []string{"--cacert", in("ca.crt"), "--cert", filepath.Join(other, "client.crt"), "--key", filepath.Join(other, "client.key")}, 1,
			addr + ": it refused the client certificate (--cert)"},
		{"key of another certificate", []string{"--cacert", in("ca.crt"), "--cert", in("client.crt"), "--key", in("server.key")}, 2,
			"--key " + in("server.key") + " is not the private key of --cert " + in("client.crt")},
		{"certificate without key", []string{"--cert", in("client.crt")}, 2, "--cert needs --key"},
		{"no CA in the file", []string{"--cacert", in("client.key")}, 2, "holds no PEM certificate"},
	} {
		for _, verb := range [][]string{{"ls", "/"}, {"status"}} {
			start := time.Now()
			args := append(append([]string{"--servers", addr, "--timeout", "1m"}, tc.args...), verb...)
			r := bare(t, args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%s, %s: exit %d, stderr %q; want exit %d and %q", tc.name, verb[0], r.code, r.stderr, tc.code, tc.want)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("%s, %s: took %v: waited for --timeout", tc.name, verb[0], d)
			}
		}
	}
	// TLS to a plaintext server.
	plain := server(t)
	r := bare(t, "--servers", plain, "--timeout", "1m", "--cacert", in("ca.crt"), "ls", "/")
	if r.code != 1 || !strings.Contains(r.stderr, plain+": it closed the connection during the TLS handshake: it may not have TLS on") {
		t.Errorf("TLS to a plaintext server: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestCertsVerb: certs init writes a CA and three certificates, refuses to
// overwrite them, and certs issue signs another with the same CA, usable
// at once.
func TestCertsVerb(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	r := bare(t, "certs", "init", dir, "--hosts", "127.0.0.1", "--client-name", "alice", "--days", "2")
	if r.code != 0 {
		t.Fatalf("init: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, f := range []string{"ca.crt", "ca.key", "server.crt", "server.key", "server.pem", "peer.crt", "peer.key", "client.crt", "client.key", "client.pem"} {
		if !strings.Contains(r.stdout, filepath.Join(dir, f)+"\n") {
			t.Errorf("init does not list %s", f)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(r.stdout, "export COORD_CACERT="+filepath.Join(dir, "ca.crt")) {
		t.Errorf("init does not say how to use the files: %q", r.stdout)
	}
	if r := bare(t, "certs", "init", dir); r.code != 1 || !strings.Contains(r.stderr, "already holds a CA") {
		t.Errorf("second init: exit %d, stderr %q", r.code, r.stderr)
	}
	r = bare(t, "-o", "json", "certs", "issue", dir, "--kind", "client", "--name", "bob")
	if r.code != 0 {
		t.Fatalf("issue: exit %d, stderr %q", r.code, r.stderr)
	}
	m := decode(t, strings.TrimSpace(r.stdout), "dir", "files")
	if files := unmarshal[[]string](t, m["files"]); len(files) != 3 || files[0] != filepath.Join(dir, "bob.crt") {
		t.Errorf("issue files %v", files)
	}
	addr, _ := tlsTestServer(t)
	// bob is of another CA than the test server's: refused; and the issue
	// flags are checked.
	if r := bare(t, "--servers", addr, "--cacert", filepath.Join(dir, "ca.crt"), "--cert", filepath.Join(dir, "bob.crt"), "--key", filepath.Join(dir, "bob.key"), "ls", "/"); r.code != 1 {
		t.Errorf("bob got in: %q", r.stderr)
	}
	for _, args := range [][]string{
		{"certs", "issue", dir, "--kind", "other", "--name", "x"},
		{"certs", "issue", dir, "--kind", "peer", "--name", "../x"},
		{"certs", "frob", dir},
		{"certs"},
	} {
		if r := bare(t, args...); r.code != 2 {
			t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := bare(t, "certs", "issue", dir, "--kind", "peer", "--name", "p", "--hosts", ""); r.code != 1 || !strings.Contains(r.stderr, "at least one host") {
		t.Errorf("peer without hosts: exit %d, stderr %q", r.code, r.stderr)
	}
}
