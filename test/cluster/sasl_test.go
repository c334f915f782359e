package cluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/zk/jute"
	"github.com/coordd/coordd/rpc/zk/sasl/sasltest"
)

// call sends a request and returns its reply's error and body.
func (z *zkRaw) call(op jute.OpCode, rec jute.Encoder) (jute.Code, []byte) {
	z.t.Helper()
	z.xid++
	z.send(jute.AppendFrame(nil, &jute.RequestHeader{Xid: z.xid, Type: op}, rec))
	for {
		f, err := z.frame(10 * time.Second)
		if err != nil {
			z.t.Fatalf("%s: %v", op, err)
		}
		var h jute.ReplyHeader
		if err := h.Decode(jute.NewReader(f)); err != nil {
			z.t.Fatal(err)
		}
		if h.Xid == z.xid {
			return h.Err, f[jute.ReplyHeaderSize:]
		}
	}
}

// saslToken runs one SASL step.
func (z *zkRaw) saslToken(tok []byte) (jute.Code, []byte) {
	z.t.Helper()
	code, body := z.call(jute.OpSASL, &jute.GetSASLRequest{Token: tok})
	var r jute.SetSASLResponse
	if err := jute.Unmarshal(body, &r); err != nil {
		z.t.Fatal(err)
	}
	return code, r.Token
}

// TestSASLAcrossServers: a session that authenticated with SASL on one
// server holds sasl:bob on every server: a follower it moves to checks its
// writes (in apply, from the replicated registry) as the first server did,
// without a new exchange, and an anonymous session there is refused.
func TestSASLAcrossServers(t *testing.T) {
	users := filepath.Join(t.TempDir(), "jaas.conf")
	if err := os.WriteFile(users, []byte(`Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_bob="bobsecret"; };`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := New(t, 3, Options{SASLUsers: users})
	a, b := c.Members[0].Cfg.ClientAddr, c.Members[1].Cfg.ClientAddr

	bob := dialZKRaw(t, a)
	resp := bob.connect(jute.ConnectRequest{TimeOut: 4000})
	code, ch := bob.saslToken(nil)
	if code != jute.CodeOK {
		t.Fatalf("first step: %v", code)
	}
	cl := sasltest.Client{User: "bob", Password: "bobsecret"}
	if code, final := bob.saslToken(cl.Respond(ch)); code != jute.CodeOK || cl.CheckRspauth(ch, final) != nil {
		t.Fatalf("last step: %v, %q", code, final)
	}
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "sasl", ID: "bob"}}}
	if code, _ := bob.call(jute.OpCreate, &jute.CreateRequest{Path: "/s", ACL: acl}); code != jute.CodeOK {
		t.Fatalf("create /s: %v", code)
	}
	bob.c.Close()

	anon := dialZKRaw(t, b)
	anon.connect(jute.ConnectRequest{TimeOut: 4000})
	if code, _ := anon.call(jute.OpSync, &jute.SyncRequest{Path: "/"}); code != jute.CodeOK {
		t.Fatalf("sync: %v", code)
	}
	if code, _ := anon.call(jute.OpSetData, &jute.SetDataRequest{Path: "/s", Version: -1}); code != jute.CodeNoAuth {
		t.Fatalf("an anonymous setData through %s: %v, want NoAuth", c.Members[1].ID, code)
	}

	moved := dialZKRaw(t, b)
	moved.xid = bob.xid // the Java client goes on with its xids
	if r := moved.connect(jute.ConnectRequest{TimeOut: 4000, SessionID: resp.SessionID, Passwd: resp.Passwd, LastZxidSeen: 0}); r.SessionID != resp.SessionID {
		t.Fatalf("resume on %s: session %x, want %x", c.Members[1].ID, r.SessionID, resp.SessionID)
	}
	if code, _ := moved.call(jute.OpSetData, &jute.SetDataRequest{Path: "/s", Data: []byte("moved"), Version: -1}); code != jute.CodeOK {
		t.Fatalf("bob's setData through %s, without a new exchange: %v", c.Members[1].ID, code)
	}
	code, body := moved.call(jute.OpGetData, &jute.GetDataRequest{Path: "/s"})
	var r jute.GetDataResponse
	if err := jute.Unmarshal(body, &r); code != jute.CodeOK || err != nil || string(r.Data) != "moved" {
		t.Fatalf("bob's read through %s: %v %q %v", c.Members[1].ID, code, r.Data, err)
	}
}
