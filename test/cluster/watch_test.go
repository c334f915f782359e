package cluster

// End-to-end tests of ZooKeeper watches (DESIGN.md invariant 10,
// ZOOKEEPER-SEMANTICS.md "Watches") against in-process clusters. The helpers
// (wire recorder, ordering checker, client network) are in
// watchcheck_test.go.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
)

func addrOf(c *Cluster, i int) string { return c.Members[i].Cfg.ClientAddr }

func mustCreate(t testing.TB, ctx context.Context, cl *client.Client, p string, data string, mode client.CreateMode) client.Stat {
	t.Helper()
	_, st, err := cl.CreateStat(ctx, p, []byte(data), mode)
	if err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	return st
}

func mustSet(t testing.TB, ctx context.Context, cl *client.Client, p string, data string) client.Stat {
	t.Helper()
	st, err := cl.Set(ctx, p, []byte(data), -1)
	if err != nil {
		t.Fatalf("set %s: %v", p, err)
	}
	return st
}

// mustDelete deletes p and returns the zxid of the delete (the parent's
// pzxid, read on the same server right after).
func mustDelete(t testing.TB, ctx context.Context, cl *client.Client, p string) int64 {
	t.Helper()
	if err := cl.Delete(ctx, p, -1); err != nil {
		t.Fatalf("delete %s: %v", p, err)
	}
	st, ok, err := cl.Exists(ctx, path.Dir(p))
	if err != nil || !ok {
		t.Fatalf("exists %s: %v %v", path.Dir(p), ok, err)
	}
	return st.Pzxid
}

// TestWatchCheckerDetectsViolations: the wire checker used by the other
// tests flags each kind of violation in a synthetic record, and accepts a
// correct one.
func TestWatchCheckerDetectsViolations(t *testing.T) {
	getW := func(xid int64, p string, mzxid, zxid int64, watch bool) wireMsg {
		return wireMsg{
			req:  &apipb.Request{Xid: xid, Op: &apipb.Request_GetData{GetData: &apipb.GetDataRequest{Path: p, Watch: watch}}},
			resp: &apipb.Response{Xid: xid, Zxid: zxid, Result: &apipb.Response_GetData{GetData: &apipb.GetDataResponse{Stat: &apipb.Stat{Mzxid: mzxid}}}},
		}
	}
	existsW := func(xid int64, p string, st *apipb.Stat, zxid int64) wireMsg {
		return wireMsg{
			req:  &apipb.Request{Xid: xid, Op: &apipb.Request_Exists{Exists: &apipb.ExistsRequest{Path: p, Watch: true}}},
			resp: &apipb.Response{Xid: xid, Zxid: zxid, Result: &apipb.Response_Exists{Exists: &apipb.ExistsResponse{Stat: st}}},
		}
	}
	ev := func(typ apipb.EventType, p string, zxid int64) wireMsg {
		return wireMsg{event: &apipb.WatchEvent{Type: typ, Path: p, Zxid: zxid}}
	}
	kev := func(typ apipb.EventType, p string, zxid int64, kinds uint32) wireMsg {
		return wireMsg{event: &apipb.WatchEvent{Type: typ, Path: p, Zxid: zxid, Kinds: kinds}}
	}
	addW := func(xid int64, p string, recursive bool, zxid int64) wireMsg {
		return wireMsg{
			req:  &apipb.Request{Xid: xid, Op: &apipb.Request_AddWatch{AddWatch: &apipb.AddWatchRequest{Path: p, Recursive: recursive}}},
			resp: &apipb.Response{Xid: xid, Zxid: zxid},
		}
	}
	resume := func(zxid int64) wireMsg { return wireMsg{connected: &apipb.ConnectResponse{Zxid: zxid}} }
	cases := []struct {
		name string
		msgs []wireMsg
		bad  bool
	}{
		{"correct", []wireMsg{getW(1, "/a", 5, 6, true), ev(apipb.EventType_NODE_DATA_CHANGED, "/a", 7), getW(2, "/a", 7, 7, true),
			existsW(3, "/b", nil, 7), ev(apipb.EventType_NODE_CREATED, "/b", 8), getW(4, "/b", 8, 8, false)}, false},
		{"reply before event", []wireMsg{getW(1, "/a", 5, 6, true), getW(2, "/a", 7, 7, false), ev(apipb.EventType_NODE_DATA_CHANGED, "/a", 7)}, true},
		{"stale event", []wireMsg{getW(1, "/a", 5, 6, true), ev(apipb.EventType_NODE_DATA_CHANGED, "/a", 5)}, true},
		{"event without watch", []wireMsg{getW(1, "/a", 5, 6, false), ev(apipb.EventType_NODE_DATA_CHANGED, "/a", 7)}, true},
		{"duplicate", []wireMsg{getW(1, "/a", 5, 6, true), ev(apipb.EventType_NODE_DELETED, "/a", 7), ev(apipb.EventType_NODE_DELETED, "/a", 7)}, true},
		{"zxid backwards", []wireMsg{getW(1, "/a", 5, 9, true), ev(apipb.EventType_NODE_DATA_CHANGED, "/a", 8)}, true},
		{"created shown before NodeCreated", []wireMsg{existsW(1, "/b", nil, 5), getW(2, "/b", 6, 6, false), ev(apipb.EventType_NODE_CREATED, "/b", 6)}, true},
		{"deleted shown before NodeDeleted", []wireMsg{existsW(1, "/b", &apipb.Stat{Mzxid: 3}, 5), existsW(2, "/b", nil, 6), ev(apipb.EventType_NODE_DELETED, "/b", 6)}, true},
		{"persistent correct", []wireMsg{addW(1, "/p", false, 5), addW(2, "/r", true, 5), kev(apipb.EventType_NODE_DATA_CHANGED, "/p", 6, 4),
			kev(apipb.EventType_NODE_CHILDREN_CHANGED, "/p", 7, 4), kev(apipb.EventType_NODE_CREATED, "/r/a/b", 8, 8), getW(3, "/p", 6, 8, false),
			getW(4, "/r/a/b", 8, 8, false), resume(12), getW(5, "/p", 11, 12, false), kev(apipb.EventType_NODE_DELETED, "/r", 13, 8)}, false},
		{"persistent event without watch", []wireMsg{addW(1, "/p", false, 5), kev(apipb.EventType_NODE_DATA_CHANGED, "/q", 6, 4)}, true},
		{"recursive event outside", []wireMsg{addW(1, "/r", true, 5), kev(apipb.EventType_NODE_CREATED, "/rx", 6, 8)}, true},
		{"recursive children changed", []wireMsg{addW(1, "/r", true, 5), kev(apipb.EventType_NODE_CHILDREN_CHANGED, "/r", 6, 8)}, true},
		{"persistent duplicate", []wireMsg{addW(1, "/p", false, 5), kev(apipb.EventType_NODE_DATA_CHANGED, "/p", 6, 4), kev(apipb.EventType_NODE_DATA_CHANGED, "/p", 6, 4)}, true},
		{"reply before persistent event", []wireMsg{addW(1, "/r", true, 5), getW(2, "/r/a", 6, 6, false), kev(apipb.EventType_NODE_DATA_CHANGED, "/r/a", 6, 8)}, true},
		{"removed persistent fires", []wireMsg{addW(1, "/p", false, 5),
			{req: &apipb.Request{Xid: 2, Op: &apipb.Request_RemoveWatches{RemoveWatches: &apipb.RemoveWatchesRequest{Path: "/p", Kind: apipb.WatchKind_WATCH_ANY}}}, resp: &apipb.Response{Xid: 2, Zxid: 5}},
			kev(apipb.EventType_NODE_DATA_CHANGED, "/p", 6, 4)}, true},
	}
	for _, tc := range cases {
		if bad := checkWire(tc.msgs); (len(bad) > 0) != tc.bad {
			t.Errorf("%s: violations %v, want some: %v", tc.name, bad, tc.bad)
		}
	}
}

