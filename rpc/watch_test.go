package rpc

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// Persistent and recursive watches through the public gRPC API, and the
// ZooKeeper protocol's re-registration order and watch dumps.

func addWatchReq(p string, recursive bool) *apipb.Request {
	return &apipb.Request{Op: &apipb.Request_AddWatch{AddWatch: &apipb.AddWatchRequest{Path: p, Recursive: recursive}}}
}

func checkWatchesReq(p string, k apipb.WatchKind) *apipb.Request {
	return &apipb.Request{Op: &apipb.Request_CheckWatches{CheckWatches: &apipb.CheckWatchesRequest{Path: p, Kind: k}}}
}

func removeWatchesReq(p string, k apipb.WatchKind) *apipb.Request {
	return &apipb.Request{Op: &apipb.Request_RemoveWatches{RemoveWatches: &apipb.RemoveWatchesRequest{Path: p, Kind: k}}}
}

func createReq(p string) *apipb.Request {
	return &apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: p}}}
}

func setReq(p, data string) *apipb.Request {
	return &apipb.Request{Op: &apipb.Request_SetData{SetData: &apipb.SetDataRequest{Path: p, Data: []byte(data), Version: -1}}}
}

func existsReq(p string, watch bool) *apipb.Request {
	return &apipb.Request{Op: &apipb.Request_Exists{Exists: &apipb.ExistsRequest{Path: p, Watch: watch}}}
}

// mustOK runs req and fails unless it succeeds.
func (s *rawSession) mustOK(req *apipb.Request) *apipb.Response {
	s.t.Helper()
	r := s.do(req)
	if r.Error != apipb.ErrorCode_OK {
		s.t.Fatalf("%T: %v %s", req.Op, r.Error, r.Message)
	}
	return r
}

// drained returns the events received so far and forgets them, after a
// round trip: whatever was queued for the session before is in.
func (s *rawSession) drained() []*apipb.WatchEvent {
	s.t.Helper()
	s.mustOK(existsReq("/", false))
	evs := s.events
	s.events = nil
	return evs
}

func eventsString(evs []*apipb.WatchEvent) string {
	out := ""
	for _, e := range evs {
		out += fmt.Sprintf("[%v %s kinds=%d] ", e.Type, e.Path, e.Kinds)
	}
	return out
}

// expectEvents checks the session's events (type, path, kinds) in order.
func (s *rawSession) expectEvents(what string, want ...*apipb.WatchEvent) {
	s.t.Helper()
	got := s.drained()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i].Type == want[i].Type && got[i].Path == want[i].Path && got[i].Kinds == want[i].Kinds && got[i].Zxid > 0
	}
	if !ok {
		s.t.Fatalf("%s: events %s, want %s", what, eventsString(got), eventsString(want))
	}
}

func wev(typ apipb.EventType, p string, kinds uint32) *apipb.WatchEvent {
	return &apipb.WatchEvent{Type: typ, Path: p, Kinds: kinds}
}

