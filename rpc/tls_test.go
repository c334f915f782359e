package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/tlsutil"
)

// testPKI is a CA and the certificates tests issue from it, in a directory.
type testPKI struct {
	t   testing.TB
	dir string
	ca  *tlsutil.CA
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	now := time.Now()
	ca, err := tlsutil.NewCA("test CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{t: t, dir: t.TempDir(), ca: ca}
	p.writeCA(ca.CertPEM)
	return p
}

func (p *testPKI) caFile() string { return filepath.Join(p.dir, "ca.crt") }

func (p *testPKI) writeCA(pemBytes []byte) {
	p.t.Helper()
	if err := tlsutil.WriteFileAtomic(p.caFile(), pemBytes, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// issue writes name.crt and name.key and returns them with the CA file.
func (p *testPKI) issue(name string, kind tlsutil.CertKind, hosts ...string) tlsutil.Files {
	p.t.Helper()
	now := time.Now()
	return p.issueValid(name, kind, now.Add(-time.Hour), now.Add(24*time.Hour), hosts...)
}

func (p *testPKI) issueValid(name string, kind tlsutil.CertKind, from, to time.Time, hosts ...string) tlsutil.Files {
	p.t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(tlsutil.Request{Kind: kind, Name: name, Hosts: hosts, NotBefore: from, NotAfter: to})
	if err != nil {
		p.t.Fatal(err)
	}
	if err := tlsutil.WritePair(p.dir, name, certPEM, keyPEM); err != nil {
		p.t.Fatal(err)
	}
	return tlsutil.Files{Cert: filepath.Join(p.dir, name+".crt"), Key: filepath.Join(p.dir, name+".key"), CA: p.caFile()}
}

// clientTLS is a client's configuration: it trusts p's CA and presents the
// certificate of files, if given.
func (p *testPKI) clientTLS(files *tlsutil.Files) *tls.Config {
	p.t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
	if files != nil {
		pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			p.t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

// logLines collects log records.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

// count returns how many messages contain every one of words.
func (l *logLines) count(words ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, m := range l.msgs {
		for _, w := range words {
			if !strings.Contains(m, w) {
				continue next
			}
		}
		n++
	}
	return n
}

// waitUntil polls cond until it holds or 10s pass.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tlsSession opens a gRPC session over TLS with cfg and creates a node,
// returning the error of the first step that failed.
func tlsSession(addr string, cfg *tls.Config, path string) error {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := apipb.NewCoordClient(cc).Session(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Connect{Connect: &apipb.ConnectRequest{TimeoutMs: 2000}}}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.GetConnected() == nil {
		return fmt.Errorf("connect: %v", first)
	}
	req := &apipb.Request{Xid: 1, Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: path}}}
	if err := stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: req}}); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		if r := m.GetResponse(); r != nil {
			if r.Error != apipb.ErrorCode_OK {
				return fmt.Errorf("create %s: %v %s", path, r.Error, r.Message)
			}
			return nil
		}
	}
}

// zkOverTLS connects go-zookeeper through a TLS dialer and waits for its
// session.
func zkOverTLS(t *testing.T, addr string, cfg *tls.Config) *zk.Conn {
	t.Helper()
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, cfg)
	}
	conn, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithDialer(dialer), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn
			}
		case <-deadline:
			t.Fatal("go-zookeeper over TLS: no session")
		}
	}
}

