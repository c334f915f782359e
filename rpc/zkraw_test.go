package rpc

import (
	"bytes"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// zkRaw is a ZooKeeper client made of the codec: it sends exactly the
// frames a test writes and reads exactly what the server sends.
type zkRaw struct {
	t      *testing.T
	c      net.Conn
	xid    int32
	events []jute.WatcherEvent // notifications read while waiting for replies
}

func dialZK(t *testing.T, addr string) *zkRaw {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &zkRaw{t: t, c: c}
}

// connect opens a session; it returns the server's answer.
func (z *zkRaw) connect(req jute.ConnectRequest) jute.ConnectResponse {
	z.t.Helper()
	z.write(jute.AppendFrame(nil, &req))
	var resp jute.ConnectResponse
	if err := jute.Unmarshal(z.frame(), &resp); err != nil {
		z.t.Fatal(err)
	}
	return resp
}

func (z *zkRaw) write(b []byte) {
	z.t.Helper()
	_ = z.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := z.c.Write(b); err != nil {
		z.t.Fatal(err)
	}
}

func (z *zkRaw) frame() []byte {
	z.t.Helper()
	_ = z.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := jute.ReadFrame(z.c, 64<<20)
	if err != nil {
		z.t.Fatal(err)
	}
	return f
}

// call sends a request and returns its reply header and body, keeping the
// notifications that come first.
func (z *zkRaw) call(op jute.OpCode, rec jute.Encoder) (jute.ReplyHeader, *jute.Reader) {
	z.t.Helper()
	z.xid++
	z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: z.xid, Type: op}, rec))
	for {
		r := jute.NewReader(z.frame())
		var h jute.ReplyHeader
		if err := h.Decode(r); err != nil {
			z.t.Fatal(err)
		}
		if h.Xid == jute.XidNotification {
			var ev jute.WatcherEvent
			if err := ev.Decode(r); err != nil {
				z.t.Fatal(err)
			}
			z.events = append(z.events, ev)
			continue
		}
		if h.Xid != z.xid {
			z.t.Fatalf("reply xid %d, want %d", h.Xid, z.xid)
		}
		return h, r
	}
}

// closed reports whether the server closed the connection (reading hits its
// end) within d.
func (z *zkRaw) closed(d time.Duration) bool {
	_ = z.c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, z.c)
	return err == nil // EOF ends Copy without an error; a deadline does not
}

func zkSession(t *testing.T, n *Node) *zkRaw {
	t.Helper()
	z := dialZK(t, n.ClientAddr())
	if resp := z.connect(jute.ConnectRequest{TimeOut: 4000}); resp.SessionID == 0 {
		t.Fatal("no session")
	}
	return z
}

// TestZKPersistentRecursiveWatch: addWatch PERSISTENT_RECURSIVE over the
// ZooKeeper protocol fires created, changed and deleted for the subtree,
// never children-changed, and stays; removeWatches takes it away.
func TestZKPersistentRecursiveWatch(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	z := zkSession(t, n)
	acl := jute.OpenACL()
	if h, _ := z.call(jute.OpCreate, &jute.CreateRequest{Path: "/a", ACL: acl}); h.Err != jute.CodeOK {
		t.Fatalf("create /a: %v", h.Err)
	}
	h, r := z.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/a", Mode: jute.AddWatchPersistentRecursive})
	var er jute.ErrorResponse
	if h.Err != jute.CodeOK || er.Decode(r) != nil || er.Err != 0 {
		t.Fatalf("addWatch: %v %+v", h.Err, er)
	}
	steps := []struct {
		op  jute.OpCode
		rec jute.Encoder
	}{
		{jute.OpCreate, &jute.CreateRequest{Path: "/a/b", ACL: acl}},
		{jute.OpSetData, &jute.SetDataRequest{Path: "/a/b", Data: []byte("x"), Version: -1}},
		{jute.OpCreate, &jute.CreateRequest{Path: "/a/b/c", ACL: acl}},
		{jute.OpDelete, &jute.DeleteRequest{Path: "/a/b/c", Version: -1}},
		{jute.OpSetData, &jute.SetDataRequest{Path: "/a", Version: -1}},
		{jute.OpCreate, &jute.CreateRequest{Path: "/ab", ACL: acl}}, // not below /a
	}
	for _, s := range steps {
		if h, _ := z.call(s.op, s.rec); h.Err != jute.CodeOK {
			t.Fatalf("%v: %v", s.op, h.Err)
		}
	}
	want := []jute.WatcherEvent{
		{Type: jute.EventNodeCreated, Path: "/a/b"},
		{Type: jute.EventNodeDataChanged, Path: "/a/b"},
		{Type: jute.EventNodeCreated, Path: "/a/b/c"},
		{Type: jute.EventNodeDeleted, Path: "/a/b/c"},
		{Type: jute.EventNodeDataChanged, Path: "/a"},
	}
	if len(z.events) != len(want) {
		t.Fatalf("events %+v, want %+v", z.events, want)
	}
	for i, ev := range z.events {
		if ev.Type != want[i].Type || ev.Path != want[i].Path || ev.State != jute.StateSyncConnected {
			t.Fatalf("event %d: %+v, want %+v", i, ev, want[i])
		}
	}
	if h, _ := z.call(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: "/a", Type: jute.WatcherPersistentRecursive}); h.Err != jute.CodeOK {
		t.Fatalf("checkWatches: %v", h.Err)
	}
	if h, _ := z.call(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: "/a", Type: jute.WatcherData}); h.Err != jute.CodeNoWatcher {
		t.Fatalf("removeWatches of a kind it has not: %v, want NoWatcher", h.Err)
	}
	if h, _ := z.call(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: "/a", Type: jute.WatcherAny}); h.Err != jute.CodeOK {
		t.Fatalf("removeWatches any: %v", h.Err)
	}
	z.events = nil
	if h, _ := z.call(jute.OpSetData, &jute.SetDataRequest{Path: "/a/b", Version: -1}); h.Err != jute.CodeOK || len(z.events) != 0 {
		t.Fatalf("after removal: %v, events %+v", h.Err, z.events)
	}
}