// TestGRPCPersistentWatches: AddWatch, CheckWatches and RemoveWatches of the
// public API, by kind, with NO_WATCHER when there is none; a persistent
// watch fires every event type of its path, a recursive one NodeCreated,
// NodeDataChanged and NodeDeleted of its subtree, each event once per
// session with the kinds it matched; both stay after firing. Resuming the
// session with persistent_watches and persistent_recursive_watches
// registers them again, firing nothing for what changed meanwhile.
func TestGRPCPersistentWatches(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	s1, first := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 4000})
	conn := first.GetConnected()
	s2, _ := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 4000})
	const (
		data, child, pers, rec = 1, 2, 4, 8
	)
	s2.mustOK(createReq("/p"))
	s1.mustOK(addWatchReq("/p", false))
	s1.mustOK(addWatchReq("/r", true)) // absent: allowed

	for _, c := range []struct {
		p    string
		kind apipb.WatchKind
		want apipb.ErrorCode
	}{
		{"/p", apipb.WatchKind_WATCH_PERSISTENT, apipb.ErrorCode_OK},
		{"/p", apipb.WatchKind_WATCH_ANY, apipb.ErrorCode_OK},
		{"/p", apipb.WatchKind_WATCH_PERSISTENT_RECURSIVE, apipb.ErrorCode_NO_WATCHER},
		{"/p", apipb.WatchKind_WATCH_DATA, apipb.ErrorCode_NO_WATCHER},
		{"/p", apipb.WatchKind_WATCH_CHILD, apipb.ErrorCode_NO_WATCHER},
		{"/r", apipb.WatchKind_WATCH_PERSISTENT_RECURSIVE, apipb.ErrorCode_OK},
		{"/r", apipb.WatchKind_WATCH_PERSISTENT, apipb.ErrorCode_NO_WATCHER},
		{"/r/below", apipb.WatchKind_WATCH_ANY, apipb.ErrorCode_NO_WATCHER},
		{"/p", apipb.WatchKind(9), apipb.ErrorCode_MARSHALLING_ERROR},
	} {
		if r := s1.do(checkWatchesReq(c.p, c.kind)); r.Error != c.want {
			t.Errorf("checkWatches %s %v: %v, want %v", c.p, c.kind, r.Error, c.want)
		}
	}
	if r := s2.do(checkWatchesReq("/p", apipb.WatchKind_WATCH_ANY)); r.Error != apipb.ErrorCode_NO_WATCHER {
		t.Errorf("another session's checkWatches: %v, want NO_WATCHER", r.Error)
	}

	s2.mustOK(setReq("/p", "1"))
	s2.mustOK(createReq("/p/c"))
	s2.mustOK(createReq("/r"))
	s2.mustOK(createReq("/r/a"))
	s2.mustOK(setReq("/r/a", "1"))
	s1.expectEvents("persistent and recursive",
		wev(apipb.EventType_NODE_DATA_CHANGED, "/p", pers),
		wev(apipb.EventType_NODE_CHILDREN_CHANGED, "/p", pers),
		wev(apipb.EventType_NODE_CREATED, "/r", rec),
		wev(apipb.EventType_NODE_CREATED, "/r/a", rec), // no NodeChildrenChanged /r
		wev(apipb.EventType_NODE_DATA_CHANGED, "/r/a", rec))

	// A one-shot watch beside the persistent one: one event, both kinds;
	// the one-shot goes, the persistent stays.
	s1.mustOK(&apipb.Request{Op: &apipb.Request_GetData{GetData: &apipb.GetDataRequest{Path: "/p", Watch: true}}})
	s2.mustOK(setReq("/p", "2"))
	s2.mustOK(setReq("/p", "3"))
	s1.expectEvents("one-shot beside persistent",
		wev(apipb.EventType_NODE_DATA_CHANGED, "/p", data|pers),
		wev(apipb.EventType_NODE_DATA_CHANGED, "/p", pers))

	// RemoveWatches selects its kind only.
	if r := s1.do(removeWatchesReq("/p", apipb.WatchKind_WATCH_PERSISTENT_RECURSIVE)); r.Error != apipb.ErrorCode_NO_WATCHER {
		t.Fatalf("removeWatches of a kind it has not: %v, want NO_WATCHER", r.Error)
	}
	s1.mustOK(removeWatchesReq("/p", apipb.WatchKind_WATCH_PERSISTENT))
	if r := s1.do(removeWatchesReq("/p", apipb.WatchKind_WATCH_ANY)); r.Error != apipb.ErrorCode_NO_WATCHER {
		t.Fatalf("removeWatches after removal: %v, want NO_WATCHER", r.Error)
	}
	s2.mustOK(setReq("/p", "4"))
	s1.expectEvents("after removal")

	// Resume on a new stream: the recursive watch is registered again and
	// fires nothing for the change made meanwhile, then fires again.
	s1.mustOK(&apipb.Request{Op: &apipb.Request_GetChildren{GetChildren: &apipb.GetChildrenRequest{Path: "/r", Watch: true}}})
	last := s1.mustOK(existsReq("/", false)).Zxid
	s1.cc.Close()
	waitFor(t, func() bool { return n.Watches().Len() == 0 })
	s2.mustOK(setReq("/r/a", "2"))
	s3, msg := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{SessionId: conn.SessionId, Password: conn.Password, TimeoutMs: 4000, LastZxid: last,
		PersistentRecursiveWatches: []string{"/r"}, ChildWatches: []string{"/r"}})
	if msg.GetConnected() == nil {
		t.Fatalf("resume: %v", msg)
	}
	s3.expectEvents("resume: nothing for the recursive watch, the child watch is kept")
	if r := s3.do(checkWatchesReq("/r", apipb.WatchKind_WATCH_PERSISTENT_RECURSIVE)); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("recursive watch after the resume: %v", r.Error)
	}
	s2.mustOK(createReq("/r/b"))
	s3.expectEvents("after the resume",
		wev(apipb.EventType_NODE_CREATED, "/r/b", rec),
		wev(apipb.EventType_NODE_CHILDREN_CHANGED, "/r", child))
}