// TestClientPortTLS: with TLS on and client certificates required, gRPC,
// go-zookeeper and a four-letter word all work over TLS on the one port;
// a plaintext client of either protocol, a client without a certificate,
// with a certificate of another CA or an expired one are refused, each
// logged once however often it retries; and the clients that did connect
// are served throughout.
func TestClientPortTLS(t *testing.T) {
	p := newTestPKI(t)
	other := newTestPKI(t)
	server := p.issue("server", tlsutil.ServerCert, "127.0.0.1")
	alice := p.issue("alice", tlsutil.ClientCert)
	mallory := other.issue("mallory", tlsutil.ClientCert)
	now := time.Now()
	expired := p.issueValid("expired", tlsutil.ClientCert, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	logs := &logLines{}
	n := newTestNodeWith(t, "1", func(c *Config) {
		c.ClientTLS = server
		c.ClientCertAuth = true
		c.Logger = slog.New(logs)
	})
	waitLeader(t, n)
	addr := n.ClientAddr()
	good := p.clientTLS(&alice)

	if err := tlsSession(addr, good, "/grpc"); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	zc := zkOverTLS(t, addr, good)
	if _, err := zc.Create("/zk", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("go-zookeeper over TLS: %v", err)
	}
	word := func() (string, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, good)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ruok")); err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if got, err := word(); got != "imok" {
		t.Fatalf("ruok over TLS: %q %v", got, err)
	}

	const tries = 5
	refusals := []struct {
		name   string
		try    func() error
		reason string
	}{
		{"plaintext gRPC", func() error {
			cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return err
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err = apipb.NewCoordClient(cc).Status(ctx, &apipb.StatusRequest{}, grpc.WaitForReady(false))
			return err
		}, "speaks plaintext and this port is TLS-only"},
		{"plaintext jute", func() error {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			connect := append([]byte{0, 0, 0, 44}, make([]byte, 44)...)
			if _, err := c.Write(connect); err != nil {
				return err
			}
			if _, err := c.Read(make([]byte, 1)); err != nil {
				return err
			}
			return nil
		}, "speaks plaintext and this port is TLS-only"},
		{"no client certificate", func() error { return tlsSession(addr, p.clientTLS(nil), "/nocert") }, "presented no client certificate"},
		{"another CA", func() error { return tlsSession(addr, p.clientTLS(&mallory), "/mallory") }, "not signed by a CA in this server's --trusted-ca-file"},
		{"expired", func() error { return tlsSession(addr, p.clientTLS(&expired), "/expired") }, "expired"},
	}
	for _, r := range refusals {
		for i := 0; i < tries; i++ {
			if err := r.try(); err == nil {
				t.Fatalf("%s: accepted", r.name)
			}
		}
		waitUntil(t, r.name+" logged", func() bool { return logs.count("client port: refused", r.reason) > 0 })
		// The good clients are still served.
		if _, err := zc.Set("/zk", []byte(r.name), -1); err != nil {
			t.Fatalf("after %s: go-zookeeper: %v", r.name, err)
		}
	}
	if err := tlsSession(addr, good, "/grpc2"); err != nil {
		t.Fatalf("gRPC over TLS after the refusals: %v", err)
	}
	for _, r := range refusals {
		if c := logs.count("client port: refused", r.reason); c != 1 {
			t.Errorf("%s: logged %d times for %d tries, want once", r.name, c, tries)
		}
	}
}

// TestClientPortTLSOptionalCertificate: without --client-cert-auth a
// client without a certificate is served, and one with a certificate of
// its CA too.
func TestClientPortTLSOptionalCertificate(t *testing.T) {
	p := newTestPKI(t)
	server := p.issue("server", tlsutil.ServerCert, "127.0.0.1")
	alice := p.issue("alice", tlsutil.ClientCert)
	n := newTestNodeWith(t, "1", func(c *Config) { c.ClientTLS = server })
	waitLeader(t, n)
	if err := tlsSession(n.ClientAddr(), p.clientTLS(nil), "/a"); err != nil {
		t.Fatal(err)
	}
	if err := tlsSession(n.ClientAddr(), p.clientTLS(&alice), "/b"); err != nil {
		t.Fatal(err)
	}
}

// TestPlaintextPortRefusesTLS: a TLS client of a plaintext port is
// refused, once in the log.
func TestPlaintextPortRefusesTLS(t *testing.T) {
	p := newTestPKI(t)
	logs := &logLines{}
	n := newTestNodeWith(t, "1", func(c *Config) { c.Logger = slog.New(logs) })
	waitLeader(t, n)
	for i := 0; i < 3; i++ {
		if err := tlsSession(n.ClientAddr(), p.clientTLS(nil), "/a"); err == nil {
			t.Fatal("a TLS client was served by a plaintext port")
		}
	}
	waitUntil(t, "the refusal logged", func() bool { return logs.count("speaks TLS and TLS is off") > 0 })
	if c := logs.count("speaks TLS and TLS is off"); c != 1 {
		t.Fatalf("logged %d times", c)
	}
}