// TestZKBadInput: each kind of bad input gets ZooKeeper's answer (an error
// reply, or a closed connection), and the server goes on serving others.
func TestZKBadInput(t *testing.T) {
	n := newTestNodeWith(t, "1", func(c *Config) { c.wire = 1 << 20; c.MaxDataSize = 64 << 10 })
	waitLeader(t, n)

	t.Run("unknown opcode", func(t *testing.T) {
		z := zkSession(t, n)
		if h, _ := z.call(jute.OpCode(77), &jute.Empty{}); h.Err != jute.CodeUnimplemented {
			t.Fatalf("unknown opcode: %v, want Unimplemented", h.Err)
		}
		if h, _ := z.call(jute.OpExists, &jute.ExistsRequest{Path: "/"}); h.Err != jute.CodeOK {
			t.Fatalf("the session after an unknown opcode: %v", h.Err)
		}
	})
	t.Run("garbage body", func(t *testing.T) {
		z := zkSession(t, n)
		z.xid++
		// A create whose path claims 9 bytes and has 1.
		frame := jute.AppendFrame(nil, &jute.RequestHeader{Xid: z.xid, Type: jute.OpCreate})
		frame = append(frame, 0, 0, 0, 9, 'x')
		frame[3] += 5
		z.write(frame)
		r := jute.NewReader(z.frame())
		var h jute.ReplyHeader
		if h.Decode(r); h.Xid != z.xid || h.Err != jute.CodeMarshallingError {
			t.Fatalf("garbage create: %+v, want MarshallingError", h)
		}
		if h, _ := z.call(jute.OpExists, &jute.ExistsRequest{Path: "/"}); h.Err != jute.CodeOK {
			t.Fatalf("the session after a garbage request: %v", h.Err)
		}
	})
	t.Run("invalid path", func(t *testing.T) {
		z := zkSession(t, n)
		if h, _ := z.call(jute.OpCreate, &jute.CreateRequest{Path: "no/slash", ACL: jute.OpenACL()}); h.Err != jute.CodeBadArguments {
			t.Fatalf("create of an invalid path: %v", h.Err)
		}
		if h, _ := z.call(jute.OpGetData, &jute.GetDataRequest{Path: "/a//b"}); h.Err != jute.CodeBadArguments {
			t.Fatalf("getData of an invalid path: %v", h.Err)
		}
	})
	t.Run("oversize data", func(t *testing.T) {
		z := zkSession(t, n)
		big := make([]byte, 100<<10)
		if h, _ := z.call(jute.OpCreate, &jute.CreateRequest{Path: "/big", Data: big, ACL: jute.OpenACL()}); h.Err != jute.CodeBadArguments {
			t.Fatalf("create over the data limit: %v", h.Err)
		}
		if h, _ := z.call(jute.OpExists, &jute.ExistsRequest{Path: "/big"}); h.Err != jute.CodeNoNode {
			t.Fatalf("the refused node exists: %v", h.Err)
		}
	})
	t.Run("frame over the limit", func(t *testing.T) {
		z := zkSession(t, n)
		z.write([]byte{0, 0x20, 0, 0}) // 2 MiB announced
		if !z.closed(5 * time.Second) {
			t.Fatal("the server kept a connection that announced a frame over its limit")
		}
	})
	t.Run("truncated frame", func(t *testing.T) {
		z := zkSession(t, n)
		z.write([]byte{0, 0, 0, 20, 0, 0, 0, 1})
		z.c.(*net.TCPConn).CloseWrite()
		if !z.closed(5 * time.Second) {
			t.Fatal("the server kept a connection that ended inside a frame")
		}
	})
	t.Run("garbage connect", func(t *testing.T) {
		z := dialZK(t, n.ClientAddr())
		z.write([]byte{0, 0, 0, 3, 1, 2, 3})
		if !z.closed(5 * time.Second) {
			t.Fatal("the server kept a connection whose connect request was garbage")
		}
	})
	t.Run("request before connect", func(t *testing.T) {
		z := dialZK(t, n.ClientAddr())
		z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 1, Type: jute.OpGetData}, &jute.GetDataRequest{Path: "/"}))
		if !z.closed(5 * time.Second) {
			t.Fatal("the server kept a connection that sent a request before connecting")
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		z := dialZK(t, n.ClientAddr())
		resp := z.connect(jute.ConnectRequest{SessionID: 0x7777, Passwd: make([]byte, 16), TimeOut: 4000, HasReadOnly: true})
		if resp.SessionID != 0 || resp.TimeOut != 0 || !resp.HasReadOnly {
			t.Fatalf("resume of an unknown session: %+v, want session 0, timeout 0, the read-only flag mirrored", resp)
		}
		if !z.closed(5 * time.Second) {
			t.Fatal("the connection of an unknown session stayed open")
		}
	})
	// Everyone else was served all along.
	z := zkSession(t, n)
	if h, _ := z.call(jute.OpGetChildren, &jute.GetChildrenRequest{Path: "/"}); h.Err != jute.CodeOK {
		t.Fatalf("a fresh session after the bad input: %v", h.Err)
	}
}

