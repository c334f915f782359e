package zk

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/zk/jute"
	"github.com/coordd/coordd/rpc/zk/sasl"
	"github.com/coordd/coordd/rpc/zk/sasl/sasltest"
)

// saslUsers is the Server section of ZooKeeper's documentation.
const saslUsers = `Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="adminsecret"
    user_bob="bobsecret";
};`

// newSASLServer is a test server serving SASL with saslUsers, superUser
// being its SASL super user ("" for none).
func newSASLServer(t *testing.T, superUser string) *testServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(path, []byte(saslUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := sasl.Load(path, sasl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return newTestServerWith(t, nil, func(c *Config) { c.SASL, c.SASLSuperUser = src, superUser })
}

// header decodes a reply's header.
func header(t *testing.T, f []byte) jute.ReplyHeader {
	t.Helper()
	var h jute.ReplyHeader
	if err := h.Decode(jute.NewReader(f)); err != nil {
		t.Fatal(err)
	}
	return h
}

// saslCall sends a sasl request with tok and returns the reply's error and
// token.
func (z *rawClient) saslCall(tok []byte) (jute.Code, []byte) {
	z.t.Helper()
	f := z.call(jute.OpSASL, &jute.GetSASLRequest{Token: tok})
	h := header(z.t, f)
	var r jute.SetSASLResponse
	if err := jute.Unmarshal(f[jute.ReplyHeaderSize:], &r); err != nil {
		z.t.Fatalf("sasl reply body %x: %v", f[jute.ReplyHeaderSize:], err)
	}
	return h.Err, r.Token
}

// authenticate runs the exchange as the Java client does (an empty first
// token) and checks the server's rspauth; it returns the last step's error.
func (z *rawClient) authenticate(c sasltest.Client) jute.Code {
	z.t.Helper()
	code, ch := z.saslCall([]byte{})
	if code != jute.CodeOK || len(ch) == 0 {
		z.t.Fatalf("first step: %v, challenge %q", code, ch)
	}
	code, final := z.saslCall(c.Respond(ch))
	if code == jute.CodeOK {
		if err := c.CheckRspauth(ch, final); err != nil {
			z.t.Fatal(err)
		}
	}
	return code
}

// code sends a request and returns its reply's error.
func (z *rawClient) code(op jute.OpCode, rec jute.Encoder) jute.Code {
	z.t.Helper()
	return header(z.t, z.call(op, rec)).Err
}

// whoAmI returns the session's identities as scheme:user.
func (z *rawClient) whoAmI() []string {
	z.t.Helper()
	f := z.call(jute.OpWhoAmI, &jute.Empty{})
	var r jute.WhoAmIResponse
	if err := jute.Unmarshal(f[jute.ReplyHeaderSize:], &r); err != nil {
		z.t.Fatal(err)
	}
	var out []string
	for _, c := range r.ClientInfo {
		out = append(out, c.AuthScheme+":"+c.User)
	}
	return out
}

func has(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// closed reports whether the server closed the connection: a ping sent
// now gets no answer, only the end of the connection (an open one would
// answer it).
func (z *rawClient) closed() bool {
	_, _ = z.c.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing}))
	_ = z.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := jute.ReadFrame(z.c, 1<<20)
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func saslACL(user string) []jute.ACL {
	return []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: user}}}
}