// TestClientPortHandsOnTheTLSState: the connection the client port hands
// to a front-end reports the TLS handshake, with the client's verified
// certificate, and gRPC's credentials put it in the call's peer.
func TestClientPortHandsOnTheTLSState(t *testing.T) {
	p := newTestPKI(t)
	server := p.issue("server", tlsutil.ServerCert, "127.0.0.1")
	alice := p.issue("alice", tlsutil.ClientCert)
	src, err := tlsutil.Load(server, tlsutil.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{clientTLS: tlsutil.ServerConfig(src, true), refusals: newRefusals(slog.New(slog.DiscardHandler))}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	n.grpcClients = newMuxListener(ln.Addr())
	defer n.grpcClients.close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			n.routeClient(c)
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), p.clientTLS(&alice))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	got, err := n.grpcClients.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	ts, ok := got.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		t.Fatalf("%T does not report its TLS state", got)
	}
	if chains := ts.ConnectionState().VerifiedChains; len(chains) == 0 || chains[0][0].Subject.CommonName != "alice" {
		t.Fatalf("verified chains %v", chains)
	}
	pre := make([]byte, 4)
	if _, err := io.ReadFull(got, pre); err != nil || string(pre) != "PRI " {
		t.Fatalf("the first bytes are not read again: %q %v", pre, err)
	}
	_, info, err := handshaken{}.ServerHandshake(got)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := info.(credentials.TLSInfo)
	if !ok || ti.State.PeerCertificates[0].Subject.CommonName != "alice" {
		t.Fatalf("auth info %#v", info)
	}
	if _, _, err := (handshaken{}).ServerHandshake(newPrefixConn(got, nil)); err == nil {
		t.Fatal("handshaken accepted a connection without TLS")
	}
}

// TestNewNodeRefusesBadTLSFiles: a key that does not match its
// certificate, or a peer certificate that does not name the peer address,
// stops the server at startup with an error naming the files, and leaves
// its ports free.
func TestNewNodeRefusesBadTLSFiles(t *testing.T) {
	p := newTestPKI(t)
	server := p.issue("server", tlsutil.ServerCert, "127.0.0.1")
	other := p.issue("other", tlsutil.ServerCert, "127.0.0.1")
	peer := p.issue("peer", tlsutil.PeerCert, "127.0.0.9")
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"mismatched key", func(c *Config) { c.ClientTLS = tlsutil.Files{Cert: server.Cert, Key: other.Key} },
			[]string{"--key-file " + other.Key, "is not the private key of --cert-file " + server.Cert}},
		{"peer certificate for another host", func(c *Config) { c.PeerTLS = peer },
			[]string{"--peer-cert-file " + peer.Cert, "does not name 127.0.0.1"}},
		{"peer TLS without a CA", func(c *Config) { c.PeerTLS = tlsutil.Files{Cert: peer.Cert, Key: peer.Key} },
			[]string{"--peer-trusted-ca-file"}},
		{"client-cert-auth without a CA", func(c *Config) {
			c.ClientTLS = tlsutil.Files{Cert: server.Cert, Key: server.Key}
			c.ClientCertAuth = true
		}, []string{"--client-cert-auth needs", "--trusted-ca-file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, "1")
			tc.edit(&c)
			_, err := NewNode(c)
			if err == nil {
				t.Fatal("started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, a := range []string{c.ClientAddr, c.PeerAddr} {
				ln, err := net.Listen("tcp", a)
				if err != nil {
					t.Fatalf("%s still taken: %v", a, err)
				}
				ln.Close()
			}
		})
	}
}

// tlsCluster starts three servers with TLS on both ports, each with a peer
// certificate of its own (all on 127.0.0.1), and client certificates
// required.
func tlsCluster(t *testing.T, p *testPKI, logs *logLines) ([]*Node, *Node) {
	t.Helper()
	server := p.issue("server", tlsutil.ServerCert, "127.0.0.1")
	var i atomic.Int32
	return threeNodes(t, func(c *Config) {
		c.ClientTLS = server
		c.ClientCertAuth = true
		c.PeerTLS = p.issue(fmt.Sprintf("peer%d", i.Add(1)), tlsutil.PeerCert, "127.0.0.1")
		if logs != nil {
			c.Logger = slog.New(logs)
		}
	})
}

