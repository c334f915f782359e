package client

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// drain returns what ch holds now, without waiting.
func drain(ch <-chan Event) (evs []Event, closed bool) {
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return evs, true
			}
			evs = append(evs, ev)
		default:
			return evs, false
		}
	}
}

func zxids(evs []Event) []int64 {
	var out []int64
	for _, e := range evs {
		if e.Type == EventResync {
			out = append(out, -1) // marks where the resync is
			continue
		}
		out = append(out, e.Zxid)
	}
	return out
}

// TestPersistentWatchSlowReader: a persistent watch's channel holds its
// buffer's worth of events; the next one is replaced by an EventResync
// (ErrWatchOverflow), and events are dropped until the reader has taken it;
// then they flow again. A failover's EventResync is not queued behind an
// unread one. The final EventNotWatching always fits. Nothing blocks.
func TestPersistentWatchSlowReader(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := newPersistentWatcher("/p", kindPersistent, 3)
		ev := func(z int64) Event { return Event{Type: EventNodeDataChanged, Path: "/p", Zxid: z} }
		for z := int64(1); z <= 6; z++ {
			w.deliver(ev(z))
		}
		// 1, 2, 3 queued; 4 became the resync; 5, 6 dropped.
		if got := <-w.ch; got.Zxid != 1 {
			t.Errorf("first event %+v", got)
		}
		w.deliver(ev(7)) // dropped: the resync is unread
		w.resync(ErrConnectionLoss)
		evs, _ := drain(w.ch)
		if !slices.Equal(zxids(evs), []int64{2, 3, -1}) || !errors.Is(evs[2].Err, ErrWatchOverflow) || evs[2].Path != "/p" {
			t.Errorf("after an overflow the reader got %+v, want 2, 3 and an EventResync for the overflow", evs)
		}
		w.deliver(ev(8)) // the resync was taken: delivered
		w.resync(ErrConnectionLoss)
		w.deliver(ev(9))
		w.deliver(ev(10)) // the buffer (3) holds 8, the resync and 9: this one overflows
		w.deliver(ev(11)) // dropped
		w.resync(ErrConnectionLoss)
		w.fire(Event{Type: EventNotWatching, Path: "/p"})
		w.deliver(ev(12)) // after the end: nothing
		evs, closed := drain(w.ch)
		if !closed || !slices.Equal(zxids(evs), []int64{8, -1, 9, -1, 0}) || !errors.Is(evs[1].Err, ErrConnectionLoss) ||
			!errors.Is(evs[3].Err, ErrWatchOverflow) || evs[4].Type != EventNotWatching {
			t.Errorf("got %+v (closed %v)", evs, closed)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a persistent watch's channel blocked its sender")
	}
}