// TestZKSetWatchesOrder: the notifications setWatches2 fires at once come
// in ZooKeeper's order (data, exist, then child paths) whatever their
// zxids, and a NodeDeleted whose zxid is unknown carries ZooKeeper's
// NO_ZXID, -1.
func TestZKSetWatchesOrder(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	z := zkSession(t, n)
	acl := jute.OpenACL()
	var zxid int64
	do := func(op jute.OpCode, rec jute.Encoder) {
		t.Helper()
		h, _ := z.call(op, rec)
		if h.Err != jute.CodeOK {
			t.Fatalf("%v: %v", op, h.Err)
		}
		zxid = h.Zxid
	}
	for _, p := range []string{"/d", "/c", "/gone"} {
		do(jute.OpCreate, &jute.CreateRequest{Path: p, ACL: acl})
	}
	rel := zxid
	// Changed in the opposite order to setWatches2's lists.
	do(jute.OpCreate, &jute.CreateRequest{Path: "/c/k", ACL: acl})
	pzxid := zxid
	do(jute.OpCreate, &jute.CreateRequest{Path: "/x", ACL: acl})
	czxid := zxid
	do(jute.OpSetData, &jute.SetDataRequest{Path: "/d", Data: []byte("v"), Version: -1})
	mzxid := zxid
	do(jute.OpDelete, &jute.DeleteRequest{Path: "/gone", Version: -1})

	z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: -8, Type: jute.OpSetWatches2}, &jute.SetWatches2{
		RelativeZxid: rel, DataWatches: []string{"/d", "/gone"}, ExistWatches: []string{"/x"}, ChildWatches: []string{"/c"}}))
	type note struct {
		typ  jute.EventType
		path string
		zxid int64
	}
	var got []note
	for {
		r := jute.NewReader(z.frame())
		var h jute.ReplyHeader
		if err := h.Decode(r); err != nil {
			t.Fatal(err)
		}
		if h.Xid != jute.XidNotification {
			if h.Err != jute.CodeOK {
				t.Fatalf("setWatches2: %v", h.Err)
			}
			break
		}
		var ev jute.WatcherEvent
		if err := ev.Decode(r); err != nil {
			t.Fatal(err)
		}
		got = append(got, note{ev.Type, ev.Path, h.Zxid})
	}
	want := []note{
		{jute.EventNodeDataChanged, "/d", mzxid},
		{jute.EventNodeDeleted, "/gone", -1},
		{jute.EventNodeCreated, "/x", czxid},
		{jute.EventNodeChildrenChanged, "/c", pzxid},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("setWatches2 fired %v, want %v", got, want)
	}
}

// TestWatchDumps: wchc and wchp list the watches ZooKeeper keeps in its
// data-watch table (getData, exists, persistent, recursive; not
// getChildren's), by session and by path, as ZooKeeper writes them; they
// are answered only when allowed.
func TestWatchDumps(t *testing.T) {
	n := newTestNodeWith(t, "1", func(c *Config) { c.FourLetterWords = []string{"*"} })
	waitLeader(t, n)
	a, first := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 4000})
	ida := first.GetConnected().SessionId
	b, first := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 4000})
	idb := first.GetConnected().SessionId
	a.mustOK(createReq("/x"))
	a.mustOK(&apipb.Request{Op: &apipb.Request_GetData{GetData: &apipb.GetDataRequest{Path: "/x", Watch: true}}})
	a.mustOK(&apipb.Request{Op: &apipb.Request_GetChildren{GetChildren: &apipb.GetChildrenRequest{Path: "/x", Watch: true}}})
	a.mustOK(addWatchReq("/r", true))
	b.mustOK(&apipb.Request{Op: &apipb.Request_GetChildren{GetChildren: &apipb.GetChildrenRequest{Path: "/", Watch: true}}})
	b.mustOK(existsReq("/nope", true))
	b.mustOK(addWatchReq("/x", false))
	ask := func(word string) string {
		c, err := net.Dial("tcp", n.ClientAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(word)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		out, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	wantC := fmt.Sprintf("0x%x\n\t/r\n\t/x\n0x%x\n\t/nope\n\t/x\n\n", ida, idb)
	if got := ask("wchc"); got != wantC {
		t.Errorf("wchc = %q, want %q", got, wantC)
	}
	wantP := fmt.Sprintf("/nope\n\t0x%x\n/r\n\t0x%x\n/x\n\t0x%x\n\t0x%x\n\n", idb, ida, ida, idb)
	if got := ask("wchp"); got != wantP {
		t.Errorf("wchp = %q, want %q", got, wantP)
	}

	def := newTestNode(t, "2")
	waitLeader(t, def)
	c, err := net.Dial("tcp", def.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("wchc")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if out, _ := io.ReadAll(c); string(out) != "wchc is not executed because it is not in the whitelist.\n" {
		t.Errorf("wchc by default: %q", out)
	}
}
