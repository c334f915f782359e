package cluster

// End-to-end tests of persistent and recursive watches (AddWatch) over the
// Go client against in-process clusters: every kind and event type, the
// duplicate rules beside one-shot watches, removal, failover, the session's
// end, ordering under concurrent writes, and the slow-reader policy. The
// rules are ZooKeeper's (docs/zookeeper-watches.md).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
)

// nextEv waits up to 5s for the next event of a persistent watch.
func nextEv(t testing.TB, ch <-chan client.Event, what string) client.Event {
	t.Helper()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return ev
	case <-timer.C:
		t.Fatalf("%s: no event within 5s", what)
	}
	return client.Event{}
}

// expectPers waits for a persistent watch's next event and checks it.
func expectPers(t testing.TB, ch <-chan client.Event, typ client.EventType, p string, zxid int64, what string) {
	t.Helper()
	ev := nextEv(t, ch, what)
	if ev.Type != typ || ev.Path != p || (zxid >= 0 && ev.Zxid != zxid) {
		t.Fatalf("%s: got %v %s zxid=%d (err %v), want %v %s zxid=%d", what, ev.Type, ev.Path, ev.Zxid, ev.Err, typ, p, zxid)
	}
}

// nothingQueued checks that ch holds nothing now (call it after a marker).
func nothingQueued(t testing.TB, ch <-chan client.Event, what string) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		t.Fatalf("%s: unexpected %+v (open=%v)", what, ev, ok)
	default:
	}
}