// TestPersistentWatchDispatch: events reach the watches the server says
// they matched (WatchEvent.kinds): one-shot ones of the path, persistent
// ones of the path, recursive ones of the path and its ancestors, each
// once; a NodeChildrenChanged never reaches a recursive watch; an event
// without kinds (an older server) fires only one-shot watches.
func TestPersistentWatchDispatch(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	ctx := ctxT(t)
	mustCreate(t, c, "/p")
	if _, err := c.AddWatch(ctx, "/p", WatchData); !errors.Is(err, ErrBadArguments) {
		t.Fatalf("AddWatch of a one-shot kind: %v", err)
	}
	pers, err := c.AddWatch(ctx, "/p", WatchPersistent)
	if err != nil {
		t.Fatal(err)
	}
	pers2, err := c.AddWatch(ctx, "/p", WatchPersistent)
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.AddWatch(ctx, "/", WatchPersistentRecursive)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.AddWatch(ctx, "/r", WatchPersistentRecursive)
	if err != nil {
		t.Fatal(err)
	}
	_, _, data, err := c.GetW(ctx, "/p")
	if err != nil {
		t.Fatal(err)
	}
	const (
		dat, chi, per, recu = bitData, bitChild, bitPersistent, bitRecursive
	)
	steps := []struct {
		ev   *apipb.WatchEvent
		want map[<-chan Event]bool
	}{
		{&apipb.WatchEvent{Type: apipb.EventType_NODE_DATA_CHANGED, Path: "/p", Zxid: 10, Kinds: dat | per | recu},
			map[<-chan Event]bool{data: true, pers: true, pers2: true, root: true}},
		{&apipb.WatchEvent{Type: apipb.EventType_NODE_DATA_CHANGED, Path: "/p", Zxid: 11, Kinds: per},
			map[<-chan Event]bool{pers: true, pers2: true}},
		{&apipb.WatchEvent{Type: apipb.EventType_NODE_CREATED, Path: "/r/a/b", Zxid: 12, Kinds: recu},
			map[<-chan Event]bool{root: true, rec: true}},
		{&apipb.WatchEvent{Type: apipb.EventType_NODE_CHILDREN_CHANGED, Path: "/r", Zxid: 13, Kinds: recu | chi},
			map[<-chan Event]bool{}},
		{&apipb.WatchEvent{Type: apipb.EventType_NODE_DELETED, Path: "/p", Zxid: 14},
			map[<-chan Event]bool{}},
	}
	all := []<-chan Event{data, pers, pers2, root, rec}
	for _, st := range steps {
		s.inject(st.ev)
		// A round trip: the event came before the reply.
		if _, _, err := c.Exists(ctx, "/"); err != nil {
			t.Fatal(err)
		}
		for i, ch := range all {
			evs, _ := drain(ch)
			if st.want[ch] {
				if len(evs) != 1 || evs[0].Zxid != st.ev.Zxid || evs[0].Path != st.ev.Path || evs[0].Type != EventType(st.ev.Type) {
					t.Fatalf("%v %s kinds=%d: watch %d got %+v, want it once", st.ev.Type, st.ev.Path, st.ev.Kinds, i, evs)
				}
			} else if len(evs) != 0 {
				t.Fatalf("%v %s kinds=%d: watch %d got %+v, want nothing", st.ev.Type, st.ev.Path, st.ev.Kinds, i, evs)
			}
		}
	}
	if _, ok := <-data; ok {
		t.Fatal("the one-shot watch is still open after firing")
	}
	if c.LastZxid() != 14 {
		t.Fatalf("LastZxid %d after events up to 14", c.LastZxid())
	}
	if err := c.CheckWatches(ctx, "/p", WatchPersistent); err != nil {
		t.Fatalf("CheckWatches: %v", err)
	}
	if err := c.CheckWatches(ctx, "/nothing", WatchAny); !errors.Is(err, ErrNoWatcher) {
		t.Fatalf("CheckWatches without a watch: %v", err)
	}
	if err := c.CheckWatches(ctx, "/p", WatchKind(9)); !errors.Is(err, ErrBadArguments) {
		t.Fatalf("CheckWatches of an unknown kind: %v", err)
	}
	if err := c.RemoveWatches(ctx, "/p", WatchKind(9)); !errors.Is(err, ErrBadArguments) {
		t.Fatalf("RemoveWatches of an unknown kind: %v", err)
	}
	if err := c.RemoveWatches(ctx, "/p", WatchPersistentRecursive); !errors.Is(err, ErrNoWatcher) {
		t.Fatalf("RemoveWatches of a kind the path has not: %v", err)
	}

	// StopWatch of one of two persistent watches on /p keeps the server's;
	// of the second, removes it.
	if err := c.StopWatch(ctx, pers2); err != nil {
		t.Fatal(err)
	}
	if ev := recvEvent(t, pers2); ev.Type != EventNotWatching || ev.Err != nil {
		t.Fatalf("stopped watch got %+v", ev)
	}
	assertClosed(t, pers2)
	removes := func() int {
		n := 0
		for _, r := range s.receivedRequests() {
			if rw := r.GetRemoveWatches(); rw != nil && rw.Path == "/p" && rw.Kind == apipb.WatchKind_WATCH_PERSISTENT {
				n++
			}
		}
		return n
	}
	if n := removes(); n != 0 {
		t.Fatalf("StopWatch of a shared watch sent %d removeWatches", n)
	}
	if err := c.RemoveWatches(ctx, "/p", WatchPersistent); err != nil {
		t.Fatal(err)
	}
	if ev := recvEvent(t, pers); ev.Type != EventNotWatching || ev.Err != nil {
		t.Fatalf("removed watch got %+v", ev)
	}
	assertClosed(t, pers)
	if n := removes(); n != 1 {
		t.Fatalf("RemoveWatches sent %d removeWatches", n)
	}
	if err := c.StopWatch(ctx, pers); !errors.Is(err, ErrNoWatcher) {
		t.Fatalf("StopWatch of a removed watch: %v", err)
	}
	if err := c.StopWatch(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if !hasRequest(s, func(r *apipb.Request) bool {
		rw := r.GetRemoveWatches()
		return rw != nil && rw.Path == "/r" && rw.Kind == apipb.WatchKind_WATCH_PERSISTENT_RECURSIVE
	}) {
		t.Fatal("StopWatch of the only recursive watch on /r did not remove the server's")
	}

	// The session's end ends the rest.
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	evs, closed := drain(root)
	if !closed || len(evs) != 1 || evs[0].Type != EventNotWatching || !errors.Is(evs[0].Err, ErrClosed) {
		t.Fatalf("after Close the recursive watch got %+v (closed %v)", evs, closed)
	}
}

// TestPersistentWatchesReregistered: the resume request re-sends the
// persistent and recursive watches; after a failover during which
// something changed, each gets an EventResync (ErrConnectionLoss), and
// none when nothing changed.
func TestPersistentWatchesReregistered(t *testing.T) {
	cl := newFakeCluster()
	c, s1, s2 := connectPair(t, cl)
	ctx := ctxT(t)
	pers, err := c.AddWatch(ctx, "/p", WatchPersistent)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.AddWatch(ctx, "/r", WatchPersistentRecursive)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, "/x") // the client has seen the cluster's last zxid

	s1.killStreams()
	nextState(t, c, StateReconnected)
	crs := s2.connectRequests()
	if len(crs) != 1 || !slices.Equal(crs[0].PersistentWatches, []string{"/p"}) || !slices.Equal(crs[0].PersistentRecursiveWatches, []string{"/r"}) {
		t.Fatalf("resume requests %v", crs)
	}
	if _, _, err := c.Exists(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan Event{pers, rec} {
		if evs, _ := drain(ch); len(evs) != 0 {
			t.Fatalf("nothing changed while away, yet %+v", evs)
		}
	}

	// A change while away: the next resume brings an EventResync.
	cl.mu.Lock()
	cl.zxid++
	cl.mu.Unlock()
	serverOf(c, s1, s2).killStreams()
	nextState(t, c, StateReconnected)
	for _, ch := range []<-chan Event{pers, rec} {
		ev := recvEvent(t, ch)
		if ev.Type != EventResync || !errors.Is(ev.Err, ErrConnectionLoss) {
			t.Fatalf("after a failover with changes: %+v, want EventResync", ev)
		}
	}
}
