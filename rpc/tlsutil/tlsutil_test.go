package tlsutil

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pki is a CA and a directory to write certificates in.
type pki struct {
	t   *testing.T
	dir string
	ca  *CA
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	now := time.Now()
	ca, err := NewCA("test CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, dir: t.TempDir(), ca: ca}
}

// issue writes name.crt and name.key, valid for a day, and the CA as
// ca.crt; it returns the files.
func (p *pki) issue(name string, kind CertKind, hosts ...string) Files {
	p.t.Helper()
	now := time.Now()
	return p.issueValid(name, kind, now.Add(-time.Hour), now.Add(24*time.Hour), hosts...)
}

func (p *pki) issueValid(name string, kind CertKind, from, to time.Time, hosts ...string) Files {
	p.t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(Request{Kind: kind, Name: name, Hosts: hosts, NotBefore: from, NotAfter: to})
	if err != nil {
		p.t.Fatal(err)
	}
	if err := WritePair(p.dir, name, certPEM, keyPEM); err != nil {
		p.t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(p.dir, "ca.crt"), p.ca.CertPEM, 0o644); err != nil {
		p.t.Fatal(err)
	}
	return Files{Cert: filepath.Join(p.dir, name+".crt"), Key: filepath.Join(p.dir, name+".key"), CA: filepath.Join(p.dir, "ca.crt")}
}

// clientConfig trusts p's CA and presents cert (if any).
func (p *pki) clientConfig(f *Files) *tls.Config {
	p.t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	c := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if f != nil {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			p.t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

func TestLoadRefusesBadFiles(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	server := p.issue("server", ServerCert, "127.0.0.1")
	client := p.issue("client", ClientCert)
	peer := p.issue("peer", PeerCert, "127.0.0.1")
	foreignPeer := other.issue("peer", PeerCert, "127.0.0.1")
	now := time.Now()
	expired := p.issueValid("old", ServerCert, now.Add(-48*time.Hour), now.Add(-24*time.Hour), "127.0.0.1")
	empty := filepath.Join(p.dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("nothing here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := Flags{Cert: "--cert-file", Key: "--key-file", CA: "--trusted-ca-file"}
	tests := []struct {
		name string
		f    Files
		opts Options
		want []string // in the error
	}{
		{"key of another certificate", Files{Cert: server.Cert, Key: client.Key}, Options{Flags: flags},
			[]string{"--key-file " + client.Key, "is not the private key of --cert-file " + server.Cert}},
		{"expired", expired, Options{Flags: flags}, []string{"--cert-file " + expired.Cert, "expired at"}},
		{"client certificate as a server's", client, Options{Flags: flags}, []string{"does not allow server authentication"}},
		{"server certificate as a peer's", server, Options{Role: RolePeer, Host: "127.0.0.1"}, []string{"does not allow client authentication"}},
		{"peer certificate of another CA", Files{Cert: foreignPeer.Cert, Key: foreignPeer.Key, CA: peer.CA}, Options{Role: RolePeer, Host: "127.0.0.1"},
			[]string{"is not signed by CA " + peer.CA}},
		{"peer certificate without the peer host", peer, Options{Role: RolePeer, Host: "127.0.0.2"},
			[]string{"does not name 127.0.0.2, the host of this server's peer address"}},
		{"peer without a CA", Files{Cert: peer.Cert, Key: peer.Key}, Options{Role: RolePeer, Host: "127.0.0.1"}, []string{"CA is required"}},
		{"no certificate in the file", Files{Cert: empty, Key: server.Key}, Options{Flags: flags}, []string{"--cert-file " + empty + " holds no PEM certificate"}},
		{"no CA in the file", Files{Cert: server.Cert, Key: server.Key, CA: empty}, Options{Flags: flags}, []string{"--trusted-ca-file " + empty + " holds no PEM certificate"}},
		{"missing file", Files{Cert: filepath.Join(p.dir, "nope.crt"), Key: server.Key}, Options{Flags: flags}, []string{"--cert-file", "no such file"}},
		{"key without certificate flag", Files{Cert: server.Cert}, Options{Flags: flags}, []string{"without --key-file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.f, tc.opts)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	for _, ok := range []struct {
		f    Files
		opts Options
	}{{server, Options{}}, {peer, Options{Role: RolePeer, Host: "127.0.0.1"}}} {
		if _, err := Load(ok.f, ok.opts); err != nil {
			t.Errorf("good files refused: %v", err)
		}
	}
}

// fakeClock is a clock tests move.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// logCount counts log records whose message contains a word.
type logCount struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCount) WithGroup(string) slog.Handler      { return l }
func (l *logCount) count(word string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, word) {
			n++
		}
	}
	return n
}

func serial(c *tls.Certificate) string { return c.Leaf.SerialNumber.String() }

// TestSourceReloads: a changed certificate is used after CheckInterval; a
// rotation caught half-way (new certificate, old key) keeps the old pair,
// says so once, and completes when the key is written; a bad file never
// replaces a good one.
func TestSourceReloads(t *testing.T) {
	p := newPKI(t)
	f := p.issue("server", ServerCert, "127.0.0.1")
	clock := &fakeClock{now: time.Now()}
	logs := &logCount{}
	src, err := Load(f, Options{Now: clock.Now, CheckInterval: time.Second, Logger: slog.New(logs), Port: "client port"})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := src.Current()

	// A new pair, written certificate first.
	certPEM, keyPEM, err := p.ca.Issue(Request{Kind: ServerCert, Name: "server2", Hosts: []string{"127.0.0.1"},
		NotBefore: clock.Now().Add(-time.Hour), NotAfter: clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(f.Cert, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if c, _ := src.Current(); serial(c) != serial(first) {
		t.Fatal("reloaded before CheckInterval")
	}
	clock.add(time.Second)
	for i := 0; i < 3; i++ {
		if c, _ := src.Current(); serial(c) != serial(first) {
			t.Fatal("used a certificate without its key")
		}
		clock.add(time.Second)
	}
	if n := logs.count("cannot be used"); n != 1 {
		t.Fatalf("the half-written rotation was logged %d times, want once", n)
	}
	if err := WriteFileAtomic(f.Key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := src.Current()
	if serial(c) == serial(first) || c.Leaf.Subject.CommonName != "server2" {
		t.Fatalf("not reloaded: %s", c.Leaf.Subject.CommonName)
	}
	if logs.count("reloaded") != 1 {
		t.Fatal("the reload was not logged")
	}

	// Garbage in the certificate file: the loaded pair stays.
	if err := WriteFileAtomic(f.Cert, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Second)
	if got, _ := src.Current(); serial(got) != serial(c) {
		t.Fatal("a bad file replaced a good certificate")
	}
}

// TestSourceReloadsCA: a client certificate of a new CA is refused until
// the CA bundle holds that CA, and accepted after, with no restart.
func TestSourceReloadsCA(t *testing.T) {
	p := newPKI(t)
	f := p.issue("server", ServerCert, "127.0.0.1")
	clock := &fakeClock{now: time.Now()}
	src, err := Load(f, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	newCA := newPKI(t)
	cf := newCA.issue("client", ClientCert)
	cc := p.clientConfig(&cf)
	if err := handshake(t, ServerConfig(src, true), cc); err == nil {
		t.Fatal("a client of an unknown CA was accepted")
	}
	bundle := append(append([]byte{}, p.ca.CertPEM...), newCA.ca.CertPEM...)
	if err := WriteFileAtomic(f.CA, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Second)
	if err := handshake(t, ServerConfig(src, true), cc); err != nil {
		t.Fatalf("refused after the CA bundle changed: %v", err)
	}
}

// handshake runs a TLS handshake between server and client configurations
// over loopback and returns the server's error (or the client's).
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	sErr, cErr := handshakeFrom(t, "127.0.0.1", server, client)
	if sErr != nil {
		return sErr
	}
	return cErr
}

// handshakeFrom is handshake with the client dialing from localIP; it
// returns both sides' errors. TLS 1.3 clients learn of a refusal of their
// certificate only when they read, so the client reads a byte the server
// writes.
func handshakeFrom(t *testing.T, localIP string, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, server)
		if err := tc.Handshake(); err != nil {
			done <- err
			return
		}
		_, err = tc.Write([]byte{1})
		done <- err
	}()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(localIP)}}
	raw, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(raw, client)
	clientErr = tc.Handshake()
	if clientErr == nil {
		var b [1]byte
		_, clientErr = tc.Read(b[:])
	}
	return <-done, clientErr
}

// TestServerConfigRefusals: each refusal the client port makes, and the
// words Explain gives it.
func TestServerConfigRefusals(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	f := p.issue("server", ServerCert, "127.0.0.1")
	src, err := Load(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := p.issue("client", ClientCert)
	foreign := other.issue("client", ClientCert)
	now := time.Now()
	expired := p.issueValid("expired", ClientCert, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	serverCert := p.issue("server2", ServerCert, "127.0.0.1")

	if err := handshake(t, ServerConfig(src, true), p.clientConfig(&good)); err != nil {
		t.Fatalf("good client refused: %v", err)
	}
	if err := handshake(t, ServerConfig(src, false), p.clientConfig(nil)); err != nil {
		t.Fatalf("client without a certificate refused without --client-cert-auth: %v", err)
	}
	for _, tc := range []struct {
		name    string
		require bool
		client  *Files
		kind    string
	}{
		{"no certificate", true, nil, KindNoCert},
		{"another CA", true, &foreign, KindUnknownCA},
		{"another CA, certificate optional", false, &foreign, KindUnknownCA},
		{"expired", true, &expired, KindExpired},
		{"server certificate as a client's", true, &serverCert, KindBadUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serr, cerr := handshakeFrom(t, "127.0.0.1", ServerConfig(src, tc.require), p.clientConfig(tc.client))
			if serr == nil || cerr == nil {
				t.Fatalf("accepted: server %v, client %v", serr, cerr)
			}
			if r := Explain(serr, false); r.Kind != tc.kind {
				t.Fatalf("explained %v as %+v, want %s", serr, r, tc.kind)
			}
		})
	}

	// The client refuses a server certificate of another CA; the server
	// hears of it as a remote error.
	cc := other.clientConfig(nil)
	serr, cerr := handshakeFrom(t, "127.0.0.1", ServerConfig(src, false), cc)
	if cerr == nil || !strings.Contains(cerr.Error(), "unknown authority") {
		t.Fatalf("client: %v", cerr)
	}
	if r := Explain(serr, false); r.Kind != KindRemote {
		t.Fatalf("server's error %v explained as %+v", serr, r)
	}
}

// TestServerConfigALPN: h2 is selected only for a client that offers it;
// a client that offers other protocols only is not refused.
func TestServerConfigALPN(t *testing.T) {
	p := newPKI(t)
	src, err := Load(p.issue("server", ServerCert, "127.0.0.1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, offer := range [][]string{nil, {"h2"}, {"http/1.1"}} {
		cc := p.clientConfig(nil)
		cc.NextProtos = offer
		if err := handshake(t, ServerConfig(src, false), cc); err != nil {
			t.Errorf("ALPN %v: %v", offer, err)
		}
	}
}

// TestPeerConfigs: peers verify each other's CA and address, both ways.
func TestPeerConfigs(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	a := p.issue("a", PeerCert, "127.0.0.1")
	b := p.issue("b", PeerCert, "127.0.0.2")
	x := other.issue("x", PeerCert, "127.0.0.3")
	load := func(f Files, host string) *Source {
		s, err := Load(f, Options{Role: RolePeer, Host: host})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sa, sb := load(a, "127.0.0.1"), load(b, "127.0.0.2")
	sx := load(Files{Cert: x.Cert, Key: x.Key, CA: filepath.Join(other.dir, "ca.crt")}, "127.0.0.3")
	// y trusts both CAs, but its certificate is the other CA's.
	bundle := filepath.Join(t.TempDir(), "bundle.crt")
	if err := os.WriteFile(bundle, append(append([]byte{}, p.ca.CertPEM...), other.ca.CertPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	sy := load(Files{Cert: x.Cert, Key: x.Key, CA: bundle}, "127.0.0.3")

	// b dials a (listening on 127.0.0.1) from its own address: accepted.
	serr, cerr := handshakeFrom(t, "127.0.0.2", PeerServerConfig(sa), PeerClientConfig(sb, "127.0.0.1:1"))
	if serr != nil || cerr != nil {
		t.Fatalf("peers refused each other: server %v, client %v", serr, cerr)
	}
	// b dials from an address its certificate does not name.
	serr, _ = handshakeFrom(t, "127.0.0.4", PeerServerConfig(sa), PeerClientConfig(sb, "127.0.0.1:1"))
	var ae *AddressError
	if !errors.As(serr, &ae) || Explain(serr, true).Kind != KindAddress {
		t.Fatalf("wrong source address: %v", serr)
	}
	// x, of another CA, dials a: x refuses a's certificate, and a hears
	// of it.
	serr, cerr = handshakeFrom(t, "127.0.0.3", PeerServerConfig(sa), PeerClientConfig(sx, "127.0.0.1:1"))
	if r := Explain(serr, true); r.Kind != KindRemote || cerr == nil {
		t.Fatalf("another CA's peer: %v explained as %+v (dialer: %v)", serr, r, cerr)
	}
	// y trusts a's CA but has the other's certificate: a refuses it.
	serr, _ = handshakeFrom(t, "127.0.0.3", PeerServerConfig(sa), PeerClientConfig(sy, "127.0.0.1:1"))
	if r := Explain(serr, true); r.Kind != KindUnknownCA {
		t.Fatalf("another CA's peer: %v explained as %+v", serr, r)
	}
	// a dials an address its peer's certificate does not name: the
	// dialer refuses (b's certificate names 127.0.0.2, not 127.0.0.1).
	_, cerr = handshakeFrom(t, "127.0.0.1", PeerServerConfig(sb), PeerClientConfig(sa, "127.0.0.1:1"))
	if cerr == nil || !strings.Contains(cerr.Error(), "127.0.0.1") {
		t.Fatalf("dialer accepted a peer certificate for another address: %v", cerr)
	}
}

// TestWriteLocalCluster: the files it writes load for every role, the
// combined .pem holds key and certificate, and it refuses to overwrite a
// CA.
func TestWriteLocalCluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if err := WriteLocalCluster(dir, []string{"127.0.0.1", "localhost"}, "alice", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	ca := in("ca.crt")
	if _, err := Load(Files{Cert: in("server.crt"), Key: in("server.key"), CA: ca}, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(Files{Cert: in("peer.crt"), Key: in("peer.key"), CA: ca}, Options{Role: RolePeer, Host: "localhost"}); err != nil {
		t.Fatal(err)
	}
	pemFile, err := os.ReadFile(in("client.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(pemFile, pemFile)
	if err != nil {
		t.Fatal(err)
	}
	if pair.Leaf.Subject.CommonName != "alice" {
		t.Fatalf("client name %q", pair.Leaf.Subject.CommonName)
	}
	if st, err := os.Stat(in("client.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("client.key mode: %v %v", st.Mode(), err)
	}
	before, _ := os.ReadFile(ca)
	if err := WriteLocalCluster(dir, []string{"127.0.0.1"}, "bob", time.Hour); err == nil || !strings.Contains(err.Error(), "already holds a CA") {
		t.Fatalf("overwrote: %v", err)
	}
	after, _ := os.ReadFile(ca)
	if !bytes.Equal(before, after) {
		t.Fatal("the CA changed")
	}
	loaded, err := LoadCA(ca, in("ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := loaded.Issue(Request{Kind: ClientCert, Name: "carol", NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}