// peerDial opens a connection to a peer port with cfg (nil: plaintext),
// sends the Raft tag and reads; it returns the TLS state (if any) and the
// error the refusal shows as.
func peerDial(addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	var c net.Conn = raw
	var st tls.ConnectionState
	if cfg != nil {
		tc := tls.Client(raw, cfg)
		if err := tc.Handshake(); err != nil {
			return st, err
		}
		st = tc.ConnectionState()
		c = tc
	}
	if _, err := c.Write([]byte{tagPeer}); err != nil {
		return st, err
	}
	// A refused connection is closed; an accepted one waits for HTTP/2.
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return st, nil
	}
	if err == nil {
		return st, nil
	}
	return st, err
}

// TestPeerTLS: three servers with TLS on both ports elect a leader and
// forward writes; a plaintext peer, a peer with a certificate of another
// CA and one whose certificate names another address are refused, each
// logged once, and the cluster serves meanwhile.
func TestPeerTLS(t *testing.T) {
	p := newTestPKI(t)
	logs := &logLines{}
	nodes, leader := tlsCluster(t, p, logs)
	alice := p.issue("alice", tlsutil.ClientCert)
	var follower *Node
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}
	// A write through a follower crosses the peer port twice: forwarded
	// over the peer service, replicated by Raft.
	if err := tlsSession(follower.ClientAddr(), p.clientTLS(&alice), "/forwarded"); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitUntil(t, "the write on every server", func() bool {
			var err error
			n.FSM().Read(func(v fsm.View) { _, err = v.Tree.Exists("/forwarded") })
			return err == nil
		})
	}

	other := newTestPKI(t)
	stranger := other.issue("stranger", tlsutil.PeerCert, "127.0.0.1")
	// It trusts our CA, so that our server sees its certificate.
	strangerTLS := other.clientTLS(&stranger)
	strangerTLS.RootCAs.AddCert(p.ca.Cert)
	elsewhere := p.issue("elsewhere", tlsutil.PeerCert, "127.0.0.9")
	genuine := p.issue("genuine", tlsutil.PeerCert, "127.0.0.1")
	target := leader.cfg.PeerAddr
	for _, r := range []struct {
		name   string
		cfg    *tls.Config
		reason string
	}{
		{"plaintext", nil, "peer port: refused a connection from 127.0.0.1: it speaks plaintext"},
		{"another CA", strangerTLS, "not signed by a CA in this server's --peer-trusted-ca-file"},
		{"another address", p.clientTLS(&elsewhere), "names 127.0.0.9, not 127.0.0.1"},
	} {
		for i := 0; i < 4; i++ {
			if _, err := peerDial(target, r.cfg); err == nil {
				t.Fatalf("%s: accepted", r.name)
			}
		}
		waitUntil(t, r.name+" logged", func() bool { return logs.count(r.reason) > 0 })
		if c := logs.count(r.reason); c != 1 {
			t.Errorf("%s: logged %d times, want once", r.name, c)
		}
		if err := tlsSession(follower.ClientAddr(), p.clientTLS(&alice), "/after-"+strings.ReplaceAll(r.name, " ", "-")); err != nil {
			t.Fatalf("after %s: %v", r.name, err)
		}
	}
	if _, err := peerDial(target, p.clientTLS(&genuine)); err != nil {
		t.Fatalf("a genuine peer was refused: %v", err)
	}
}

