package rpc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/grpcapi"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and client
// certificates, made for one test.
type testPKI struct {
	t      *testing.T
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial int64
}

func newTestPKI(t *testing.T) *testPKI {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &testPKI{t: t, ca: ca, caKey: key, pool: pool, serial: 1}
}

// cert issues a certificate for subject (a server's for 127.0.0.1 when
// server is set).
func (p *testPKI) cert(subject pkix.Name, server bool) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		p.t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (p *testPKI) serverConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.cert(pkix.Name{CommonName: "server"}, true)},
		ClientAuth:   tls.VerifyClientCertIfGiven, ClientCAs: p.pool, MinVersion: tls.VersionTLS12,
	}
}

func (p *testPKI) clientConfig(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.pool, Certificates: certs, MinVersion: tls.VersionTLS12}
}

// TestX509Scheme: a client whose certificate the server verified is
// x509:<its subject> (RFC 2253, as ZooKeeper names it), over ZooKeeper's
// protocol and gRPC alike: whoAmI says so, an x509 ACL lets it in and keeps
// others out, the auth scheme stands for it, and addAuth x509 succeeds. A
// client without a certificate has no such identity. Each front-end is
// served on a TLS listener made here (the server's own client port is
// plaintext in this test).
func TestX509Scheme(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	pki := newTestPKI(t)
	const subject = "CN=alice,OU=dev,O=coordd"
	alice := pki.cert(pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"dev"}, Organization: []string{"coordd"}}, false)

	// ZooKeeper's protocol on a TLS listener.
	zln, err := tls.Listen("tcp", "127.0.0.1:0", pki.serverConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zln.Close() })
	go func() {
		for {
			c, err := zln.Accept()
			if err != nil {
				return
			}
			go n.zk.ServeConn(c)
		}
	}()
	dialTLS := func(certs ...tls.Certificate) *zkRaw {
		c, err := tls.Dial("tcp", zln.Addr().String(), pki.clientConfig(certs...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		z := &zkRaw{t: t, c: c}
		if resp := z.connect(jute.ConnectRequest{TimeOut: 4000, Passwd: make([]byte, 16)}); resp.SessionID == 0 {
			t.Fatal("no session")
		}
		return z
	}
	za, zanon := dialTLS(alice), dialTLS()
	whoAmI := func(z *zkRaw) []jute.ClientInfo {
		h, r := z.call(jute.OpWhoAmI, &jute.Empty{})
		var w jute.WhoAmIResponse
		if h.Err != jute.CodeOK || w.Decode(r) != nil {
			t.Fatalf("whoAmI: %v", h.Err)
		}
		return w.ClientInfo
	}
	if got := whoAmI(za); len(got) != 2 || got[1] != (jute.ClientInfo{AuthScheme: "x509", User: subject}) {
		t.Fatalf("whoAmI with a certificate: %v", got)
	}
	if got := whoAmI(zanon); len(got) != 1 || got[0].AuthScheme != "ip" {
		t.Fatalf("whoAmI without one: %v", got)
	}
	x509ACL := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "x509", ID: subject}}}
	if h, _ := za.call(jute.OpCreate, &jute.CreateRequest{Path: "/alice", ACL: x509ACL}); h.Err != jute.CodeOK {
		t.Fatalf("create with an x509 ACL: %v", h.Err)
	}
	if h, _ := za.call(jute.OpSetData, &jute.SetDataRequest{Path: "/alice", Version: -1}); h.Err != jute.CodeOK {
		t.Fatalf("alice writes: %v", h.Err)
	}
	if h, _ := zanon.call(jute.OpGetData, &jute.GetDataRequest{Path: "/alice"}); h.Err != jute.CodeNoAuth {
		t.Fatalf("no certificate reads: %v", h.Err)
	}
	// auth stands for the certificate's identity.
	auth := []jute.ACL{{Perms: jute.PermRead, ID: jute.ID{Scheme: "auth"}}}
	if h, _ := za.call(jute.OpCreate, &jute.CreateRequest{Path: "/mine", ACL: auth}); h.Err != jute.CodeOK {
		t.Fatalf("create with auth: %v", h.Err)
	}
	h, r := za.call(jute.OpGetACL, &jute.GetACLRequest{Path: "/mine"})
	var g jute.GetACLResponse
	if h.Err != jute.CodeOK || g.Decode(r) != nil || len(g.ACL) != 1 || g.ACL[0].ID != (jute.ID{Scheme: "x509", ID: subject}) {
		t.Fatalf("getACL /mine: %v %+v", h.Err, g)
	}
	if h, _ := zanon.call(jute.OpCreate, &jute.CreateRequest{Path: "/theirs", ACL: auth}); h.Err != jute.CodeInvalidACL {
		t.Fatalf("auth without a certificate: %v", h.Err)
	}
	if code := authX509(za); code != jute.CodeOK {
		t.Fatalf("addAuth x509 with a certificate: %v", code)
	}
	if code := authX509(zanon); code != jute.CodeAuthFailed {
		t.Fatalf("addAuth x509 without: %v", code)
	}

	// gRPC on a TLS listener.
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(pki.serverConfig())))
	apipb.RegisterCoordServer(gs, grpcapi.New(n.engine, grpcapi.Config{ServerID: "1"}))
	go func() { _ = gs.Serve(gln) }()
	t.Cleanup(gs.Stop)
	session := func(certs ...tls.Certificate) apipb.Coord_SessionClient {
		cc, err := grpc.NewClient("passthrough:///"+gln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(pki.clientConfig(certs...))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		st, err := apipb.NewCoordClient(cc).Session(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Connect{Connect: &apipb.ConnectRequest{TimeoutMs: 4000}}}); err != nil {
			t.Fatal(err)
		}
		if m, err := st.Recv(); err != nil || m.GetConnected() == nil {
			t.Fatalf("connect: %v %v", m, err)
		}
		return st
	}
	do := func(st apipb.Coord_SessionClient, xid int64, req *apipb.Request) *apipb.Response {
		req.Xid = xid
		if err := st.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: req}}); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if r := m.GetResponse(); r != nil {
				return r
			}
		}
	}
	ga, ganon := session(alice), session()
	r1 := do(ga, 1, &apipb.Request{Op: &apipb.Request_WhoAmI{WhoAmI: &apipb.WhoAmIRequest{}}})
	if ids := r1.GetWhoAmI().GetIdentities(); len(ids) != 2 || ids[1].Scheme != "x509" || ids[1].Id != subject {
		t.Fatalf("gRPC whoAmI: %v", r1)
	}
	if r := do(ga, 2, &apipb.Request{Op: &apipb.Request_SetData{SetData: &apipb.SetDataRequest{Path: "/alice", Version: -1}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("gRPC alice writes: %v", r)
	}
	if r := do(ganon, 1, &apipb.Request{Op: &apipb.Request_SetData{SetData: &apipb.SetDataRequest{Path: "/alice", Version: -1}}}); r.Error != apipb.ErrorCode_NO_AUTH {
		t.Fatalf("gRPC without a certificate writes: %v", r)
	}
}

// authX509 sends addAuth x509 as the Java client does (xid -4) and returns
// the reply's code.
func authX509(z *zkRaw) jute.Code {
	z.t.Helper()
	z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidAuth, Type: jute.OpAuth}, &jute.AuthPacket{Scheme: "x509"}))
	var h jute.ReplyHeader
	if err := h.Decode(jute.NewReader(z.frame())); err != nil || h.Xid != jute.XidAuth {
		z.t.Fatalf("auth reply %+v: %v", h, err)
	}
	return h.Err
}