// TestWatchEventTypesPerKind: each watch kind fires exactly ZooKeeper's
// event types, with the zxid of the change; getData and getChildren on an
// absent node leave no watch; a child's data change does not fire the
// parent's child watch, a child create does not fire a data watch; the
// session that makes a change is notified too, before its own reply.
func TestWatchEventTypesPerKind(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	wr := connect(t, addrOf(c, leader))

	mustCreate(t, ctx, wr, "/t", "", client.CreateMode{})
	for _, p := range []string{"/t/e2", "/t/e3", "/t/g1", "/t/g2", "/t/c1", "/t/c2", "/t/c2/x", "/t/c3", "/t/c4", "/t/c4/x", "/t/d4", "/t/self"} {
		mustCreate(t, ctx, wr, p, "v0", client.CreateMode{})
	}
	waitApplied(t, c, wr.LastZxid())
	base := watchLen(c, f)

	// Register everything first, then change things: the registrations are
	// all live at once on the follower.
	_, ok, e1, err := w.ExistsW(ctx, "/t/e1")
	if err != nil || ok {
		t.Fatalf("ExistsW absent: %v %v", ok, err)
	}
	_, ok, e2, err := w.ExistsW(ctx, "/t/e2")
	if err != nil || !ok {
		t.Fatalf("ExistsW present: %v %v", ok, err)
	}
	_, _, e3, err := w.ExistsW(ctx, "/t/e3")
	if err != nil {
		t.Fatal(err)
	}
	_, _, g1, err := w.GetW(ctx, "/t/g1")
	if err != nil {
		t.Fatal(err)
	}
	_, _, g2, err := w.GetW(ctx, "/t/g2")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, g3, err := w.GetW(ctx, "/t/g3"); !errors.Is(err, client.ErrNoNode) || g3 != nil {
		t.Fatalf("GetW on an absent node: ch=%v err=%v, want nil channel and ErrNoNode", g3, err)
	}
	_, _, c1, err := w.ChildrenW(ctx, "/t/c1")
	if err != nil {
		t.Fatal(err)
	}
	_, _, c2, err := w.ChildrenW(ctx, "/t/c2")
	if err != nil {
		t.Fatal(err)
	}
	_, _, c3, err := w.ChildrenW(ctx, "/t/c3")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, cj, err := w.ChildrenW(ctx, "/t/cj"); !errors.Is(err, client.ErrNoNode) || cj != nil {
		t.Fatalf("ChildrenW on an absent node: ch=%v err=%v, want nil channel and ErrNoNode", cj, err)
	}
	_, _, c4, err := w.ChildrenW(ctx, "/t/c4")
	if err != nil {
		t.Fatal(err)
	}
	_, _, d4, err := w.GetW(ctx, "/t/d4")
	if err != nil {
		t.Fatal(err)
	}
	// 10 watches; the two NoNode reads left none.
	if got := watchLen(c, f) - base; got != 10 {
		t.Fatalf("follower holds %d watches, want 10 (getData/getChildren on absent nodes must register nothing)", got)
	}

	// exists-watch: NodeCreated, NodeDataChanged, NodeDeleted.
	st := mustCreate(t, ctx, wr, "/t/e1", "", client.CreateMode{})
	expectEvent(t, e1, client.EventNodeCreated, "/t/e1", st.Czxid, "exists(absent) then create")
	st = mustSet(t, ctx, wr, "/t/e2", "v1")
	expectEvent(t, e2, client.EventNodeDataChanged, "/t/e2", st.Mzxid, "exists then set")
	z := mustDelete(t, ctx, wr, "/t/e3")
	expectEvent(t, e3, client.EventNodeDeleted, "/t/e3", z, "exists then delete")

	// getData-watch: NodeDataChanged, NodeDeleted.
	st = mustSet(t, ctx, wr, "/t/g1", "v1")
	expectEvent(t, g1, client.EventNodeDataChanged, "/t/g1", st.Mzxid, "getData then set")
	z = mustDelete(t, ctx, wr, "/t/g2")
	expectEvent(t, g2, client.EventNodeDeleted, "/t/g2", z, "getData then delete")

	// getChildren-watch: NodeChildrenChanged on a child create or delete,
	// NodeDeleted on the node's delete.
	st = mustCreate(t, ctx, wr, "/t/c1/k", "", client.CreateMode{})
	expectEvent(t, c1, client.EventNodeChildrenChanged, "/t/c1", st.Czxid, "getChildren then child create")
	z = mustDelete(t, ctx, wr, "/t/c2/x")
	expectEvent(t, c2, client.EventNodeChildrenChanged, "/t/c2", z, "getChildren then child delete")
	z = mustDelete(t, ctx, wr, "/t/c3")
	expectEvent(t, c3, client.EventNodeDeleted, "/t/c3", z, "getChildren then delete")

	// Changes that fire nothing: a child's data change (child watch on the
	// parent), a child create (data watch on the parent), and changes to the
	// nodes whose getData/getChildren returned NoNode.
	mustSet(t, ctx, wr, "/t/c4/x", "v1")
	mustCreate(t, ctx, wr, "/t/d4/y", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/t/g3", "", client.CreateMode{})
	mustSet(t, ctx, wr, "/t/g3", "v1")
	mustCreate(t, ctx, wr, "/t/cj", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/t/cj/k", "", client.CreateMode{})
	marker(t, ctx, w, wr, "/t/marker1")
	noEvent(t, c4, "child watch after a child's data change")
	noEvent(t, d4, "data watch after a child create")
	noWireEvents(t, w, "/t/g3", "/t/cj", "/t/c4", "/t/d4")
	// They were armed all along.
	z = mustDelete(t, ctx, wr, "/t/c4/x")
	expectEvent(t, c4, client.EventNodeChildrenChanged, "/t/c4", z, "child watch")
	st = mustSet(t, ctx, wr, "/t/d4", "v1")
	expectEvent(t, d4, client.EventNodeDataChanged, "/t/d4", st.Mzxid, "data watch")

	// The session making the change is notified too, and the event is in
	// before the reply of its own write.
	_, _, self, err := w.GetW(ctx, "/t/self")
	if err != nil {
		t.Fatal(err)
	}
	st, err = w.Set(ctx, "/t/self", []byte("mine"), -1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-self:
		if ev.Type != client.EventNodeDataChanged || ev.Zxid != st.Mzxid {
			t.Fatalf("own change: event %+v, want NodeDataChanged zxid %d", ev, st.Mzxid)
		}
	default:
		t.Fatalf("own change: Set returned before its watch event arrived")
	}

	if got := watchLen(c, f) - base; got != 0 {
		t.Fatalf("follower still holds %d watches after all fired", got)
	}
	assertWireOK(t, "watcher", w)
}

// TestWatchOneShot: a watch fires once, for the first change; later changes
// send nothing until the watch is set again.
func TestWatchOneShot(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	wr := connect(t, addrOf(c, leader))
	mustCreate(t, ctx, wr, "/o", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/o/d", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/o/c", "", client.CreateMode{})
	waitApplied(t, c, wr.LastZxid())

	_, _, d, err := w.GetW(ctx, "/o/d")
	if err != nil {
		t.Fatal(err)
	}
	_, _, e, err := w.ExistsW(ctx, "/o/e")
	if err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := w.ChildrenW(ctx, "/o/c")
	if err != nil {
		t.Fatal(err)
	}
	s1 := mustSet(t, ctx, wr, "/o/d", "1")
	mustSet(t, ctx, wr, "/o/d", "2")
	ce := mustCreate(t, ctx, wr, "/o/e", "", client.CreateMode{})
	mustSet(t, ctx, wr, "/o/e", "1")
	mustDelete(t, ctx, wr, "/o/e")
	k1 := mustCreate(t, ctx, wr, "/o/c/k1", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/o/c/k2", "", client.CreateMode{})
	mustDelete(t, ctx, wr, "/o/c/k1")
	expectEvent(t, d, client.EventNodeDataChanged, "/o/d", s1.Mzxid, "data watch")
	expectEvent(t, e, client.EventNodeCreated, "/o/e", ce.Czxid, "exists watch")
	expectEvent(t, ch, client.EventNodeChildrenChanged, "/o/c", k1.Czxid, "child watch")
	marker(t, ctx, w, wr, "/o/marker")
	for _, p := range []string{"/o/d", "/o/e", "/o/c"} {
		if evs := w.rec.events(p); len(evs) != 1 {
			t.Errorf("%s: %d events on the wire, want exactly 1: %v", p, len(evs), evs)
		}
	}
	if n := watchLen(c, f); n != 0 {
		t.Fatalf("follower holds %d watches after they fired", n)
	}
	// Set again: fires again, for the next change only.
	_, _, d, err = w.GetW(ctx, "/o/d")
	if err != nil {
		t.Fatal(err)
	}
	s3 := mustSet(t, ctx, wr, "/o/d", "3")
	expectEvent(t, d, client.EventNodeDataChanged, "/o/d", s3.Mzxid, "re-armed data watch")
	assertWireOK(t, "watcher", w)
}

// TestWatchDedup: a session watching a node several times (getData twice,
// exists, getChildren) holds one server watch per kind and gets one
// notification per change, which every registration's channel receives;
// other sessions get their own.
func TestWatchDedup(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	w2 := wconnect(t, c.Servers(), wopts{pin: addrOf(c, leader), keepPin: true})
	wr := connect(t, addrOf(c, leader))
	for _, p := range []string{"/d", "/d/a", "/d/b"} {
		mustCreate(t, ctx, wr, p, "", client.CreateMode{})
	}
	waitApplied(t, c, wr.LastZxid())

	var chans []<-chan client.Event
	for i := 0; i < 2; i++ {
		_, _, ch, err := w.GetW(ctx, "/d/a")
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	_, _, ch, err := w.ExistsW(ctx, "/d/a")
	if err != nil {
		t.Fatal(err)
	}
	chans = append(chans, ch)
	_, _, other, err := w2.GetW(ctx, "/d/a")
	if err != nil {
		t.Fatal(err)
	}
	if n := watchLen(c, f); n != 1 {
		t.Fatalf("getData twice + exists on one node: follower holds %d watches, want 1", n)
	}
	st := mustSet(t, ctx, wr, "/d/a", "1")
	for i, ch := range chans {
		expectEvent(t, ch, client.EventNodeDataChanged, "/d/a", st.Mzxid, fmt.Sprintf("registration %d", i))
	}
	expectEvent(t, other, client.EventNodeDataChanged, "/d/a", st.Mzxid, "other session")

	// A data and a child watch on a deleted node: one NodeDeleted.
	chans = chans[:0]
	_, _, ch, err = w.GetW(ctx, "/d/b")
	if err != nil {
		t.Fatal(err)
	}
	chans = append(chans, ch)
	_, _, ch, err = w.ExistsW(ctx, "/d/b")
	if err != nil {
		t.Fatal(err)
	}
	chans = append(chans, ch)
	_, _, ch, err = w.ChildrenW(ctx, "/d/b")
	if err != nil {
		t.Fatal(err)
	}
	chans = append(chans, ch)
	if n := watchLen(c, f); n != 2 {
		t.Fatalf("data + child watch on one node: follower holds %d registrations, want 2", n)
	}
	z := mustDelete(t, ctx, wr, "/d/b")
	for i, ch := range chans {
		expectEvent(t, ch, client.EventNodeDeleted, "/d/b", z, fmt.Sprintf("registration %d", i))
	}
	marker(t, ctx, w, wr, "/d/marker")
	for _, p := range []string{"/d/a", "/d/b"} {
		if evs := w.rec.events(p); len(evs) != 1 {
			t.Errorf("%s: %d notifications on the wire, want 1: %v", p, len(evs), evs)
		}
	}
	if n := watchLen(c, f); n != 0 {
		t.Fatalf("follower holds %d watches after they fired", n)
	}
	assertWireOK(t, "watcher", w)
	assertWireOK(t, "other", w2)
}

// TestWatchRemoveWatches: RemoveWatches removes a kind (data: getData and
// exists watches; child) or all of a session's watches on a path, on the
// server and in the client (channels get EventNotWatching, Err nil); what
// is removed never fires, what is kept still does; removing what is not
// there is ErrNoWatcher.
func TestWatchRemoveWatches(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	wr := connect(t, addrOf(c, leader))
	mustCreate(t, ctx, wr, "/rw", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/rw/c0", "", client.CreateMode{})
	waitApplied(t, c, wr.LastZxid())

	d1, d2, c1 := watchThreeWays(t, ctx, w, "/rw")
	_, _, e1, err := w.ExistsW(ctx, "/rw-absent")
	if err != nil {
		t.Fatal(err)
	}
	if n := watchLen(c, f); n != 3 {
		t.Fatalf("follower holds %d registrations, want 3", n)
	}
	notWatching := func(ch <-chan client.Event, what string) {
		t.Helper()
		removedNow(t, ch, what)
	}

	if err := w.RemoveWatches(ctx, "/rw", client.WatchChild); err != nil {
		t.Fatal(err)
	}
	notWatching(c1, "child watch removed")
	if err := w.RemoveWatches(ctx, "/rw", client.WatchChild); !errors.Is(err, client.ErrNoWatcher) {
		t.Fatalf("removing a removed child watch: %v, want ErrNoWatcher", err)
	}
	if err := w.RemoveWatches(ctx, "/nowhere", client.WatchAny); !errors.Is(err, client.ErrNoWatcher) {
		t.Fatalf("removing watches of an unwatched path: %v, want ErrNoWatcher", err)
	}
	if err := w.RemoveWatches(ctx, "/rw-absent", client.WatchAny); err != nil {
		t.Fatal(err)
	}
	notWatching(e1, "exists watch removed with WatchAny")
	if n := watchLen(c, f); n != 1 {
		t.Fatalf("follower holds %d registrations after removals, want 1", n)
	}
	// What was removed does not fire; the data watches still do.
	mustCreate(t, ctx, wr, "/rw/c1", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/rw-absent", "", client.CreateMode{})
	st := mustSet(t, ctx, wr, "/rw", "1")
	expectEvent(t, d1, client.EventNodeDataChanged, "/rw", st.Mzxid, "kept getData watch")
	expectEvent(t, d2, client.EventNodeDataChanged, "/rw", st.Mzxid, "kept exists watch")
	marker(t, ctx, w, wr, "/rw-marker1")
	if evs := w.rec.events("/rw"); len(evs) != 1 || evs[0].Type != apipb.EventType_NODE_DATA_CHANGED {
		t.Fatalf("/rw: events %v, want only the NodeDataChanged", evs)
	}
	noWireEvents(t, w, "/rw-absent")

	// WatchData removes getData and exists watches, keeps the child watch.
	_, _, d1, err = w.GetW(ctx, "/rw")
	if err != nil {
		t.Fatal(err)
	}
	_, _, d2, err = w.ExistsW(ctx, "/rw")
	if err != nil {
		t.Fatal(err)
	}
	_, _, c1, err = w.ChildrenW(ctx, "/rw")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RemoveWatches(ctx, "/rw", client.WatchData); err != nil {
		t.Fatal(err)
	}
	notWatching(d1, "getData watch removed with WatchData")
	notWatching(d2, "exists watch removed with WatchData")
	if n := watchLen(c, f); n != 1 {
		t.Fatalf("follower holds %d registrations, want 1 (the child watch)", n)
	}
	mustSet(t, ctx, wr, "/rw", "2")
	z := mustDelete(t, ctx, wr, "/rw/c0")
	expectEvent(t, c1, client.EventNodeChildrenChanged, "/rw", z, "kept child watch")

	// WatchAny removes both kinds.
	_, _, d1, err = w.GetW(ctx, "/rw")
	if err != nil {
		t.Fatal(err)
	}
	_, _, c1, err = w.ChildrenW(ctx, "/rw")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RemoveWatches(ctx, "/rw", client.WatchAny); err != nil {
		t.Fatal(err)
	}
	notWatching(d1, "data watch removed with WatchAny")
	notWatching(c1, "child watch removed with WatchAny")
	if n := watchLen(c, f); n != 0 {
		t.Fatalf("follower holds %d registrations after WatchAny, want 0", n)
	}
	mustSet(t, ctx, wr, "/rw", "3")
	mustDelete(t, ctx, wr, "/rw/c1")
	marker(t, ctx, w, wr, "/rw-marker2")
	if evs := w.rec.events("/rw"); len(evs) != 2 {
		t.Fatalf("/rw: %d events on the wire after the removals, want 2: %v", len(evs), evs)
	}
	assertWireOK(t, "watcher", w)
}

// TestWatchPendingRegistrationNotFiredByEarlierEvent: an event that the
// server sent before it ran a getData must not fire the watch that getData
// leaves. Session w holds a getData watch on /p; it sends setData /p and then
// a second getData-with-watch on /p. The server runs them in order, so it
// sends NodeDataChanged (for the first watch) and then the getData reply
// showing the new data, and registers a fresh watch. The event is held
// back below the client library until the second getData has been sent, so
// it reaches the library while that registration is still unanswered. The
// second channel must stay quiet and fire for the next change — as
// ZooKeeper's client, which adds a watcher only when its reply arrives.
func TestWatchPendingRegistrationNotFiredByEarlierEvent(t *testing.T) {
	c := New(t, 1, Options{})
	ctx := ctxT(t)
	w := wconnect(t, c.Servers(), wopts{})
	wr := connect(t, c.Servers()...)
	mustCreate(t, ctx, w.Client, "/p", "0", client.CreateMode{})
	_, st0, first, err := w.GetW(ctx, "/p")
	if err != nil {
		t.Fatal(err)
	}

	setSent := make(chan struct{})
	getSent := make(chan struct{})
	var setOnce, getOnce sync.Once
	w.rec.setHooks(func(m *apipb.ClientMessage) {
		switch m.GetRequest().GetOp().(type) {
		case *apipb.Request_SetData:
			setOnce.Do(func() { close(setSent) })
		case *apipb.Request_GetData:
			getOnce.Do(func() { close(getSent) })
		}
	}, func(m *apipb.ServerMessage) {
		if ev := m.GetEvent(); ev != nil && ev.Path == "/p" {
			select {
			case <-getSent:
			case <-time.After(5 * time.Second):
			}
		}
	})
	setDone := make(chan client.Stat, 1)
	go func() {
		st, err := w.Set(ctx, "/p", []byte("1"), -1)
		if err != nil {
			t.Error(err)
		}
		setDone <- st
	}()
	<-setSent
	_, st2, second, err := w.GetW(ctx, "/p")
	if err != nil {
		t.Fatal(err)
	}
	w.rec.setHooks(nil, nil)
	st1 := <-setDone
	if st2.Mzxid != st1.Mzxid {
		t.Fatalf("second getData saw mzxid %d, want the set's %d (per-session order)", st2.Mzxid, st1.Mzxid)
	}
	ev := expectEvent(t, first, client.EventNodeDataChanged, "/p", st1.Mzxid, "first watch")
	if ev.Zxid <= st0.Mzxid {
		t.Fatalf("first watch fired with zxid %d <= %d", ev.Zxid, st0.Mzxid)
	}
	select {
	case ev := <-second:
		t.Errorf("second watch (set by a getData that returned mzxid %d) fired at once with %v zxid=%d: "+
			"an event for a change its own reply already showed; the next change is then lost to it", st2.Mzxid, ev.Type, ev.Zxid)
	default:
	}
	st3 := mustSet(t, ctx, wr, "/p", "2")
	select {
	case ev, ok := <-second:
		if ok && (ev.Type != client.EventNodeDataChanged || ev.Zxid != st3.Mzxid) {
			t.Errorf("second watch: got %v zxid=%d, want NodeDataChanged zxid=%d", ev.Type, ev.Zxid, st3.Mzxid)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("second watch never fired for the next change (zxid %d)", st3.Mzxid)
	}
	assertWireOK(t, "watcher", w)
}

// TestWatchEventBeforeDataConcurrent is the ordering checker under
// concurrent writes on a 3-node cluster. Two writer sessions set three keys
// and create/delete children of /kids; three watcher sessions, one per
// server, run two getData-watch loops per key (two registrations of one
// session on one node), a getChildren-watch loop on /kids and a reader
// issuing plain reads. It checks, per session:
//
//   - every watch set on state (mzxid or pzxid) M fires with exactly the
//     zxid of the first acknowledged change after M — never a stale one
//     (<= M, a change the registering reply already showed), never a later
//     one (a change lost) — and a read right after the event sees at least
//     that change;
//   - on the wire (checkWire): the nonzero zxids of events and replies never
//     decrease, no reply reflects a change to an armed watch's node before
//     the event, no event arrives for a watch not held, none twice;
//   - when the writers stop, every watch set before the last change to its
//     node fires (no watch silently left unfired).
func TestWatchEventBeforeDataConcurrent(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	keys := []string{"/k0", "/k1", "/k2"}
	setup := connect(t, addrOf(c, c.LeaderIndex()))
	for _, k := range append(slices.Clone(keys), "/kids") {
		mustCreate(t, ctx, setup, k, "0", client.CreateMode{})
	}
	waitApplied(t, c, setup.LastZxid())

	var writers, watchers []*wclient
	for i := 0; i < 2; i++ {
		writers = append(writers, wconnect(t, c.Servers(), wopts{pin: addrOf(c, i), keepPin: true}))
	}
	for i := range c.Members {
		watchers = append(watchers, wconnect(t, c.Servers(), wopts{pin: addrOf(c, i), keepPin: true}))
	}

	type obs struct {
		sess   int
		path   string
		setAt  int64 // mzxid / pzxid of the registering reply
		ev     client.Event
		readAt int64 // mzxid / pzxid of the read right after the event
	}
	var omu sync.Mutex
	var seen []obs
	stop := make(chan struct{})
	var finalMu sync.Mutex
	final := map[string]int64{} // last change zxid per path, known once stop is closed
	var wg sync.WaitGroup

	// watchLoop keeps one watch on p armed, recording every firing.
	watchLoop := func(s int, w *wclient, p string, child bool) {
		defer wg.Done()
		for {
			var setAt int64
			var ch <-chan client.Event
			if child {
				_, st, c, err := w.ChildrenW(ctx, p)
				if err != nil {
					t.Errorf("ChildrenW %s: %v", p, err)
					return
				}
				setAt, ch = st.Pzxid, c
			} else {
				_, st, c, err := w.GetW(ctx, p)
				if err != nil {
					t.Errorf("GetW %s: %v", p, err)
					return
				}
				setAt, ch = st.Mzxid, c
			}
			var ev client.Event
			select {
			case ev = <-ch:
			case <-stop:
				finalMu.Lock()
				last := final[p]
				finalMu.Unlock()
				if setAt >= last {
					return // nothing changes any more
				}
				select {
				case ev = <-ch:
				case <-time.After(5 * time.Second):
					t.Errorf("session %d: watch on %s set at %d never fired (last change %d)", s, p, setAt, last)
					return
				}
			}
			st, _, err := w.Exists(ctx, p)
			if err != nil {
				t.Errorf("exists %s: %v", p, err)
				return
			}
			readAt := st.Mzxid
			if child {
				readAt = st.Pzxid
			}
			omu.Lock()
			seen = append(seen, obs{s, p, setAt, ev, readAt})
			omu.Unlock()
		}
	}
	for s, w := range watchers {
		for _, k := range keys {
			wg.Add(2)
			go watchLoop(s, w, k, false)
			go watchLoop(s, w, k, false)
		}
		wg.Add(1)
		go watchLoop(s, w, "/kids", true)
		wg.Add(1)
		go func(w *wclient) { // reader: plain reads, checked on the wire
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := w.Get(ctx, keys[i%len(keys)]); err != nil {
					t.Errorf("get: %v", err)
					return
				}
				if _, _, err := w.Children(ctx, "/kids"); err != nil {
					t.Errorf("children: %v", err)
					return
				}
			}
		}(w)
	}

	const perWriter = 80
	var wwg sync.WaitGroup
	for i, wr := range writers {
		wwg.Add(1)
		go func(i int, wr *wclient) {
			defer wwg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			var mine []string
			for j := 0; j < perWriter; j++ {
				if j%6 == 5 {
					if len(mine) > 0 && rng.IntN(2) == 0 {
						if err := wr.Delete(ctx, mine[0], -1); err != nil {
							t.Errorf("delete: %v", err)
							return
						}
						mine = mine[1:]
					} else {
						p, err := wr.Create(ctx, "/kids/c-", nil, client.CreateMode{Sequential: true})
						if err != nil {
							t.Errorf("create: %v", err)
							return
						}
						mine = append(mine, p)
					}
					continue
				}
				k := keys[rng.IntN(len(keys))]
				if _, err := wr.Set(ctx, k, []byte(fmt.Sprintf("w%d-%d", i, j)), -1); err != nil {
					t.Errorf("set: %v", err)
					return
				}
			}
		}(i, wr)
	}
	wwg.Wait()

	// The acknowledged changes, per path, from the writers' replies.
	changes := map[string][]int64{}
	for _, wr := range writers {
		for _, m := range wr.rec.snapshot() {
			if m.resp == nil || m.req == nil || m.resp.Error != apipb.ErrorCode_OK {
				continue
			}
			switch op := m.req.Op.(type) {
			case *apipb.Request_SetData:
				changes[op.SetData.Path] = append(changes[op.SetData.Path], m.resp.Zxid)
			case *apipb.Request_Create, *apipb.Request_Delete:
				changes["/kids"] = append(changes["/kids"], m.resp.Zxid)
			}
		}
	}
	finalMu.Lock()
	for p, zs := range changes {
		slices.Sort(zs)
		final[p] = zs[len(zs)-1]
	}
	finalMu.Unlock()
	close(stop)
	wg.Wait()

	// Every firing is for the first change after the watch was set.
	fired := 0
	for _, o := range seen {
		zs := changes[o.path]
		i, _ := slices.BinarySearch(zs, o.setAt+1)
		want := int64(-1)
		if i < len(zs) {
			want = zs[i]
		}
		typ := client.EventNodeDataChanged
		if o.path == "/kids" {
			typ = client.EventNodeChildrenChanged
		}
		switch {
		case o.ev.Type != typ || o.ev.Path != o.path:
			t.Errorf("session %d: watch on %s fired with %v %s", o.sess, o.path, o.ev.Type, o.ev.Path)
		case o.ev.Zxid <= o.setAt:
			t.Errorf("session %d: watch on %s set at %d fired with the stale zxid %d (a change its registering reply already showed)",
				o.sess, o.path, o.setAt, o.ev.Zxid)
		case o.ev.Zxid != want:
			t.Errorf("session %d: watch on %s set at %d fired with zxid %d, but the first change after it was %d",
				o.sess, o.path, o.setAt, o.ev.Zxid, want)
		case o.readAt < o.ev.Zxid:
			t.Errorf("session %d: read of %s right after the event for %d saw only %d", o.sess, o.path, o.ev.Zxid, o.readAt)
		default:
			fired++
		}
	}
	t.Logf("%d changes, %d watch firings checked", len(changes["/k0"])+len(changes["/k1"])+len(changes["/k2"])+len(changes["/kids"]), fired)
	for i, w := range watchers {
		assertWireOK(t, fmt.Sprintf("watcher %d", i), w)
	}
	for i, w := range writers {
		assertWireOK(t, fmt.Sprintf("writer %d", i), w)
	}
}

// TestWatchSurvivesServerKill: a session with watches of every kind loses
// its server (stopped while one change is in flight) and stays away while
// other changes happen. On the server it moves to, it re-sends its watches
// with its last zxid: those whose node changed fire at once, with the right
// type (NodeDataChanged, NodeDeleted, NodeCreated, NodeChildrenChanged),
// the others are kept and fire for the next change; nothing is lost and
// nothing arrives twice.
func TestWatchSurvivesServerKill(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	wr := connect(t, addrOf(c, leader))
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	mustCreate(t, ctx, wr, "/r", "", client.CreateMode{})
	for _, p := range []string{"changed", "same", "deleted", "kids", "kids-same", "inflight", "both"} {
		mustCreate(t, ctx, wr, "/r/"+p, "0", client.CreateMode{})
	}
	waitApplied(t, c, wr.LastZxid())

	get := func(p string) <-chan client.Event {
		t.Helper()
		_, _, ch, err := w.GetW(ctx, p)
		if err != nil {
			t.Fatalf("GetW %s: %v", p, err)
		}
		return ch
	}
	kids := func(p string) <-chan client.Event {
		t.Helper()
		_, _, ch, err := w.ChildrenW(ctx, p)
		if err != nil {
			t.Fatalf("ChildrenW %s: %v", p, err)
		}
		return ch
	}
	exists := func(p string) <-chan client.Event {
		t.Helper()
		_, ok, ch, err := w.ExistsW(ctx, p)
		if err != nil || ok {
			t.Fatalf("ExistsW %s: %v %v", p, ok, err)
		}
		return ch
	}
	chChanged, chSame, chDeleted, chInflight := get("/r/changed"), get("/r/same"), get("/r/deleted"), get("/r/inflight")
	chBothD, chBothC := get("/r/both"), kids("/r/both")
	chKids, chKidsSame := kids("/r/kids"), kids("/r/kids-same")
	chCreated, chAbsent := exists("/r/created"), exists("/r/absent")
	if n := watchLen(c, f); n != 10 {
		t.Fatalf("follower holds %d registrations, want 10", n)
	}
	before := w.LastZxid()

	// One change in flight as the server stops, then the session is kept
	// away while more happen.
	stIn := mustSet(t, ctx, wr, "/r/inflight", "1")
	w.net.only()
	c.Stop(f)
	stChanged := mustSet(t, ctx, wr, "/r/changed", "1")
	mustDelete(t, ctx, wr, "/r/deleted")
	stCreated := mustCreate(t, ctx, wr, "/r/created", "", client.CreateMode{})
	stKid := mustCreate(t, ctx, wr, "/r/kids/k", "", client.CreateMode{})
	mustDelete(t, ctx, wr, "/r/both")
	w.net.any()
	c.Eventually(10*time.Second, "the watcher to resume on another server", func() bool {
		i := memberOf(c, w.Client)
		return i >= 0 && i != f && w.State() == client.StateReconnected
	})
	to := memberOf(c, w.Client)

	expectEvent(t, chInflight, client.EventNodeDataChanged, "/r/inflight", stIn.Mzxid, "change in flight at the stop")
	expectEvent(t, chChanged, client.EventNodeDataChanged, "/r/changed", stChanged.Mzxid, "changed while away")
	expectEvent(t, chDeleted, client.EventNodeDeleted, "/r/deleted", -1, "deleted while away")
	expectEvent(t, chCreated, client.EventNodeCreated, "/r/created", stCreated.Czxid, "created while away")
	expectEvent(t, chKids, client.EventNodeChildrenChanged, "/r/kids", stKid.Czxid, "child created while away")
	expectEvent(t, chBothD, client.EventNodeDeleted, "/r/both", -1, "data watch, deleted while away")
	expectEvent(t, chBothC, client.EventNodeDeleted, "/r/both", -1, "child watch, deleted while away")

	cr := w.rec.lastConnect()
	if cr == nil || cr.SessionId != w.SessionID() || cr.LastZxid < before {
		t.Fatalf("resume request %+v: want session 0x%x and last zxid >= %d", cr, w.SessionID(), before)
	}
	for _, want := range []struct {
		list []string
		p    string
	}{{cr.DataWatches, "/r/same"}, {cr.ExistWatches, "/r/absent"}, {cr.ChildWatches, "/r/kids-same"}} {
		if !slices.Contains(want.list, want.p) {
			t.Errorf("resume request does not re-send %s: %+v", want.p, cr)
		}
	}
	// The kept ones live on the new server.
	c.Eventually(5*time.Second, "3 kept watches on the new server", func() bool { return watchLen(c, to) == 3 })
	noEvent(t, chSame, "unchanged data watch")
	noEvent(t, chKidsSame, "unchanged child watch")
	noEvent(t, chAbsent, "exists watch on a still absent node")

	stSame := mustSet(t, ctx, wr, "/r/same", "1")
	stAbsent := mustCreate(t, ctx, wr, "/r/absent", "", client.CreateMode{})
	stKid2 := mustCreate(t, ctx, wr, "/r/kids-same/k", "", client.CreateMode{})
	expectEvent(t, chSame, client.EventNodeDataChanged, "/r/same", stSame.Mzxid, "kept data watch")
	expectEvent(t, chAbsent, client.EventNodeCreated, "/r/absent", stAbsent.Czxid, "kept exists watch")
	expectEvent(t, chKidsSame, client.EventNodeChildrenChanged, "/r/kids-same", stKid2.Czxid, "kept child watch")

	marker(t, ctx, w, wr, "/r-marker")
	for _, p := range []string{"/r/changed", "/r/same", "/r/deleted", "/r/kids", "/r/kids-same", "/r/inflight", "/r/both", "/r/created", "/r/absent"} {
		if evs := w.rec.events(p); len(evs) != 1 {
			t.Errorf("%s: %d events on the wire across the move, want exactly 1: %v", p, len(evs), evs)
		}
	}
	if n := watchLen(c, to); n != 0 {
		t.Errorf("new server holds %d watches after all fired", n)
	}
	assertWireOK(t, "watcher", w)
}

// TestWatchSurvivesReconnectToSameServer: the session's connection goes
// silent long enough for the client to give it up while its server still
// holds the old stream, changes happen meanwhile (their events are queued on
// the dead stream and never read), and the client resumes on the same
// server, whose table still has the session's watches. Each changed node's
// watch fires exactly once; the unchanged one is kept and fires once later.
func TestWatchSurvivesReconnectToSameServer(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	wr := connect(t, addrOf(c, leader))
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true, timeout: 3 * time.Second})
	states := w.States()
	<-states // Connected
	mustCreate(t, ctx, wr, "/q", "", client.CreateMode{})
	for _, p := range []string{"/q/a", "/q/b", "/q/same"} {
		mustCreate(t, ctx, wr, p, "0", client.CreateMode{})
	}
	waitApplied(t, c, wr.LastZxid())
	_, _, chA, err := w.GetW(ctx, "/q/a")
	if err != nil {
		t.Fatal(err)
	}
	_, _, chSame, err := w.GetW(ctx, "/q/same")
	if err != nil {
		t.Fatal(err)
	}
	_, _, chKids, err := w.ChildrenW(ctx, "/q")
	if err != nil {
		t.Fatal(err)
	}
	_, _, chNew, err := w.ExistsW(ctx, "/q/new")
	if err != nil {
		t.Fatal(err)
	}
	w.net.freeze()
	stA := mustSet(t, ctx, wr, "/q/a", "1")
	stNew := mustCreate(t, ctx, wr, "/q/new", "", client.CreateMode{})
	waitApplied(t, c, stNew.Czxid) // the follower queued the events on the silent stream
	select {
	case st := <-states:
		if st.State != client.StateDisconnected {
			t.Fatalf("state %v, want Disconnected", st.State)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not give up the silent connection")
	}
	w.net.thaw()
	select {
	case st := <-states:
		if st.State != client.StateReconnected || st.Server != addrOf(c, f) {
			t.Fatalf("state %v on %s, want Reconnected on %s", st.State, st.Server, addrOf(c, f))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not resume")
	}
	expectEvent(t, chA, client.EventNodeDataChanged, "/q/a", stA.Mzxid, "data watch, changed while silent")
	expectEvent(t, chNew, client.EventNodeCreated, "/q/new", stNew.Czxid, "exists watch, created while silent")
	expectEvent(t, chKids, client.EventNodeChildrenChanged, "/q", stNew.Czxid, "child watch, child created while silent")
	noEvent(t, chSame, "unchanged data watch")
	stSame := mustSet(t, ctx, wr, "/q/same", "1")
	expectEvent(t, chSame, client.EventNodeDataChanged, "/q/same", stSame.Mzxid, "kept data watch")
	mustSet(t, ctx, wr, "/q/a", "2")
	mustSet(t, ctx, wr, "/q/new", "2")
	mustCreate(t, ctx, wr, "/q/c", "", client.CreateMode{})
	marker(t, ctx, w, wr, "/q-marker")
	for _, p := range []string{"/q/a", "/q/same", "/q", "/q/new"} {
		if evs := w.rec.events(p); len(evs) != 1 {
			t.Errorf("%s: %d events on the wire, want exactly 1: %v", p, len(evs), evs)
		}
	}
	c.Eventually(5*time.Second, "no watches left on the server", func() bool { return watchLen(c, f) == 0 })
	assertWireOK(t, "watcher", w)
}

// TestWatchRemovedOnSessionClose: closing a session removes its watches on
// every server (their channels get EventNotWatching with ErrClosed); its
// ephemerals' deletion fires other sessions' watches, whose other watches
// are untouched, and, before the close completes, the closing session's own
// watches it matches (ZooKeeper's rule, docs/zookeeper-watches.md W8).
func TestWatchRemovedOnSessionClose(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	other := wconnect(t, c.Servers(), wopts{pin: addrOf(c, leader), keepPin: true})
	wr := connect(t, addrOf(c, leader))
	mustCreate(t, ctx, wr, "/s", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/s/a", "", client.CreateMode{})
	mustCreate(t, ctx, w.Client, "/s/eph", "", client.CreateMode{Kind: client.Ephemeral})
	waitApplied(t, c, w.LastZxid())

	var mine []<-chan client.Event
	_, _, ch, err := w.GetW(ctx, "/s/a")
	if err != nil {
		t.Fatal(err)
	}
	mine = append(mine, ch)
	_, _, ch, err = w.ExistsW(ctx, "/s/absent")
	if err != nil {
		t.Fatal(err)
	}
	mine = append(mine, ch)
	_, _, ch, err = w.ChildrenW(ctx, "/s")
	if err != nil {
		t.Fatal(err)
	}
	mine = append(mine, ch)
	_, _, ephW, err := other.ExistsW(ctx, "/s/eph")
	if err != nil {
		t.Fatal(err)
	}
	_, _, aW, err := other.GetW(ctx, "/s/a")
	if err != nil {
		t.Fatal(err)
	}
	if n := watchLen(c, f); n != 3 {
		t.Fatalf("follower holds %d registrations, want 3", n)
	}
	sid := w.SessionID()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The child watch on /s saw the session's own ephemeral go.
	childOfS := mine[2]
	mine = mine[:2]
	expectEvent(t, childOfS, client.EventNodeChildrenChanged, "/s", -1, "closing session's child watch on its ephemeral's parent")
	for i, ch := range mine {
		ev := recvEvent(t, ch, 5*time.Second, fmt.Sprintf("closed session's watch %d", i))
		if ev.Type != client.EventNotWatching || !errors.Is(ev.Err, client.ErrClosed) {
			t.Fatalf("closed session's watch %d: %+v, want EventNotWatching with ErrClosed", i, ev)
		}
	}
	c.Eventually(5*time.Second, "the closed session's watches to be gone on every server", func() bool {
		for _, m := range c.Members {
			if n := m.Node(); n != nil {
				if d, ch := n.Watches().Watches(sid); len(d)+len(ch) > 0 {
					return false
				}
			}
		}
		return watchLen(c, f) == 0
	})
	expectEvent(t, ephW, client.EventNodeDeleted, "/s/eph", -1, "other session's watch on the closed session's ephemeral")
	st := mustSet(t, ctx, wr, "/s/a", "1")
	expectEvent(t, aW, client.EventNodeDataChanged, "/s/a", st.Mzxid, "other session's watch kept")
	assertWireOK(t, "other", other)
}

// TestWatchRemovedOnSessionExpiry: a session that goes silent (its traffic
// black-holed, so its server still has its stream) is expired by the
// leader; the expiry removes its watches on its server, deletes its
// ephemeral (firing another session's watch), and the client, unable to
// reach any server within the timeout, ends its pending watches with
// EventNotWatching / ErrSessionExpired.
func TestWatchRemovedOnSessionExpiry(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true, timeout: time.Second})
	other := wconnect(t, c.Servers(), wopts{pin: addrOf(c, leader), keepPin: true})
	mustCreate(t, ctx, other.Client, "/x", "", client.CreateMode{})
	mustCreate(t, ctx, other.Client, "/x/a", "", client.CreateMode{})
	mustCreate(t, ctx, w.Client, "/x/eph", "", client.CreateMode{Kind: client.Ephemeral})
	waitApplied(t, c, w.LastZxid())

	var mine []<-chan client.Event
	_, _, ch, err := w.GetW(ctx, "/x/a")
	if err != nil {
		t.Fatal(err)
	}
	mine = append(mine, ch)
	_, _, ch, err = w.ExistsW(ctx, "/x/absent")
	if err != nil {
		t.Fatal(err)
	}
	mine = append(mine, ch)
	_, _, ch, err = w.ChildrenW(ctx, "/x")
	if err != nil {
		t.Fatal(err)
	}
	mine = append(mine, ch)
	_, _, ephW, err := other.ExistsW(ctx, "/x/eph")
	if err != nil {
		t.Fatal(err)
	}
	if n := watchLen(c, f); n != 3 {
		t.Fatalf("follower holds %d registrations, want 3", n)
	}
	sid := w.SessionID()
	start := time.Now()
	w.net.freeze()
	c.Eventually(10*time.Second, "the expired session's watches to be gone on its server", func() bool { return watchLen(c, f) == 0 })
	t.Logf("server dropped the watches %v after the session went silent (timeout %v)", time.Since(start).Round(time.Millisecond), w.SessionTimeout())
	var alive bool
	c.Members[f].Node().FSM().Read(func(v fsm.View) { _, alive = v.Sessions.Get(sid) })
	if alive {
		t.Fatalf("watches dropped while session 0x%x is still open (the stream is black-holed, not closed)", sid)
	}
	expectEvent(t, ephW, client.EventNodeDeleted, "/x/eph", -1, "watch on the expired session's ephemeral")
	for i, ch := range mine {
		ev := recvEvent(t, ch, 10*time.Second, fmt.Sprintf("expired session's watch %d", i))
		if ev.Type != client.EventNotWatching || !errors.Is(ev.Err, client.ErrSessionExpired) {
			t.Fatalf("expired session's watch %d: %+v, want EventNotWatching with ErrSessionExpired", i, ev)
		}
	}
	for _, m := range c.Members {
		if n := m.Node(); n != nil {
			if d, ch := n.Watches().Watches(sid); len(d)+len(ch) > 0 {
				t.Fatalf("server %s still holds watches of the expired session: %v %v", m.ID, d, ch)
			}
		}
	}
	assertWireOK(t, "other", other)
}

// ---------------------------------------------------------------------------
// Property test.

// mWatch is one registration in the model: the channel a GetW (data),
// ExistsW (exist) or ChildrenW (child) call returned.
type mWatch struct {
	sess int
	kind string
	path string
	ch   <-chan client.Event
	op   int
}

// TestWatchModelProperty runs a seeded random sequence of creates, deletes,
// setDatas, watch registrations (getData, exists, getChildren), watch
// removals and session restarts by three sessions on the three servers of a
// cluster, and after every step compares each registration's channel with a
// model of ZooKeeper's rules (what fires which kind, once, with the change's
// zxid; NoNode leaves no watch; removal and close end a watch with
// EventNotWatching) and every server's watch table with the model's. Set
// COORDD_WATCH_SEED to replay a seed and COORDD_WATCH_OPS for the length.
func TestWatchModelProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("COORDD_WATCH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = v
	}
	ops := 300
	if s := os.Getenv("COORDD_WATCH_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d, %d ops (replay: COORDD_WATCH_SEED=%d)", seed, ops, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d: replay with COORDD_WATCH_SEED=%d", seed, seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	c := New(t, 3, Options{})
	ctx := ctxT(t)
	sessions := make([]*wclient, 3)
	var all []*wclient
	for i := range sessions {
		sessions[i] = wconnect(t, c.Servers(), wopts{pin: addrOf(c, i), keepPin: true})
		all = append(all, sessions[i])
	}
	mustCreate(t, ctx, sessions[0].Client, "/w", "", client.CreateMode{})
	// Reads are local: the other sessions' servers must have /w before the
	// model may expect them to see it.
	waitApplied(t, c, sessions[0].LastZxid())
	nodes := []string{"/w/a", "/w/b", "/w/a/x", "/w/a/y", "/w/b/x"}
	watchPaths := append([]string{"/w"}, nodes...)
	exists := map[string]bool{"/w": true}
	hasChildren := func(p string) bool {
		for q, ok := range exists {
			if ok && path.Dir(q) == p {
				return true
			}
		}
		return false
	}
	var model []*mWatch
	step := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, op %d: %s", seed, step, fmt.Sprintf(format, args...))
	}
	counts := map[string]int{}

	// settle makes sure every session has received every event of the
	// changes so far: each server has applied them, then each session does a
	// round trip to its server (events queued before the reply).
	settle := func() {
		var max int64
		for _, s := range sessions {
			max = maxZ(max, s.LastZxid())
		}
		waitApplied(t, c, max)
		for _, s := range sessions {
			if _, _, err := s.Exists(ctx, "/w"); err != nil {
				fail("round trip: %v", err)
			}
		}
	}
	// checkServers compares every server's watch table with the model.
	checkServers := func() {
		for si, s := range sessions {
			var wantD, wantC []string
			for _, m := range model {
				if m.sess != si {
					continue
				}
				if m.kind == "child" {
					wantC = appendUnique(wantC, m.path)
				} else {
					wantD = appendUnique(wantD, m.path)
				}
			}
			sort.Strings(wantD)
			sort.Strings(wantC)
			sid := s.SessionID()
			for i, mem := range c.Members {
				d, ch := mem.Node().Watches().Watches(sid)
				if i != si {
					if len(d)+len(ch) > 0 {
						fail("server %d holds watches of session %d, which is on server %d: %v %v", i, si, si, d, ch)
					}
					continue
				}
				if !slices.Equal(d, wantD) || !slices.Equal(ch, wantC) {
					fail("server %d, session %d: data watches %v child watches %v, model %v %v", i, si, d, ch, wantD, wantC)
				}
			}
		}
	}
	// fire applies one change's events to the model and checks the channels.
	fire := func(events []client.Event) {
		settle()
		fired := map[*mWatch]client.Event{}
		for _, ev := range events {
			for _, m := range model {
				if _, done := fired[m]; done || m.path != ev.Path {
					continue
				}
				hit := false
				switch ev.Type {
				case client.EventNodeCreated:
					hit = m.kind == "exist"
				case client.EventNodeDataChanged:
					hit = m.kind == "exist" || m.kind == "data"
				case client.EventNodeChildrenChanged:
					hit = m.kind == "child"
				case client.EventNodeDeleted:
					hit = true
				}
				if hit {
					fired[m] = ev
				}
			}
		}
		var keep []*mWatch
		for _, m := range model {
			want, ok := fired[m]
			if !ok {
				select {
				case got := <-m.ch:
					fail("%s watch (op %d, session %d) on %s fired with %v zxid=%d; the model fires nothing", m.kind, m.op, m.sess, m.path, got.Type, got.Zxid)
				default:
				}
				keep = append(keep, m)
				continue
			}
			select {
			case got, open := <-m.ch:
				if !open || got.Type != want.Type || got.Path != want.Path || got.Zxid != want.Zxid {
					fail("%s watch (op %d, session %d) on %s: got %v zxid=%d (open %v), model %v zxid=%d",
						m.kind, m.op, m.sess, m.path, got.Type, got.Zxid, open, want.Type, want.Zxid)
				}
				if _, open := <-m.ch; open {
					fail("channel not closed after its event")
				}
				counts["fired "+want.Type.String()]++
			default:
				fail("%s watch (op %d, session %d) on %s did not fire; the model fires %v zxid=%d", m.kind, m.op, m.sess, m.path, want.Type, want.Zxid)
			}
		}
		model = keep
	}

	for step = 0; step < ops; step++ {
		si := rng.IntN(len(sessions))
		s := sessions[si]
		r := rng.IntN(100)
		switch {
		case r < 45: // a write
			p := nodes[rng.IntN(len(nodes))]
			parent := path.Dir(p)
			switch rng.IntN(3) {
			case 0:
				_, st, err := s.CreateStat(ctx, p, []byte("c"), client.CreateMode{})
				switch {
				case !exists[parent]:
					if !errors.Is(err, client.ErrNoNode) {
						fail("create %s without parent: %v", p, err)
					}
					fire(nil)
				case exists[p]:
					if !errors.Is(err, client.ErrNodeExists) {
						fail("create existing %s: %v", p, err)
					}
					fire(nil)
				default:
					if err != nil {
						fail("create %s: %v", p, err)
					}
					exists[p] = true
					counts["create"]++
					fire([]client.Event{{Type: client.EventNodeCreated, Path: p, Zxid: st.Czxid}, {Type: client.EventNodeChildrenChanged, Path: parent, Zxid: st.Czxid}})
				}
			case 1:
				err := s.Delete(ctx, p, -1)
				switch {
				case !exists[p]:
					if !errors.Is(err, client.ErrNoNode) {
						fail("delete absent %s: %v", p, err)
					}
					fire(nil)
				case hasChildren(p):
					if !errors.Is(err, client.ErrNotEmpty) {
						fail("delete non-empty %s: %v", p, err)
					}
					fire(nil)
				default:
					if err != nil {
						fail("delete %s: %v", p, err)
					}
					delete(exists, p)
					st, _, err := s.Exists(ctx, parent)
					if err != nil {
						fail("exists %s: %v", parent, err)
					}
					counts["delete"]++
					fire([]client.Event{{Type: client.EventNodeDeleted, Path: p, Zxid: st.Pzxid}, {Type: client.EventNodeChildrenChanged, Path: parent, Zxid: st.Pzxid}})
				}
			default:
				st, err := s.Set(ctx, p, []byte(fmt.Sprint(step)), -1)
				if !exists[p] {
					if !errors.Is(err, client.ErrNoNode) {
						fail("set absent %s: %v", p, err)
					}
					fire(nil)
					break
				}
				if err != nil {
					fail("set %s: %v", p, err)
				}
				counts["set"]++
				fire([]client.Event{{Type: client.EventNodeDataChanged, Path: p, Zxid: st.Mzxid}})
			}
		case r < 85: // a watch registration
			p := watchPaths[rng.IntN(len(watchPaths))]
			var ch <-chan client.Event
			var err error
			kind := []string{"data", "exist", "child"}[rng.IntN(3)]
			switch kind {
			case "data":
				_, _, ch, err = s.GetW(ctx, p)
			case "exist":
				var ok bool
				_, ok, ch, err = s.ExistsW(ctx, p)
				if err == nil && ok != exists[p] {
					fail("exists %s: %v, model %v", p, ok, exists[p])
				}
			case "child":
				_, _, ch, err = s.ChildrenW(ctx, p)
			}
			if kind != "exist" && !exists[p] {
				if !errors.Is(err, client.ErrNoNode) || ch != nil {
					fail("%s watch on absent %s: ch=%v err=%v, want no channel and ErrNoNode", kind, p, ch, err)
				}
				counts["watch on absent"]++
				break
			}
			if err != nil || ch == nil {
				fail("%s watch on %s: %v", kind, p, err)
			}
			counts["watch "+kind]++
			model = append(model, &mWatch{sess: si, kind: kind, path: p, ch: ch, op: step})
		case r < 95: // RemoveWatches
			p := watchPaths[rng.IntN(len(watchPaths))]
			k := []client.WatchKind{client.WatchAny, client.WatchData, client.WatchChild}[rng.IntN(3)]
			var removed, keep []*mWatch
			for _, m := range model {
				if m.sess == si && m.path == p && (k == client.WatchAny || (k == client.WatchChild) == (m.kind == "child")) {
					removed = append(removed, m)
				} else {
					keep = append(keep, m)
				}
			}
			err := s.RemoveWatches(ctx, p, k)
			if len(removed) == 0 {
				if !errors.Is(err, client.ErrNoWatcher) {
					fail("RemoveWatches(%s, %v) with nothing to remove: %v, want ErrNoWatcher", p, k, err)
				}
				break
			}
			if err != nil {
				fail("RemoveWatches(%s, %v): %v", p, k, err)
			}
			for _, m := range removed {
				select {
				case ev := <-m.ch:
					if ev.Type != client.EventNotWatching || ev.Err != nil {
						fail("removed %s watch (op %d) on %s: %+v, want EventNotWatching", m.kind, m.op, p, ev)
					}
				default:
					fail("removed %s watch (op %d) on %s: no EventNotWatching", m.kind, m.op, p)
				}
			}
			counts["removed"] += len(removed)
			model = keep
		default: // the session closes and a new one takes its place
			if err := s.Close(ctx); err != nil {
				fail("close: %v", err)
			}
			var keep []*mWatch
			for _, m := range model {
				if m.sess != si {
					keep = append(keep, m)
					continue
				}
				select {
				case ev := <-m.ch:
					if ev.Type != client.EventNotWatching || !errors.Is(ev.Err, client.ErrClosed) {
						fail("closed session's %s watch on %s: %+v", m.kind, m.path, ev)
					}
				default:
					fail("closed session's %s watch on %s: no EventNotWatching", m.kind, m.path)
				}
				counts["closed"]++
			}
			model = keep
			sessions[si] = wconnect(t, c.Servers(), wopts{pin: addrOf(c, si), keepPin: true})
			all = append(all, sessions[si])
		}
		checkServers()
	}
	t.Logf("model counts: %v; %d watches pending at the end", counts, len(model))
	for i, s := range all {
		assertWireOK(t, fmt.Sprintf("%d", i), s)
	}
}

func maxZ(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func appendUnique(l []string, s string) []string {
	if slices.Contains(l, s) {
		return l
	}
	return append(l, s)
}

// ---------------------------------------------------------------------------
// Benchmark.

// BenchmarkWatchFanout: 1 000 sessions on a single-node cluster, then
// 100 000 watches (100 per session, exists-watches on distinct absent
// paths). With 0 and with the 100 000 watches it measures the latency from
// a setData to its event at one watcher and the setData throughput on
// unrelated paths (16 writers), which must not depend on the watch count;
// with the watches it also measures one setData fanning out to a path
// every session watches. Setup times are logged.
func BenchmarkWatchFanout(b *testing.B) {
	const sessionsN, perSession, writersN = 1000, 100, 16
	c := New(b, 1, Options{Tick: 500 * time.Millisecond})
	ctx := context.Background()
	node := c.Members[0].Node()

	start := time.Now()
	sessions := make([]*client.Client, sessionsN)
	var wg sync.WaitGroup
	var next atomic.Int64
	var failed atomic.Value
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= sessionsN {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				cl, err := client.Connect(cctx, c.Servers(), client.WithSessionTimeout(10*time.Second))
				cancel()
				if err != nil {
					failed.Store(err)
					return
				}
				sessions[i] = cl
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatalf("connect: %v", err)
	}
	b.Cleanup(func() {
		var wg sync.WaitGroup
		for _, cl := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = cl.Close(cctx)
			}()
		}
		wg.Wait()
	})
	b.Logf("%d sessions (one gRPC connection each) connected in %v", sessionsN, time.Since(start).Round(time.Millisecond))

	admin := sessions[0]
	for _, p := range []string{"/fan", "/target", "/hot"} {
		if _, err := admin.Create(ctx, p, nil, client.CreateMode{}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < writersN; i++ {
		if _, err := admin.Create(ctx, fmt.Sprintf("/unrelated%02d", i), nil, client.CreateMode{}); err != nil {
			b.Fatal(err)
		}
	}
	watcher, setter := sessions[1], sessions[2]
	val := []byte("0123456789abcdef0123456789abcdef")

	latency := func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			_, _, ch, err := watcher.GetW(ctx, "/target")
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if _, err := setter.Set(ctx, "/target", val, -1); err != nil {
				b.Fatal(err)
			}
			<-ch
			total += time.Since(t0)
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/set-to-event")
	}
	throughput := func(b *testing.B) {
		per := b.N/writersN + 1
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := 0; i < writersN; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				p := fmt.Sprintf("/unrelated%02d", i)
				for j := 0; j < per; j++ {
					if _, err := sessions[10+i].Set(ctx, p, val, -1); err != nil {
						b.Error(err)
						return
					}
				}
			}(i)
		}
		wg.Wait()
		b.ReportMetric(float64(per*writersN)/time.Since(t0).Seconds(), "sets/s")
	}

	b.Run("watches=0/latency", latency)
	b.Run("watches=0/throughput", throughput)

	start = time.Now()
	next.Store(0)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= sessionsN {
					return
				}
				for j := 0; j < perSession; j++ {
					if _, _, _, err := sessions[i].ExistsW(ctx, fmt.Sprintf("/fan/s%04d-n%03d", i, j)); err != nil {
						failed.Store(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatalf("ExistsW: %v", err)
	}
	b.Logf("%d watches registered in %v; server watch table: %d", sessionsN*perSession, time.Since(start).Round(time.Millisecond), node.Watches().Len())
	if n := node.Watches().Len(); n < sessionsN*perSession {
		b.Fatalf("server holds %d watches, want %d", n, sessionsN*perSession)
	}

	b.Run("watches=100000/latency", latency)
	b.Run("watches=100000/throughput", throughput)
	b.Run("watches=100000/hot-path-1000-watchers", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			chans := make([]<-chan client.Event, sessionsN)
			var wg sync.WaitGroup
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for s := g; s < sessionsN; s += 32 {
						_, _, ch, err := sessions[s].GetW(ctx, "/hot")
						if err != nil {
							b.Error(err)
							return
						}
						chans[s] = ch
					}
				}(g)
			}
			wg.Wait()
			t0 := time.Now()
			if _, err := setter.Set(ctx, "/hot", val, -1); err != nil {
				b.Fatal(err)
			}
			for _, ch := range chans {
				<-ch
			}
			total += time.Since(t0)
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/set-to-last-of-1000-events")
	})
}

// TestWatchStopWatch: StopWatch ends one watch and leaves the client's
// others, on the same path too. The session's server registration stays
// while another watch of the client needs it and goes with the last one;
// what was stopped never fires; stopping it again is ErrNoWatcher.
func TestWatchStopWatch(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	wr := connect(t, addrOf(c, leader))
	mustCreate(t, ctx, wr, "/sw", "", client.CreateMode{})
	waitApplied(t, c, wr.LastZxid())

	d1, d2, c1 := watchThreeWays(t, ctx, w, "/sw")
	if n := watchLen(c, f); n != 2 {
		t.Fatalf("follower holds %d registrations, want 2 (data, child)", n)
	}
	stopped := func(ch <-chan client.Event, what string) {
		t.Helper()
		removedNow(t, ch, what)
		if _, ok := <-ch; ok {
			t.Fatalf("%s: channel open after EventNotWatching", what)
		}
	}

	if err := w.StopWatch(ctx, d1); err != nil {
		t.Fatal(err)
	}
	stopped(d1, "the getData watch")
	if err := w.StopWatch(ctx, d1); !errors.Is(err, client.ErrNoWatcher) {
		t.Fatalf("stopping a stopped watch: %v, want ErrNoWatcher", err)
	}
	if n := watchLen(c, f); n != 2 {
		t.Fatalf("follower holds %d registrations, want 2: the exists watch still needs the data one", n)
	}
	// The exists watch still fires.
	st := mustSet(t, ctx, wr, "/sw", "1")
	expectEvent(t, d2, client.EventNodeDataChanged, "/sw", st.Mzxid, "the exists watch, kept")

	_, _, d2, err := w.ExistsW(ctx, "/sw")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.StopWatch(ctx, d2); err != nil {
		t.Fatal(err)
	}
	stopped(d2, "the last data watch")
	if n := watchLen(c, f); n != 1 {
		t.Fatalf("follower holds %d registrations after the last data watch stopped, want 1 (child)", n)
	}
	mustSet(t, ctx, wr, "/sw", "2")
	marker(t, ctx, w, wr, "/sw-marker")
	if evs := w.rec.events("/sw"); len(evs) != 1 || evs[0].Type != apipb.EventType_NODE_DATA_CHANGED {
		t.Fatalf("/sw: events %v, want only the first NodeDataChanged", evs)
	}
	z := mustCreate(t, ctx, wr, "/sw/c", "", client.CreateMode{}).Czxid
	expectEvent(t, c1, client.EventNodeChildrenChanged, "/sw", z, "the child watch, kept")
}

// watchThreeWays sets a getData, an exists and a child watch on p.
func watchThreeWays(t testing.TB, ctx context.Context, w *wclient, p string) (data, exist, child <-chan client.Event) {
	t.Helper()
	_, _, data, err := w.GetW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	_, _, exist, err = w.ExistsW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	_, _, child, err = w.ChildrenW(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return data, exist, child
}

// removedNow fails unless ch already holds EventNotWatching with a nil Err:
// what a watch removed by RemoveWatches or StopWatch gets before the call
// returns.
func removedNow(t testing.TB, ch <-chan client.Event, what string) {
	t.Helper()
	select {
	case ev := <-ch:
		if ev.Type != client.EventNotWatching || ev.Err != nil {
			t.Fatalf("%s: got %+v, want EventNotWatching with nil Err", what, ev)
		}
	default:
		t.Fatalf("%s: the call returned before the channel got EventNotWatching", what)
	}
}