// ended checks that a watch's last event is EventNotWatching with an error
// matching want (nil: none) and that its channel is closed, skipping the
// events queued before it.
func ended(t testing.TB, ch <-chan client.Event, want error, what string) []client.Event {
	t.Helper()
	var before []client.Event
	for {
		ev := nextEv(t, ch, what)
		if ev.Type != client.EventNotWatching {
			before = append(before, ev)
			continue
		}
		if (want == nil && ev.Err != nil) || (want != nil && !errors.Is(ev.Err, want)) {
			t.Fatalf("%s: ended with %v, want %v", what, ev.Err, want)
		}
		select {
		case ev, ok := <-ch:
			if ok {
				t.Fatalf("%s: %+v after EventNotWatching", what, ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: channel not closed after EventNotWatching", what)
		}
		return before
	}
}

func mustAddWatch(t testing.TB, ctx context.Context, cl *client.Client, p string, kind client.WatchKind) <-chan client.Event {
	t.Helper()
	ch, err := cl.AddWatch(ctx, p, kind)
	if err != nil {
		t.Fatalf("AddWatch %s %v: %v", p, kind, err)
	}
	return ch
}

// TestPersistentWatchEveryEvent: a persistent watch receives every event
// type of its path again and again (NodeCreated on an absent path first),
// nothing of its children's own changes; a recursive one NodeCreated,
// NodeDataChanged, NodeDeleted of its path and of every node below, later
// ones included, never NodeChildrenChanged, and nothing of a sibling whose
// name starts like it; the session's own changes fire them too. Each event
// carries its change's zxid. (docs/zookeeper-watches.md W1, W2)
func TestPersistentWatchEveryEvent(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	wr := connect(t, addrOf(c, leader))
	pers := mustAddWatch(t, ctx, w.Client, "/p", client.WatchPersistent)
	rec := mustAddWatch(t, ctx, w.Client, "/r", client.WatchPersistentRecursive)

	for round := 0; round < 2; round++ {
		st := mustCreate(t, ctx, wr, "/p", "", client.CreateMode{})
		expectPers(t, pers, client.EventNodeCreated, "/p", st.Czxid, "create /p")
		st = mustSet(t, ctx, wr, "/p", "v1")
		expectPers(t, pers, client.EventNodeDataChanged, "/p", st.Mzxid, "set /p")
		st = mustCreate(t, ctx, wr, "/p/c", "", client.CreateMode{})
		expectPers(t, pers, client.EventNodeChildrenChanged, "/p", st.Czxid, "create /p/c")
		mustSet(t, ctx, wr, "/p/c", "v1")
		mustCreate(t, ctx, wr, "/p/c/g", "", client.CreateMode{})
		mustDelete(t, ctx, wr, "/p/c/g")
		z := mustDelete(t, ctx, wr, "/p/c")
		expectPers(t, pers, client.EventNodeChildrenChanged, "/p", z, "delete /p/c")
		st = mustSet(t, ctx, w.Client, "/p", "own") // the session's own change
		expectPers(t, pers, client.EventNodeDataChanged, "/p", st.Mzxid, "own set /p")
		if err := wr.Delete(ctx, "/p", -1); err != nil {
			t.Fatal(err)
		}
		expectPers(t, pers, client.EventNodeDeleted, "/p", -1, "delete /p")

		st = mustCreate(t, ctx, wr, "/r", "", client.CreateMode{})
		expectPers(t, rec, client.EventNodeCreated, "/r", st.Czxid, "create /r")
		st = mustCreate(t, ctx, wr, "/r/c", "", client.CreateMode{})
		expectPers(t, rec, client.EventNodeCreated, "/r/c", st.Czxid, "create /r/c")
		st = mustCreate(t, ctx, w.Client, "/r/c/g", "", client.CreateMode{})
		expectPers(t, rec, client.EventNodeCreated, "/r/c/g", st.Czxid, "own create /r/c/g")
		st = mustSet(t, ctx, wr, "/r/c/g", "v")
		expectPers(t, rec, client.EventNodeDataChanged, "/r/c/g", st.Mzxid, "set /r/c/g")
		mustCreate(t, ctx, wr, "/rx", "", client.CreateMode{}) // a sibling: nothing
		st = mustSet(t, ctx, wr, "/r", "v")
		expectPers(t, rec, client.EventNodeDataChanged, "/r", st.Mzxid, "set /r")
		z = mustDelete(t, ctx, wr, "/r/c/g")
		expectPers(t, rec, client.EventNodeDeleted, "/r/c/g", z, "delete /r/c/g")
		z = mustDelete(t, ctx, wr, "/r/c")
		expectPers(t, rec, client.EventNodeDeleted, "/r/c", z, "delete /r/c")
		mustDelete(t, ctx, wr, "/rx")
		if err := wr.Delete(ctx, "/r", -1); err != nil {
			t.Fatal(err)
		}
		expectPers(t, rec, client.EventNodeDeleted, "/r", -1, "delete /r")
	}
	marker(t, ctx, w, wr, "/marker")
	nothingQueued(t, pers, "persistent watch")
	nothingQueued(t, rec, "recursive watch")
	if n := watchLen(c, f); n != 2 {
		t.Errorf("the server holds %d registrations, want the 2 persistent ones", n)
	}
	assertWireOK(t, "watcher", w)
}

// TestPersistentWatchBesideOneShot: a path with one-shot and persistent
// watches of one session, and recursive ones on it and its ancestors, gets
// one notification per event on the wire, delivered once to each of the
// client's matching watches; the one-shot ones go, the others stay, however
// they were set. A second session gets its own. (W3, W4)
func TestPersistentWatchBesideOneShot(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	w2 := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	wr := connect(t, addrOf(c, leader))
	mustCreate(t, ctx, wr, "/m", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/t", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/t/u", "", client.CreateMode{})
	waitApplied(t, c, wr.LastZxid())

	pers := mustAddWatch(t, ctx, w.Client, "/m", client.WatchPersistent)
	_, _, data, _ := w.GetW(ctx, "/m")
	_, _, exist, _ := w.ExistsW(ctx, "/m")
	_, _, kids, _ := w.ChildrenW(ctx, "/m")
	recRoot := mustAddWatch(t, ctx, w.Client, "/", client.WatchPersistentRecursive)
	recT := mustAddWatch(t, ctx, w.Client, "/t", client.WatchPersistentRecursive)
	persU := mustAddWatch(t, ctx, w.Client, "/t/u", client.WatchPersistent)
	other := mustAddWatch(t, ctx, w2.Client, "/t", client.WatchPersistentRecursive)

	st := mustSet(t, ctx, wr, "/m", "v1")
	for _, ch := range []<-chan client.Event{data, exist} {
		expectEvent(t, ch, client.EventNodeDataChanged, "/m", st.Mzxid, "one-shot on /m")
	}
	expectPers(t, pers, client.EventNodeDataChanged, "/m", st.Mzxid, "persistent on /m")
	expectPers(t, recRoot, client.EventNodeDataChanged, "/m", st.Mzxid, "recursive on /")
	st2 := mustSet(t, ctx, wr, "/m", "v2") // the one-shot ones are gone
	expectPers(t, pers, client.EventNodeDataChanged, "/m", st2.Mzxid, "persistent on /m, again")
	expectPers(t, recRoot, client.EventNodeDataChanged, "/m", st2.Mzxid, "recursive on /, again")
	stc := mustCreate(t, ctx, wr, "/m/c", "", client.CreateMode{})
	expectEvent(t, kids, client.EventNodeChildrenChanged, "/m", stc.Czxid, "child watch on /m")
	expectPers(t, pers, client.EventNodeChildrenChanged, "/m", stc.Czxid, "persistent on /m, child")
	expectPers(t, recRoot, client.EventNodeCreated, "/m/c", stc.Czxid, "recursive on /, the child") // and no NodeChildrenChanged /m

	stu := mustSet(t, ctx, wr, "/t/u", "v")
	for i, ch := range []<-chan client.Event{persU, recRoot, recT, other} {
		expectPers(t, ch, client.EventNodeDataChanged, "/t/u", stu.Mzxid, fmt.Sprintf("watch %d on /t/u or above", i))
	}
	// The markers are in the whole tree, under the recursive watch on /.
	marker(t, ctx, w2, wr, "/marker2")
	marker(t, ctx, w, wr, "/marker")
	for _, p := range []string{"/marker2", "/marker"} {
		expectPers(t, recRoot, client.EventNodeCreated, p, -1, "recursive on /, the marker")
		expectPers(t, recRoot, client.EventNodeDataChanged, p, -1, "recursive on /, the marker")
	}
	for i, ch := range []<-chan client.Event{pers, recRoot, recT, persU, other} {
		nothingQueued(t, ch, fmt.Sprintf("watch %d", i))
	}
	for _, p := range []string{"/m", "/t/u", "/m/c"} {
		want := map[string]int{"/m": 3, "/t/u": 1, "/m/c": 1}[p]
		if evs := w.rec.events(p); len(evs) != want {
			t.Errorf("%s: %d notifications on the wire, want %d (one per event): %v", p, len(evs), want, evs)
		}
	}
	assertWireOK(t, "watcher", w)
	assertWireOK(t, "second watcher", w2)
}

// TestPersistentWatchRemoval: CheckWatches and RemoveWatches select exactly
// their kind (Any: every kind), with ErrNoWatcher when the session has none;
// StopWatch ends one watch and removes the server's only when no other
// watch of the client needs it; a removed watch's channel gets
// EventNotWatching and nothing more. (W5)
func TestPersistentWatchRemoval(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	wr := connect(t, addrOf(c, leader))
	mustCreate(t, ctx, wr, "/x", "", client.CreateMode{})
	waitApplied(t, c, wr.LastZxid())
	pers := mustAddWatch(t, ctx, w.Client, "/x", client.WatchPersistent)
	rec := mustAddWatch(t, ctx, w.Client, "/x", client.WatchPersistentRecursive)
	_, _, data, _ := w.GetW(ctx, "/x")

	check := func(what string, want map[client.WatchKind]bool) {
		t.Helper()
		for _, k := range []client.WatchKind{client.WatchAny, client.WatchData, client.WatchChild, client.WatchPersistent, client.WatchPersistentRecursive} {
			err := w.CheckWatches(ctx, "/x", k)
			if want[k] && err != nil || !want[k] && !errors.Is(err, client.ErrNoWatcher) {
				t.Fatalf("%s: CheckWatches(%v) = %v, want present %v", what, k, err, want[k])
			}
		}
	}
	check("all three", map[client.WatchKind]bool{client.WatchAny: true, client.WatchData: true, client.WatchPersistent: true, client.WatchPersistentRecursive: true})
	if err := w.RemoveWatches(ctx, "/x", client.WatchChild); !errors.Is(err, client.ErrNoWatcher) {
		t.Fatalf("RemoveWatches of a kind the path has not: %v", err)
	}
	if err := w.RemoveWatches(ctx, "/x", client.WatchPersistent); err != nil {
		t.Fatal(err)
	}
	ended(t, pers, nil, "removed persistent watch")
	check("persistent removed", map[client.WatchKind]bool{client.WatchAny: true, client.WatchData: true, client.WatchPersistentRecursive: true})
	st := mustSet(t, ctx, wr, "/x", "v")
	expectEvent(t, data, client.EventNodeDataChanged, "/x", st.Mzxid, "data watch beside")
	expectPers(t, rec, client.EventNodeDataChanged, "/x", st.Mzxid, "recursive watch beside")
	check("data fired", map[client.WatchKind]bool{client.WatchAny: true, client.WatchPersistentRecursive: true})

	// Two recursive watches of the client on /x: stopping one keeps the
	// server's, stopping both removes it.
	rec2 := mustAddWatch(t, ctx, w.Client, "/x", client.WatchPersistentRecursive)
	if err := w.StopWatch(ctx, rec); err != nil {
		t.Fatal(err)
	}
	ended(t, rec, nil, "stopped recursive watch")
	check("one of two recursive stopped", map[client.WatchKind]bool{client.WatchAny: true, client.WatchPersistentRecursive: true})
	st = mustSet(t, ctx, wr, "/x", "v2")
	expectPers(t, rec2, client.EventNodeDataChanged, "/x", st.Mzxid, "the other recursive watch")
	if err := w.StopWatch(ctx, rec2); err != nil {
		t.Fatal(err)
	}
	ended(t, rec2, nil, "second stopped recursive watch")
	check("none left", nil)
	if err := w.StopWatch(ctx, rec2); !errors.Is(err, client.ErrNoWatcher) {
		t.Fatalf("StopWatch of a stopped watch: %v", err)
	}

	// Any removes every kind at once.
	a1 := mustAddWatch(t, ctx, w.Client, "/x", client.WatchPersistent)
	a2 := mustAddWatch(t, ctx, w.Client, "/x", client.WatchPersistentRecursive)
	_, _, a3, _ := w.ChildrenW(ctx, "/x")
	if err := w.RemoveWatches(ctx, "/x", client.WatchAny); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []<-chan client.Event{a1, a2, a3} {
		ended(t, ch, nil, fmt.Sprintf("watch %d removed by Any", i))
	}
	check("Any removed", nil)
	mustSet(t, ctx, wr, "/x", "v3")
	mustCreate(t, ctx, wr, "/x/c", "", client.CreateMode{})
	marker(t, ctx, w, wr, "/marker")
	if evs := w.rec.events("/x"); len(evs) != 2 {
		t.Errorf("%d notifications for /x, want 2 (one per change while watched, none after the removals): %v", len(evs), evs)
	}
	noWireEvents(t, w, "/x/c")
	if n := watchLen(c, f); n != 0 {
		t.Errorf("the server holds %d registrations", n)
	}
	assertWireOK(t, "watcher", w)
}

// TestPersistentWatchSurvivesServerKill: a session with persistent,
// recursive and one-shot watches loses its server while changes happen.
// On the server it resumes on, the persistent and recursive watches are
// registered again (the resume request carries them) and fire nothing for
// what changed meanwhile, as in ZooKeeper; the client tells each of them
// with an EventResync (ErrConnectionLoss), so a reader re-reads; the
// one-shot watches fire what changed, and such an event reaches the
// persistent watch of its path too (ZooKeeper's client dispatches it to
// both); later changes reach every watch once. (W7)
func TestPersistentWatchSurvivesServerKill(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	wr := connect(t, addrOf(c, leader))
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	mustCreate(t, ctx, wr, "/k", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/k/p", "0", client.CreateMode{})
	mustCreate(t, ctx, wr, "/k/r", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/k/r/a", "0", client.CreateMode{})
	waitApplied(t, c, wr.LastZxid())
	pers := mustAddWatch(t, ctx, w.Client, "/k/p", client.WatchPersistent)
	rec := mustAddWatch(t, ctx, w.Client, "/k/r", client.WatchPersistentRecursive)
	_, _, data, err := w.GetW(ctx, "/k/p")
	if err != nil {
		t.Fatal(err)
	}
	st := mustSet(t, ctx, wr, "/k/r/a", "1")
	expectPers(t, rec, client.EventNodeDataChanged, "/k/r/a", st.Mzxid, "before the kill")

	w.net.only()
	c.Stop(f)
	stP := mustSet(t, ctx, wr, "/k/p", "1")
	mustCreate(t, ctx, wr, "/k/r/b", "", client.CreateMode{})
	w.net.any()
	c.Eventually(10*time.Second, "the watcher to resume on another server", func() bool {
		i := memberOf(c, w.Client)
		return i >= 0 && i != f && w.State() == client.StateReconnected
	})
	to := memberOf(c, w.Client)
	cr := w.rec.lastConnect()
	if !slices.Equal(cr.PersistentWatches, []string{"/k/p"}) || !slices.Equal(cr.PersistentRecursiveWatches, []string{"/k/r"}) || !slices.Equal(cr.DataWatches, []string{"/k/p"}) {
		t.Fatalf("resume request %v", cr)
	}
	expectEvent(t, data, client.EventNodeDataChanged, "/k/p", stP.Mzxid, "one-shot watch, changed while away")
	for _, ch := range []<-chan client.Event{pers, rec} {
		ev := nextEv(t, ch, "persistent watch after the failover")
		if ev.Type != client.EventResync || !errors.Is(ev.Err, client.ErrConnectionLoss) {
			t.Fatalf("persistent watch after the failover: %+v, want EventResync (ErrConnectionLoss)", ev)
		}
	}
	expectPers(t, pers, client.EventNodeDataChanged, "/k/p", stP.Mzxid, "persistent watch: the one-shot watch's event on its path")
	if err := w.CheckWatches(ctx, "/k/p", client.WatchPersistent); err != nil {
		t.Fatalf("the new server lacks the persistent watch: %v", err)
	}
	if err := w.CheckWatches(ctx, "/k/r", client.WatchPersistentRecursive); err != nil {
		t.Fatalf("the new server lacks the recursive watch: %v", err)
	}
	if n := watchLen(c, to); n != 2 {
		t.Fatalf("the new server holds %d registrations, want the 2 persistent ones", n)
	}
	st = mustSet(t, ctx, wr, "/k/p", "2")
	expectPers(t, pers, client.EventNodeDataChanged, "/k/p", st.Mzxid, "persistent watch after the failover")
	st = mustCreate(t, ctx, wr, "/k/r/c", "", client.CreateMode{})
	expectPers(t, rec, client.EventNodeCreated, "/k/r/c", st.Czxid, "recursive watch after the failover")
	marker(t, ctx, w, wr, "/marker")
	nothingQueued(t, pers, "persistent watch")
	nothingQueued(t, rec, "recursive watch")
	noWireEvents(t, w, "/k/r/b")
	assertWireOK(t, "watcher", w)
}

// TestPersistentWatchEndsWithSession: closing a session sends it the
// events its own watches match in its ephemerals' deletion, then ends its
// persistent watches (EventNotWatching, ErrClosed) and leaves none on any
// server; its expiry removes them from the server it was connected to and
// ends them in the client (ErrSessionExpired); another session's recursive
// watch sees the ephemerals go. (W8)
func TestPersistentWatchEndsWithSession(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	other := wconnect(t, c.Servers(), wopts{pin: addrOf(c, leader), keepPin: true})
	mustCreate(t, ctx, other.Client, "/e", "", client.CreateMode{})
	otherRec := mustAddWatch(t, ctx, other.Client, "/e", client.WatchPersistentRecursive)

	for _, expire := range []bool{false, true} {
		what := map[bool]string{false: "close", true: "expiry"}[expire]
		w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true, timeout: time.Second})
		eph := fmt.Sprintf("/e/%s", what)
		mustCreate(t, ctx, w.Client, eph, "", client.CreateMode{Kind: client.Ephemeral})
		expectPers(t, otherRec, client.EventNodeCreated, eph, -1, "other's recursive watch: "+what+"'s ephemeral")
		rec := mustAddWatch(t, ctx, w.Client, "/e", client.WatchPersistentRecursive)
		pers := mustAddWatch(t, ctx, w.Client, "/elsewhere", client.WatchPersistent)
		sid := w.SessionID()
		if n := watchLen(c, f); n != 2 {
			t.Fatalf("%s: the server holds %d registrations, want 2", what, n)
		}
		if expire {
			w.net.freeze()
			c.Eventually(10*time.Second, "the expired session's watches to be gone on its server", func() bool { return watchLen(c, f) == 0 })
			ended(t, rec, client.ErrSessionExpired, "expired session's recursive watch")
			ended(t, pers, client.ErrSessionExpired, "expired session's persistent watch")
		} else {
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			before := ended(t, rec, client.ErrClosed, "closed session's recursive watch")
			if len(before) != 1 || before[0].Type != client.EventNodeDeleted || before[0].Path != eph {
				t.Fatalf("closed session's recursive watch got %+v before its end, want NodeDeleted %s", before, eph)
			}
			ended(t, pers, client.ErrClosed, "closed session's persistent watch")
		}
		expectPers(t, otherRec, client.EventNodeDeleted, eph, -1, "other's recursive watch: "+what)
		for _, m := range c.Members {
			if n := m.Node(); n != nil {
				if p := n.Watches().SessionWatches(sid); len(p.Persistent)+len(p.PersistentRecursive) > 0 {
					t.Fatalf("%s: server %s still holds %+v", what, m.ID, p)
				}
			}
		}
	}
	assertWireOK(t, "other", other)
}

// TestPersistentWatchOrdering: under concurrent writes by two sessions to
// a subtree, a session with a recursive watch on it, a persistent watch on
// one of its nodes and one-shot watches, reading the nodes all along,
// receives every event before any reply that reflects its change and in
// zxid order (the wire checker), each change exactly once per matching
// watch, the same sequence on its channels as on the wire.
func TestPersistentWatchOrdering(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true})
	wr1, wr2 := connect(t, addrOf(c, leader)), connect(t, addrOf(c, c.Follower()))
	mustCreate(t, ctx, wr1, "/o", "", client.CreateMode{})
	keys := []string{"/o/a", "/o/b", "/o/c", "/o/d"}
	for _, k := range keys {
		mustCreate(t, ctx, wr1, k, "0", client.CreateMode{})
	}
	waitApplied(t, c, wr1.LastZxid())
	rec := mustAddWatch(t, ctx, w.Client, "/o", client.WatchPersistentRecursive)
	pers := mustAddWatch(t, ctx, w.Client, "/o/a", client.WatchPersistent)

	const writes = 150
	var wg sync.WaitGroup
	for i, wr := range []*client.Client{wr1, wr2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			for j := 0; j < writes; j++ {
				k := keys[rng.IntN(len(keys))]
				var err error
				switch rng.IntN(4) {
				case 0:
					_, err = wr.Create(ctx, fmt.Sprintf("%s/n%d-%d", k, i, j), nil, client.CreateMode{Kind: client.Ephemeral})
				default:
					_, err = wr.Set(ctx, k, []byte(fmt.Sprint(j)), -1)
				}
				if err != nil {
					t.Errorf("writer %d: %v", i, err)
					return
				}
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()
	// The watcher reads all along, with one-shot watches too.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		rng := rand.New(rand.NewPCG(7, 7))
		for ctx.Err() == nil {
			select {
			case <-writersDone:
				return
			default:
			}
			k := keys[rng.IntN(len(keys))]
			var err error
			switch rng.IntN(3) {
			case 0:
				_, _, err = w.Get(ctx, k)
			case 1:
				_, _, _, err = w.GetW(ctx, k)
			default:
				_, _, _, err = w.ChildrenW(ctx, k)
			}
			if err != nil {
				t.Errorf("reader: %v", err)
				return
			}
		}
	}()
	<-writersDone
	<-readerDone
	marker(t, ctx, w, wr1, "/marker")

	// The channels hold the wire's sequence for their kinds.
	wire := map[string][]string{}
	for _, m := range w.rec.snapshot() {
		if ev := m.event; ev != nil {
			s := fmt.Sprintf("%v %s %d", client.EventType(ev.Type), ev.Path, ev.Zxid)
			if ev.Kinds&8 != 0 {
				wire["rec"] = append(wire["rec"], s)
			}
			if ev.Kinds&4 != 0 {
				wire["pers"] = append(wire["pers"], s)
			}
		}
	}
	for name, ch := range map[string]<-chan client.Event{"rec": rec, "pers": pers} {
		var got []string
		var last int64
		for len(ch) > 0 {
			ev := <-ch
			if ev.Zxid < last {
				t.Errorf("%s: zxid went backwards at %+v", name, ev)
			}
			last = ev.Zxid
			got = append(got, fmt.Sprintf("%v %s %d", ev.Type, ev.Path, ev.Zxid))
		}
		if !slices.Equal(got, wire[name]) {
			t.Errorf("%s: the channel has %d events, the wire %d; they differ", name, len(got), len(wire[name]))
		}
		if len(got) == 0 {
			t.Errorf("%s: no events", name)
		}
	}
	t.Logf("%d recursive and %d persistent events checked", len(wire["rec"]), len(wire["pers"]))
	assertWireOK(t, "watcher", w)
}

// TestPersistentWatchSlowReader: a reader that does not read its recursive
// watch blocks neither its client (its other calls and watches go on) nor
// the server (writes go on). Its channel holds the buffer's worth of
// events, then an EventResync (ErrWatchOverflow); what came meanwhile is
// dropped; once the reader has taken the EventResync, events flow again,
// and the watch is still registered.
func TestPersistentWatchSlowReader(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	leader, f := c.LeaderIndex(), c.Follower()
	const buffer = 8
	w := wconnect(t, c.Servers(), wopts{pin: addrOf(c, f), keepPin: true, opts: []client.Option{client.WithWatchBuffer(buffer)}})
	wr := connect(t, addrOf(c, leader))
	mustCreate(t, ctx, wr, "/s", "", client.CreateMode{})
	mustCreate(t, ctx, wr, "/other", "", client.CreateMode{})
	waitApplied(t, c, wr.LastZxid())
	rec := mustAddWatch(t, ctx, w.Client, "/s", client.WatchPersistentRecursive)

	var zxids []int64
	for i := 0; i < 40; i++ {
		st := mustCreate(t, ctx, wr, fmt.Sprintf("/s/n%02d", i), "", client.CreateMode{})
		zxids = append(zxids, st.Czxid)
		if i == 20 {
			// Meanwhile the client serves its other calls and watches.
			_, _, data, err := w.GetW(ctx, "/other")
			if err != nil {
				t.Fatalf("the client is blocked by the unread watch: %v", err)
			}
			st := mustSet(t, ctx, wr, "/other", "v")
			expectEvent(t, data, client.EventNodeDataChanged, "/other", st.Mzxid, "one-shot watch while the recursive one overflows")
		}
	}
	marker(t, ctx, w, wr, "/marker")
	for i := 0; i < buffer; i++ {
		expectPers(t, rec, client.EventNodeCreated, fmt.Sprintf("/s/n%02d", i), zxids[i], fmt.Sprintf("buffered event %d", i))
	}
	ev := nextEv(t, rec, "after the buffer")
	if ev.Type != client.EventResync || !errors.Is(ev.Err, client.ErrWatchOverflow) || ev.Path != "/s" {
		t.Fatalf("after the buffer: %+v, want EventResync (ErrWatchOverflow)", ev)
	}
	nothingQueued(t, rec, "events while the EventResync was unread")
	st := mustSet(t, ctx, wr, "/s/n39", "v")
	expectPers(t, rec, client.EventNodeDataChanged, "/s/n39", st.Mzxid, "after the reader caught up")
	if err := w.CheckWatches(ctx, "/s", client.WatchPersistentRecursive); err != nil {
		t.Fatalf("the watch is gone after the overflow: %v", err)
	}
	assertWireOK(t, "watcher", w)
}