// TestSASL: a client that proves bob's password has sasl:bob, which opens
// a node whose ACL names it and no other; the SASL user named super
// matches every sasl entry (ZooKeeper's SASLAuthenticationProvider) but no
// other scheme, unless the server names it its super user; addAuth cannot
// give a sasl identity.
func TestSASL(t *testing.T) {
	s := newSASLServer(t, "")
	bob := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
	if code := bob.authenticate(sasltest.Client{User: "bob", Password: "bobsecret"}); code != jute.CodeOK {
		t.Fatalf("bob's exchange: %v", code)
	}
	if ids := bob.whoAmI(); !has(ids, "sasl:bob") {
		t.Fatalf("whoAmI after the exchange: %v, want sasl:bob", ids)
	}
	if code := bob.code(jute.OpCreate, &jute.CreateRequest{Path: "/b", ACL: saslACL("bob")}); code != jute.CodeOK {
		t.Fatalf("create /b sasl:bob: %v", code)
	}
	if code := bob.code(jute.OpCreate, &jute.CreateRequest{Path: "/mine", ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "auth"}}}}); code != jute.CodeOK {
		t.Fatalf("create /mine auth:: %v", code)
	}
	f := bob.call(jute.OpGetACL, &jute.GetACLRequest{Path: "/mine"})
	var acl jute.GetACLResponse
	if err := jute.Unmarshal(f[jute.ReplyHeaderSize:], &acl); err != nil || len(acl.ACL) != 1 || acl.ACL[0].ID != (jute.ID{Scheme: "sasl", ID: "bob"}) {
		t.Fatalf("the auth scheme for bob: %+v %v, want sasl:bob", acl.ACL, err)
	}
	if code := bob.code(jute.OpSetData, &jute.SetDataRequest{Path: "/b", Data: []byte("x"), Version: -1}); code != jute.CodeOK {
		t.Fatalf("bob's setData: %v", code)
	}

	anon := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
	if code := anon.code(jute.OpSetData, &jute.SetDataRequest{Path: "/b", Version: -1}); code != jute.CodeNoAuth {
		t.Fatalf("an anonymous setData of /b: %v, want NoAuth", code)
	}
	digest := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "digest", ID: "alice:h"}}}
	if code := anon.code(jute.OpCreate, &jute.CreateRequest{Path: "/d", ACL: digest}); code != jute.CodeOK {
		t.Fatalf("create /d: %v", code)
	}

	super := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
	if code := super.authenticate(sasltest.Client{User: "super", Password: "adminsecret"}); code != jute.CodeOK {
		t.Fatalf("super's exchange: %v", code)
	}
	if code := super.code(jute.OpSetData, &jute.SetDataRequest{Path: "/b", Version: -1}); code != jute.CodeOK {
		t.Fatalf("the SASL user super on a sasl:bob node: %v, want OK", code)
	}
	if code := super.code(jute.OpSetData, &jute.SetDataRequest{Path: "/d", Version: -1}); code != jute.CodeNoAuth {
		t.Fatalf("the SASL user super on a digest node, without a super user configured: %v, want NoAuth", code)
	}
	if ids := super.whoAmI(); has(ids, "super:") {
		t.Fatalf("whoAmI %v: super without --sasl-super-user", ids)
	}

	// addAuth("sasl", ...) is refused, and the connection closed.
	if code := anon.code(jute.OpAuth, &jute.AuthPacket{Scheme: "sasl", Auth: []byte("bob")}); code != jute.CodeAuthFailed {
		t.Fatalf("addAuth sasl: %v, want AuthFailed", code)
	}
	if !anon.closed() {
		t.Fatal("the connection lives on after a failed addAuth sasl")
	}

	t.Run("super user", func(t *testing.T) {
		s := newSASLServer(t, "super")
		anon := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
		if code := anon.code(jute.OpCreate, &jute.CreateRequest{Path: "/d", ACL: digest}); code != jute.CodeOK {
			t.Fatalf("create /d: %v", code)
		}
		bob := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
		if code := bob.authenticate(sasltest.Client{User: "bob", Password: "bobsecret"}); code != jute.CodeOK {
			t.Fatalf("bob's exchange: %v", code)
		}
		if code := bob.code(jute.OpSetData, &jute.SetDataRequest{Path: "/d", Version: -1}); code != jute.CodeNoAuth {
			t.Fatalf("bob on /d: %v, want NoAuth", code)
		}
		super := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
		if code := super.authenticate(sasltest.Client{User: "super", Password: "adminsecret"}); code != jute.CodeOK {
			t.Fatalf("super's exchange: %v", code)
		}
		if code := super.code(jute.OpSetData, &jute.SetDataRequest{Path: "/d", Version: -1}); code != jute.CodeOK {
			t.Fatalf("the super user on a digest node: %v, want OK", code)
		}
		if ids := super.whoAmI(); !has(ids, "super:") || !has(ids, "sasl:super") {
			t.Fatalf("whoAmI %v, want super: and sasl:super", ids)
		}
	})
}

// TestSASLIdentityIsTheSession's: the identity lasts as long as the
// session, on a new connection too (it is in the replicated registry), and
// a request pipelined behind the last step already has it.
func TestSASLIdentityIsTheSessions(t *testing.T) {
	s := newSASLServer(t, "")
	bob := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
	if code := bob.code(jute.OpCreate, &jute.CreateRequest{Path: "/b", ACL: saslACL("bob")}); code != jute.CodeOK {
		t.Fatalf("create /b: %v", code)
	}
	code, ch := bob.saslCall(nil)
	if code != jute.CodeOK {
		t.Fatalf("first step: %v", code)
	}
	// The response and a write of /b in one write: the write is checked
	// after the identity is the session's.
	c := sasltest.Client{User: "bob", Password: "bobsecret"}
	var out []byte
	out = jute.AppendFrame(out, &jute.RequestHeader{Xid: 10, Type: jute.OpSASL}, &jute.GetSASLRequest{Token: c.Respond(ch)})
	out = jute.AppendFrame(out, &jute.RequestHeader{Xid: 11, Type: jute.OpSetData}, &jute.SetDataRequest{Path: "/b", Data: []byte("y"), Version: -1})
	if _, err := bob.c.Write(out); err != nil {
		t.Fatal(err)
	}
	for _, xid := range []int32{10, 11} {
		h := header(t, bob.frame())
		if h.Xid != xid || h.Err != jute.CodeOK {
			t.Fatalf("reply %d: xid %d, %v; want OK", xid, h.Xid, h.Err)
		}
	}
	bob.c.Close()

	again := s.connect(t, jute.ConnectRequest{TimeOut: 4000, SessionID: bob.cr.SessionID, Passwd: bob.cr.Passwd})
	again.xid = 11 // going on from the last xid, as the Java client does on a reconnect
	if ids := again.whoAmI(); !has(ids, "sasl:bob") {
		t.Fatalf("whoAmI on a new connection of the session: %v, want sasl:bob", ids)
	}
	if code := again.code(jute.OpSetData, &jute.SetDataRequest{Path: "/b", Version: -1}); code != jute.CodeOK {
		t.Fatalf("setData on a new connection of the session: %v", code)
	}
}