// TestZKSlowReader: a client that sends and never reads its replies is
// disconnected (its queue on the server fills, or the server's writes to it
// time out); the server and its other clients are not held up meanwhile.
func TestZKSlowReader(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	slow := zkSession(t, n)
	before := len(n.engine.Local())
	ping := jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})
	batch := bytes.Repeat(ping, 4096)
	go func() {
		// Until the server closes the connection (or 200 000 pings).
		for range 50 {
			_ = slow.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := slow.c.Write(batch); err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for len(n.engine.Local()) >= before {
		if time.Now().After(deadline) {
			t.Fatal("a client that never read was never disconnected")
		}
		other := zkSession(t, n)
		if h, _ := other.call(jute.OpExists, &jute.ExistsRequest{Path: "/"}); h.Err != jute.CodeOK {
			t.Fatalf("another client while one does not read: %v", h.Err)
		}
		other.c.Close()
		waitFor(t, func() bool { return len(n.engine.Local()) <= before })
	}
}

// TestZKFailedMulti: a multi that fails in one op is answered as ZooKeeper
// answers it (probed on 3.8): reply header error 0, then every op's result
// (ok-rolled-back, the failing op's error, RuntimeInconsistency after it)
// and the closing header; nothing of it is applied. An op the server
// refuses before the engine (a create without ACL) is reported the same
// way.
func TestZKFailedMulti(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	z := zkSession(t, n)
	acl := jute.OpenACL()
	if h, _ := z.call(jute.OpCreate, &jute.CreateRequest{Path: "/a", ACL: acl}); h.Err != jute.CodeOK {
		t.Fatalf("create /a: %v", h.Err)
	}
	codes := func(ops ...jute.Op) []jute.Code {
		t.Helper()
		h, r := z.call(jute.OpMulti, &jute.MultiRequest{Ops: ops})
		if h.Err != jute.CodeOK {
			t.Fatalf("multi: header error %v, want 0 and the failure in the results", h.Err)
		}
		var resp jute.MultiResponse
		if err := resp.Decode(r); err != nil {
			t.Fatal(err)
		}
		var out []jute.Code
		for _, res := range resp.Results {
			if res.Type != jute.OpError {
				t.Fatalf("a failed multi's result of type %v", res.Type)
			}
			out = append(out, res.Err)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		ops  []jute.Op
		want []jute.Code
	}{
		{"check fails", []jute.Op{
			{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/b", ACL: acl}},
			{Type: jute.OpCheck, Request: &jute.CheckVersionRequest{Path: "/a", Version: 9}},
			{Type: jute.OpDelete, Request: &jute.DeleteRequest{Path: "/nope", Version: -1}},
		}, []jute.Code{jute.CodeOK, jute.CodeBadVersion, jute.CodeRuntimeInconsistency}},
		{"first op fails", []jute.Op{
			{Type: jute.OpDelete, Request: &jute.DeleteRequest{Path: "/nope", Version: -1}},
			{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/b", ACL: acl}},
		}, []jute.Code{jute.CodeNoNode, jute.CodeRuntimeInconsistency}},
		{"last op fails", []jute.Op{
			{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/b", ACL: acl}},
			{Type: jute.OpSetData, Request: &jute.SetDataRequest{Path: "/a", Version: -1}},
			{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/a", ACL: acl}},
		}, []jute.Code{jute.CodeOK, jute.CodeOK, jute.CodeNodeExists}},
		{"create without ACL", []jute.Op{
			{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/b", ACL: acl}},
			{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/c"}},
			{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/d", ACL: acl}},
		}, []jute.Code{jute.CodeOK, jute.CodeInvalidACL, jute.CodeRuntimeInconsistency}},
	} {
		if got := codes(tc.ops...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: per-op codes %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, p := range []string{"/b", "/c", "/d"} {
		if h, _ := z.call(jute.OpExists, &jute.ExistsRequest{Path: p}); h.Err != jute.CodeNoNode {
			t.Errorf("%s after failed multis: %v", p, h.Err)
		}
	}
	h, r := z.call(jute.OpGetData, &jute.GetDataRequest{Path: "/a"})
	var gd jute.GetDataResponse
	if h.Err != jute.CodeOK || gd.Decode(r) != nil || gd.Stat.Version != 0 {
		t.Fatalf("/a after failed multis: %v %+v", h.Err, gd.Stat)
	}
}

// TestZKConnectAheadOfServer: a connect, for a new session or not, whose
// lastZxidSeen is ahead of the server is closed without an answer (as
// ZooKeeper's processConnectRequest does, probed on 3.8), so that the client
// tries another server; no session is opened.
func TestZKConnectAheadOfServer(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	sessions := func() int {
		var k int
		n.FSM().Read(func(v fsm.View) { k = v.Sessions.Len() })
		return k
	}
	before := sessions()
	for _, id := range []int64{0, 0x7777} {
		z := dialZK(t, n.ClientAddr())
		z.write(jute.AppendFrame(nil, &jute.ConnectRequest{SessionID: id, Passwd: make([]byte, 16), TimeOut: 4000, LastZxidSeen: 1 << 40}))
		_ = z.c.SetReadDeadline(time.Now().Add(engine.ConnectWait + 10*time.Second))
		b, err := io.ReadAll(z.c)
		if err != nil || len(b) != 0 {
			t.Fatalf("session %#x ahead of the server: read %x, %v; want the connection closed without an answer", id, b, err)
		}
	}
	if got := sessions(); got != before {
		t.Fatalf("%d sessions after refused connects, want %d", got, before)
	}
}

// TestZKWritesOutOfXidOrder: go-zookeeper takes an xid before it queues
// the request, so goroutines sharing a connection send xids out of order.
// Writes arriving as 3, then 2, both apply (the later-arriving lower xid
// was refused as a stale retry, a SystemError, before).
func TestZKWritesOutOfXidOrder(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	z := zkSession(t, n)
	acl := jute.OpenACL()
	if h, _ := z.call(jute.OpCreate, &jute.CreateRequest{Path: "/o", ACL: acl}); h.Err != jute.CodeOK {
		t.Fatalf("create /o: %v", h.Err)
	}
	// xid 1 is taken; send 3 before 2.
	z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 3, Type: jute.OpCreate}, &jute.CreateRequest{Path: "/o/b", ACL: acl}))
	z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: 2, Type: jute.OpCreate}, &jute.CreateRequest{Path: "/o/a", ACL: acl}))
	for _, want := range []int32{3, 2} {
		r := jute.NewReader(z.frame())
		var h jute.ReplyHeader
		if err := h.Decode(r); err != nil {
			t.Fatal(err)
		}
		if h.Xid != want || h.Err != jute.CodeOK {
			t.Fatalf("reply xid %d error %v, want xid %d answered OK", h.Xid, h.Err, want)
		}
	}
}
