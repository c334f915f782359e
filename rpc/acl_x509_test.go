package rpc

import (
	"context"
	"crypto/tls"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/tlsutil"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// TestX509Scheme: a client whose certificate the server verified is
// x509:<its subject> (RFC 2253, as ZooKeeper names it), over ZooKeeper's
// protocol and gRPC alike, on the server's own TLS client port (a client
// certificate verified when given): whoAmI says so, an x509 ACL lets it in
// and keeps others out, the auth scheme stands for it, and addAuth x509
// succeeds. A client without a certificate has no such identity.
func TestX509Scheme(t *testing.T) {
	p := newTestPKI(t)
	serverFiles := p.issue("server", tlsutil.ServerCert, "127.0.0.1")
	aliceFiles := p.issue("alice", tlsutil.ClientCert)
	n := newTestNodeWith(t, "1", func(c *Config) { c.ClientTLS = serverFiles })
	waitLeader(t, n)
	const subject = "CN=alice,O=coordd"

	dialTLS := func(files *tlsutil.Files) *zkRaw {
		c, err := tls.Dial("tcp", n.ClientAddr(), p.clientTLS(files))
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
	za, zanon := dialTLS(&aliceFiles), dialTLS(nil)
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

	// gRPC on the same port.
	session := func(files *tlsutil.Files) apipb.Coord_SessionClient {
		cc, err := grpc.NewClient("passthrough:///"+n.ClientAddr(), grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS(files))))
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
	ga, ganon := session(&aliceFiles), session(nil)
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