// servedSerial is the serial of the certificate a TLS port serves to a new
// connection made with cfg.
func servedSerial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestTLSRotationUnderLoad: while clients write and read, and new clients
// connect, on every server of a three-server cluster with TLS on both
// ports, the certificates are rotated twice, a new CA brought in (a bundle
// of old and new first, then certificates of the new one), each file
// rewritten separately; new connections get the new certificates, and no
// request fails.
func TestTLSRotationUnderLoad(t *testing.T) {
	p := newTestPKI(t)
	nodes, _ := tlsCluster(t, p, nil)
	var servers []string
	for _, n := range nodes {
		servers = append(servers, n.ClientAddr())
	}
	alice := p.issue("alice", tlsutil.ClientCert)
	clientCfg := p.clientTLS(&alice)
	// The clients trust the next CA from the start (an operator hands it to
	// the clients before the servers use it).
	next, err := tlsutil.NewCA("next CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	clientCfg.RootCAs.AddCert(next.Cert)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		stop     atomic.Bool
		ops      atomic.Int64
		failures = make(chan error, 100)
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		select {
		case failures <- err:
		default:
		}
	}
	const workers = 3
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cl, err := client.Connect(ctx, []string{servers[w]}, client.WithTLS(clientCfg), client.WithSessionTimeout(4*time.Second))
			if err != nil {
				fail(fmt.Errorf("worker %d: connect: %w", w, err))
				return
			}
			defer cl.Close(context.Background())
			path := fmt.Sprintf("/w%d", w)
			if _, err := cl.Create(ctx, path, nil, client.CreateMode{}); err != nil {
				fail(err)
				return
			}
			for i := 0; i < 5000 && !stop.Load(); i++ {
				if _, err := cl.Set(ctx, path, []byte(fmt.Sprint(i)), -1); err != nil {
					fail(fmt.Errorf("worker %d: set: %w", w, err))
					return
				}
				if _, _, err := cl.Get(ctx, path); err != nil {
					fail(fmt.Errorf("worker %d: get: %w", w, err))
					return
				}
				ops.Add(2)
			}
		}(w)
	}
	// New sessions, each a new TLS handshake, throughout.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 2000 && !stop.Load(); i++ {
			cl, err := client.Connect(ctx, []string{servers[i%len(servers)]}, client.WithTLS(clientCfg), client.WithSessionTimeout(4*time.Second))
			if err != nil {
				fail(fmt.Errorf("new session %d: %w", i, err))
				return
			}
			_, _, err = cl.Exists(ctx, "/")
			cl.Close(context.Background())
			if err != nil {
				fail(fmt.Errorf("new session %d: exists: %w", i, err))
				return
			}
			ops.Add(1)
		}
	}()

	// rotate writes a new certificate and key for every file of the
	// cluster, signed by ca, certificate first and key after, then waits
	// until new connections to every port get the new ones.
	probe := p.issue("probe", tlsutil.PeerCert, "127.0.0.1")
	peerProbe := p.clientTLS(&probe)
	peerProbe.RootCAs.AddCert(next.Cert)
	rotate := func(ca *tlsutil.CA) {
		now := time.Now()
		issue := func(f tlsutil.Files, kind tlsutil.CertKind, name string) string {
			certPEM, keyPEM, err := ca.Issue(tlsutil.Request{Kind: kind, Name: name, Hosts: []string{"127.0.0.1"},
				NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if err := tlsutil.WriteFileAtomic(f.Cert, certPEM, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tlsutil.WriteFileAtomic(f.Key, keyPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			blk, _ := pem.Decode(certPEM)
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return cert.SerialNumber.String()
		}
		serverSerial := issue(nodes[0].cfg.ClientTLS, tlsutil.ServerCert, "server")
		for _, n := range nodes {
			peerSerial := issue(n.cfg.PeerTLS, tlsutil.PeerCert, "peer")
			waitUntil(t, "the new certificate on "+n.ClientAddr(), func() bool {
				return servedSerial(t, n.ClientAddr(), clientCfg) == serverSerial
			})
			waitUntil(t, "the new certificate on "+n.cfg.PeerAddr, func() bool {
				return servedSerial(t, n.cfg.PeerAddr, peerProbe) == peerSerial
			})
		}
	}
	waitUntil(t, "load", func() bool { return ops.Load() > 50 })
	rotate(p.ca)
	// A new CA: first every CA file holds both, then certificates of the
	// new one.
	p.writeCA(append(append([]byte{}, p.ca.CertPEM...), next.CertPEM...))
	rotate(next)
	before := ops.Load()
	waitUntil(t, "load after the rotations", func() bool { return ops.Load() > before+50 })
	stop.Store(true)
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	t.Logf("%d operations", ops.Load())
}

// TestPeerHandshakeError: a refused certificate says what to check; a peer
// that is down or cut off says nothing about certificates.
func TestPeerHandshakeError(t *testing.T) {
	refused := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	for _, tc := range []struct {
		err  error
		hint bool
	}{
		{refused, true},
		{&tlsutil.AddressError{Remote: "127.0.0.1"}, true},
		{errors.New("remote error: tls: bad certificate"), true},
		{io.EOF, false},
		{errors.New("read tcp 127.0.0.1:1->127.0.0.2:2: read: connection reset by peer"), false},
	} {
		got := peerHandshakeError("127.0.0.2:2888", tc.err).Error()
		if strings.Contains(got, "--peer-trusted-ca-file") != tc.hint || !strings.Contains(got, tc.err.Error()) {
			t.Errorf("%v: %q", tc.err, got)
		}
	}
}