// TestSASLRefused: a step that fails is answered AuthFailed, with a null
// token, and the connection closed, as ZooKeeper 3.8 does; the session
// lives on, unauthenticated. A server without users refuses SASL the same
// way.
func TestSASLRefused(t *testing.T) {
	s := newSASLServer(t, "")
	unconfigured := newTestServer(t, nil)
	tests := []struct {
		name  string
		srv   *testServer
		steps func(z *rawClient) jute.Code // the last step's code, its reply read
		keeps string                       // an identity the session keeps ("": none)
	}{
		{name: "wrong password", srv: s, steps: func(z *rawClient) jute.Code {
			return z.authenticate(sasltest.Client{User: "bob", Password: "wrong"})
		}},
		{name: "unknown user", srv: s, steps: func(z *rawClient) jute.Code {
			return z.authenticate(sasltest.Client{User: "eve", Password: "bobsecret"})
		}},
		{name: "not a digest-response", srv: s, steps: func(z *rawClient) jute.Code {
			if code, _ := z.saslCall(nil); code != jute.CodeOK {
				t.Fatalf("first step: %v", code)
			}
			code, _ := z.saslCall([]byte("hello"))
			return code
		}},
		{name: "a step after success", srv: s, keeps: "sasl:bob", steps: func(z *rawClient) jute.Code {
			if code := z.authenticate(sasltest.Client{User: "bob", Password: "bobsecret"}); code != jute.CodeOK {
				t.Fatalf("exchange: %v", code)
			}
			code, _ := z.saslCall(nil)
			return code
		}},
		{name: "no users on the server", srv: unconfigured, steps: func(z *rawClient) jute.Code {
			code, _ := z.saslCall(nil)
			return code
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := tt.srv.connect(t, jute.ConnectRequest{TimeOut: 4000})
			if code := tt.steps(z); code != jute.CodeAuthFailed {
				t.Fatalf("the failed step: %v, want AuthFailed", code)
			}
			if !z.closed() {
				t.Fatal("the connection lives on")
			}
			again := tt.srv.connect(t, jute.ConnectRequest{TimeOut: 4000, SessionID: z.cr.SessionID, Passwd: z.cr.Passwd})
			if again.cr.SessionID != z.cr.SessionID {
				t.Fatalf("resume: session %x, want %x", again.cr.SessionID, z.cr.SessionID)
			}
			ids := again.whoAmI()
			for _, id := range ids {
				if id != "ip:127.0.0.1" && id != tt.keeps {
					t.Fatalf("whoAmI after the failure: %v", ids)
				}
			}
			if tt.keeps != "" && !has(ids, tt.keeps) {
				t.Fatalf("whoAmI after the failure: %v, want %s kept", ids, tt.keeps)
			}
		})
	}
}

// TestSASLFailedReplyBytes pins the reply to a failed step to ZooKeeper
// 3.8's bytes: the request's xid, AuthFailed (-115) and a null token.
func TestSASLFailedReplyBytes(t *testing.T) {
	s := newSASLServer(t, "")
	z := s.connect(t, jute.ConnectRequest{TimeOut: 4000})
	if code, _ := z.saslCall(nil); code != jute.CodeOK {
		t.Fatal(code)
	}
	f := z.call(jute.OpSASL, &jute.GetSASLRequest{Token: []byte("x")})
	h := header(t, f)
	want := unhex(t, `
		00000002 // xid
		ffffff8d // AuthFailed
		ffffffff // a null token`)
	if got := append(f[:4:4], f[12:]...); !bytes.Equal(got, want) || h.Zxid < 0 {
		t.Fatalf("reply %x, want %x with any zxid", f, want)
	}
}
