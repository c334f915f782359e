package rpc

import (
	"fmt"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// waitLevel waits until every node has applied the entry that raised the
// cluster to this build's command level.
func waitLevel(t testing.TB, nodes ...*Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for n.FSM().ClusterLevel() < fsm.Level {
			if time.Now().After(deadline) {
				t.Fatalf("server %s: command level %d, not %d", n.ID(), n.FSM().ClusterLevel(), fsm.Level)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// resumeZK opens a new connection of the session (its xids from 1 again,
// as kazoo's are on every connection and the Java client's with a new
// ZooKeeper object).
func resumeZK(t *testing.T, n *Node, id int64, pw []byte) *zkRaw {
	t.Helper()
	z := dialZK(t, n.ClientAddr())
	if resp := z.connect(jute.ConnectRequest{SessionID: id, Passwd: pw, TimeOut: 4000}); resp.SessionID != id {
		t.Fatalf("resuming session %#x: got %#x", id, resp.SessionID)
	}
	return z
}

// TestZKRenumberedXids is issue 35's scenario, as kazoo plays it: 30 writes,
// the socket dropped, the session resumed on a new connection whose xids
// start from 1 again; once the xids are back where the old connection's
// were, a create must create (before, it was answered with the cached
// reply of the old connection's set of the same xid, and the node never
// existed) and no write may be refused as a stale retry.
func TestZKRenumberedXids(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	waitLevel(t, n)
	z := dialZK(t, n.ClientAddr())
	conn := z.connect(jute.ConnectRequest{TimeOut: 4000})
	acl := jute.OpenACL()
	if h, _ := z.call(jute.OpCreate, &jute.CreateRequest{Path: "/p", ACL: acl}); h.Err != jute.CodeOK {
		t.Fatalf("create /p: %v", h.Err)
	}
	for i := 0; i < 30; i++ {
		if h, _ := z.call(jute.OpSetData, &jute.SetDataRequest{Path: "/p", Data: []byte(fmt.Sprint(i)), Version: -1}); h.Err != jute.CodeOK {
			t.Fatalf("set %d: %v", i, h.Err)
		}
	}
	last := z.xid
	z.c.Close()

	for round := 0; round < 3; round++ {
		z = resumeZK(t, n, conn.SessionID, conn.Passwd)
		for z.xid < last-1 {
			if h, _ := z.call(jute.OpExists, &jute.ExistsRequest{Path: "/p"}); h.Err != jute.CodeOK {
				t.Fatalf("exists: %v", h.Err)
			}
		}
		// The xid of one of the old connection's sets, and more.
		for i := 0; i < 3; i++ {
			p := fmt.Sprintf("/p/new-%d-%d", round, i)
			h, r := z.call(jute.OpCreate, &jute.CreateRequest{Path: p, ACL: acl})
			var cr jute.CreateResponse
			if h.Err != jute.CodeOK || cr.Decode(r) != nil || cr.Path != p {
				t.Fatalf("round %d: create %s at xid %d: %v, path %q", round, p, z.xid, h.Err, cr.Path)
			}
			if h, _ := z.call(jute.OpExists, &jute.ExistsRequest{Path: p}); h.Err != jute.CodeOK {
				t.Fatalf("round %d: %s answered as created, but: %v", round, p, h.Err)
			}
		}
		// Sequential and ephemeral creates, a multi and a set on the new
		// connection, every one applied.
		h, r := z.call(jute.OpCreate, &jute.CreateRequest{Path: "/p/seq-", ACL: acl, Flags: 3})
		var cr jute.CreateResponse
		if h.Err != jute.CodeOK || cr.Decode(r) != nil || cr.Path == "/p/seq-" {
			t.Fatalf("round %d: sequential ephemeral create: %v %q", round, h.Err, cr.Path)
		}
		h, _ = z.call(jute.OpMulti, &jute.MultiRequest{Ops: []jute.Op{
			{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: fmt.Sprintf("/p/m%d", round), ACL: acl}},
			{Type: jute.OpSetData, Request: &jute.SetDataRequest{Path: "/p", Data: []byte("m"), Version: -1}},
		}})
		if h.Err != jute.CodeOK {
			t.Fatalf("round %d: multi: %v", round, h.Err)
		}
		if h, _ := z.call(jute.OpSetData, &jute.SetDataRequest{Path: "/p", Data: []byte("x"), Version: -1}); h.Err != jute.CodeOK {
			t.Fatalf("round %d: set after reconnect: %v", round, h.Err)
		}
		last = z.xid
		z.c.Close()
	}
	// Every round's nodes exist, once each.
	n.FSM().Read(func(v fsm.View) {
		kids, _, err := v.Tree.Children("/p")
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) != 3*5 { // per round three creates, a multi's and a sequential ephemeral (the session lives on)
			t.Fatalf("/p has %d children: %v", len(kids), kids)
		}
	})
}

// TestZKRepeatedXids: a client may send one xid for several requests, on
// one connection or on two: each is its own request, answered with its own
// result, in order.
func TestZKRepeatedXids(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	waitLevel(t, n)
	z := dialZK(t, n.ClientAddr())
	conn := z.connect(jute.ConnectRequest{TimeOut: 4000})
	acl := jute.OpenACL()
	for conns := 0; conns < 2; conns++ {
		for i := 0; i < 3; i++ {
			p := fmt.Sprintf("/r%d-%d", conns, i)
			z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 7, Type: jute.OpCreate}, &jute.CreateRequest{Path: p, ACL: acl}))
		}
		for i := 0; i < 3; i++ {
			r := jute.NewReader(z.frame())
			var h jute.ReplyHeader
			var cr jute.CreateResponse
			if h.Decode(r) != nil || cr.Decode(r) != nil {
				t.Fatal("undecodable reply")
			}
			if want := fmt.Sprintf("/r%d-%d", conns, i); h.Xid != 7 || h.Err != jute.CodeOK || cr.Path != want {
				t.Fatalf("reply xid %d %v %q, want xid 7 OK %q", h.Xid, h.Err, cr.Path, want)
			}
		}
		z.c.Close()
		z = resumeZK(t, n, conn.SessionID, conn.Passwd)
	}
}
