package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// testLogger routes the client's log to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func connect(t *testing.T, servers []*fakeServer, opts ...Option) *Client {
	t.Helper()
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	opts = append([]Option{
		WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		WithDialTimeout(time.Second),
	}, opts...)
	c, err := Connect(ctx, addrs, opts...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// nextState reads state events until one with state want arrives.
func nextState(t *testing.T, c *Client, want State) StateEvent {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-c.States():
			if !ok {
				t.Fatalf("States closed while waiting for %v", want)
			}
			if ev.State == want {
				return ev
			}
			t.Logf("state %v (server %s, err %v)", ev.State, ev.Server, ev.Err)
		case <-timer.C:
			t.Fatalf("timed out waiting for state %v", want)
		}
	}
}

// recvEvent waits for one event on a watch channel.
func recvEvent(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed without an event")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a watch event")
	}
	return Event{}
}

func assertClosed(t *testing.T, ch <-chan Event) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if ok {
			t.Fatalf("second event on a one-shot watch: %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch channel not closed")
	}
}

func assertNoEvent(t *testing.T, ch <-chan Event) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}

func TestBasicOperations(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	ctx := ctxT(t)

	if c.SessionID() == 0 || c.Server() != s.addr || c.SessionTimeout() != 10*time.Second {
		t.Fatalf("session %d server %q timeout %v", c.SessionID(), c.Server(), c.SessionTimeout())
	}
	if ev := nextState(t, c, StateConnected); ev.Server != s.addr {
		t.Fatalf("Connected server %q", ev.Server)
	}
	name, st, err := c.CreateStat(ctx, "/a", []byte("x"), CreateMode{})
	if err != nil || name != "/a" || st.Czxid == 0 || st.DataLength != 1 {
		t.Fatalf("CreateStat: %q %+v %v", name, st, err)
	}
	seq, err := c.Create(ctx, "/a/s-", nil, CreateMode{Kind: Ephemeral, Sequential: true})
	if err != nil || seq != "/a/s-0000000000" {
		t.Fatalf("sequential Create: %q %v", seq, err)
	}
	data, st, err := c.Get(ctx, "/a")
	if err != nil || string(data) != "x" || st.NumChildren != 1 {
		t.Fatalf("Get: %q %+v %v", data, st, err)
	}
	st, err = c.Set(ctx, "/a", []byte("y"), 0)
	if err != nil || st.Version != 1 {
		t.Fatalf("Set: %+v %v", st, err)
	}
	kids, _, err := c.Children(ctx, "/a")
	if err != nil || !slices.Equal(kids, []string{"s-0000000000"}) {
		t.Fatalf("Children: %v %v", kids, err)
	}
	if _, ok, err := c.Exists(ctx, "/nope"); ok || err != nil {
		t.Fatalf("Exists(/nope): %v %v", ok, err)
	}
	if st, ok, err := c.Exists(ctx, "/a/s-0000000000"); !ok || err != nil || st.EphemeralOwner != c.SessionID() {
		t.Fatalf("Exists: %+v %v %v", st, ok, err)
	}
	if err := c.Sync(ctx, "/"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := c.Delete(ctx, "/a", -1); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Delete non-empty: %v", err)
	}
	if err := c.Delete(ctx, "/a/s-0000000000", 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if c.LastZxid() == 0 {
		t.Fatal("LastZxid not tracked")
	}
}

func TestConcurrentCallersAreMatchedByXid(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	ctx := ctxT(t)

	const workers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				p := fmt.Sprintf("/n-%d-%d", w, i)
				if _, err := c.Create(ctx, p, []byte(p), CreateMode{}); err != nil {
					errs <- err
					return
				}
				data, _, err := c.Get(ctx, p)
				if err != nil || string(data) != p {
					errs <- fmt.Errorf("Get(%s) = %q, %v", p, data, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Xids are increasing on the wire and lowest_pending_xid never passes xid.
	reqs := s.receivedRequests()
	for i, r := range reqs {
		if i > 0 && r.Xid <= reqs[i-1].Xid {
			t.Fatalf("xids not increasing: %d after %d", r.Xid, reqs[i-1].Xid)
		}
		if r.LowestPendingXid > r.Xid || r.LowestPendingXid < 1 {
			t.Fatalf("xid %d has lowest_pending_xid %d", r.Xid, r.LowestPendingXid)
		}
	}
	if reqs[0].Xid != 1 {
		t.Fatalf("first xid %d, want 1", reqs[0].Xid)
	}
}

func TestErrorCodeTable(t *testing.T) {
	for code, name := range apipb.ErrorCode_name {
		code := apipb.ErrorCode(code)
		err := codeError(code, "because")
		if code == apipb.ErrorCode_OK {
			if err != nil {
				t.Errorf("OK maps to %v", err)
			}
			continue
		}
		sentinel, ok := codeErrors[code]
		if !ok {
			t.Errorf("code %s has no sentinel", name)
			continue
		}
		if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), "because") {
			t.Errorf("code %s: %v", name, err)
		}
	}
	seen := map[error]apipb.ErrorCode{}
	for code, s := range codeErrors {
		if other, dup := seen[s]; dup {
			t.Errorf("%v is the sentinel of %v and %v", s, code, other)
		}
		seen[s] = code
	}
	err := codeError(apipb.ErrorCode(999), "odd")
	if !errors.Is(err, ErrSystemError) || !strings.Contains(err.Error(), "999") || !strings.Contains(err.Error(), "odd") {
		t.Errorf("unknown code: %v", err)
	}
	if err := codeError(apipb.ErrorCode_NO_NODE, ""); err != ErrNoNode {
		t.Errorf("no message: %v", err)
	}
}

func TestServerErrorsReachCallers(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	ctx := ctxT(t)

	if _, err := c.Create(ctx, "/a", nil, CreateMode{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"create exists", func() error { _, err := c.Create(ctx, "/a", nil, CreateMode{}); return err }, ErrNodeExists},
		{"create no parent", func() error { _, err := c.Create(ctx, "/x/y", nil, CreateMode{}); return err }, ErrNoNode},
		{"get missing", func() error { _, _, err := c.Get(ctx, "/x"); return err }, ErrNoNode},
		{"set bad version", func() error { _, err := c.Set(ctx, "/a", nil, 7); return err }, ErrBadVersion},
		{"delete missing", func() error { return c.Delete(ctx, "/x", -1) }, ErrNoNode},
		{"bad path", func() error { _, err := c.Create(ctx, "rel", nil, CreateMode{}); return err }, ErrBadArguments},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}

	// Every code the server sends arrives as its sentinel, message kept.
	for code, sentinel := range codeErrors {
		if code == apipb.ErrorCode_UNAVAILABLE || code == apipb.ErrorCode_SESSION_EXPIRED {
			continue // handled by the session (failover, expiry)
		}
		s.setOnRequest(func(r *apipb.Request) hookResult {
			if r.GetSync() != nil {
				return hookResult{act: actReply, code: code, msg: "reason " + code.String()}
			}
			return hookResult{}
		})
		err := c.Sync(ctx, "/")
		if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), "reason "+code.String()) {
			t.Errorf("code %v: got %v", code, err)
		}
	}
}

// TestSyncGetSendsBothAtOnce: SyncGet sends its Get without waiting for
// the Sync's reply (here the server holds the Sync until both requests have
// left the client), and returns the Get's data once the Sync completes.
func TestSyncGetSendsBothAtOnce(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	ctx := ctxT(t)
	if _, err := c.Create(ctx, "/k", []byte("v1"), CreateMode{}); err != nil {
		t.Fatal(err)
	}
	s.setOnRequest(func(r *apipb.Request) hookResult {
		if r.GetSync() != nil {
			return hookResult{act: actHold}
		}
		return hookResult{}
	})
	type got struct {
		data []byte
		err  error
	}
	res := make(chan got, 1)
	go func() {
		data, _, err := c.SyncGet(ctx, "/k")
		res <- got{data, err}
	}()
	// Both calls are on the stream while the Sync is still unanswered.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		sent := 0
		for _, p := range c.pending {
			if p.sent && (p.req.GetSync() != nil || p.req.GetGetData() != nil) {
				sent++
			}
		}
		c.mu.Unlock()
		if sent == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of SyncGet's 2 requests sent while the Sync is held, want both", sent)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case r := <-res:
		t.Fatalf("SyncGet returned %q, %v before its Sync was answered", r.data, r.err)
	default:
	}
	s.setOnRequest(nil)
	s.releaseHeld()
	if r := <-res; r.err != nil || string(r.data) != "v1" {
		t.Fatalf("SyncGet: %q, %v; want v1", r.data, r.err)
	}

	// A failed Sync fails the SyncGet, even though the Get itself succeeds.
	s.setOnRequest(func(r *apipb.Request) hookResult {
		if r.GetSync() != nil {
			return hookResult{act: actReply, code: apipb.ErrorCode_OPERATION_TIMEOUT, msg: "no read index"}
		}
		return hookResult{}
	})
	if data, _, err := c.SyncGet(ctx, "/k"); !errors.Is(err, ErrOperationTimeout) || data != nil {
		t.Fatalf("SyncGet with a failed Sync: %q, %v; want ErrOperationTimeout and no data", data, err)
	}
	s.setOnRequest(nil)
	if _, _, err := c.SyncGet(ctx, "/missing"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("SyncGet of a missing node: %v, want ErrNoNode", err)
	}
}

func TestMulti(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	ctx := ctxT(t)

	res, err := c.Multi(ctx, CreateOp("/m", nil, CreateMode{}), CreateOp("/m/c", []byte("1"), CreateMode{}), SetOp("/m/c", []byte("2"), 0), CheckOp("/m/c", 1))
	if err != nil || len(res) != 4 || res[1].Path != "/m/c" || res[2].Stat.Version != 1 {
		t.Fatalf("Multi: %+v %v", res, err)
	}
	res, err = c.Multi(ctx, CreateOp("/n", nil, CreateMode{}), DeleteOp("/m/c", 5), CreateOp("/o", nil, CreateMode{}))
	if !errors.Is(err, ErrBadVersion) || !strings.Contains(err.Error(), "op 1 failed") {
		t.Fatalf("failed Multi error: %v", err)
	}
	if len(res) != 3 || res[0].Err != nil || res[0].Path != "" || !errors.Is(res[1].Err, ErrBadVersion) || !errors.Is(res[2].Err, ErrRuntimeInconsistency) {
		t.Fatalf("failed Multi results: %+v", res)
	}
	if cl.exists("/n") {
		t.Fatal("failed Multi applied an op")
	}
	if res, err := c.Multi(ctx); err != nil || len(res) != 0 {
		t.Fatalf("empty Multi: %v %v", res, err)
	}
}

func TestWatchDispatch(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	ctx := ctxT(t)

	mustCreate(t, c, "/w")
	_, _, dataW, err := c.GetW(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	_, ok, existW, err := c.ExistsW(ctx, "/w")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	_, _, childW, err := c.ChildrenW(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	_, ok, createdW, err := c.ExistsW(ctx, "/w/new")
	if err != nil || ok || createdW == nil {
		t.Fatalf("ExistsW on an absent node: %v %v %v", ok, createdW, err)
	}
	if _, _, ch, err := c.GetW(ctx, "/missing"); !errors.Is(err, ErrNoNode) || ch != nil {
		t.Fatalf("GetW on an absent node: %v %v", ch, err)
	}
	if _, _, ch, err := c.ChildrenW(ctx, "/missing"); !errors.Is(err, ErrNoNode) || ch != nil {
		t.Fatalf("ChildrenW on an absent node: %v %v", ch, err)
	}
	c.mu.Lock()
	_, leaked := c.watches["/missing"]
	c.mu.Unlock()
	if leaked {
		t.Fatal("failed read left a client-side watch")
	}

	// One data change fires the data and exist watches, not the child one.
	st, err := c.Set(ctx, "/w", []byte("v"), -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan Event{dataW, existW} {
		ev := recvEvent(t, ch)
		if ev.Type != EventNodeDataChanged || ev.Path != "/w" || ev.Zxid != st.Mzxid {
			t.Fatalf("event %+v", ev)
		}
		assertClosed(t, ch)
	}
	assertNoEvent(t, childW)

	// Creating a child fires the exist watch on it and the parent's child watch.
	mustCreate(t, c, "/w/new")
	if ev := recvEvent(t, createdW); ev.Type != EventNodeCreated || ev.Path != "/w/new" {
		t.Fatalf("event %+v", ev)
	}
	if ev := recvEvent(t, childW); ev.Type != EventNodeChildrenChanged || ev.Path != "/w" {
		t.Fatalf("event %+v", ev)
	}

	// Deletion fires every kind.
	_, _, d2, _ := c.GetW(ctx, "/w/new")
	_, _, c2, _ := c.ChildrenW(ctx, "/w/new")
	if err := c.Delete(ctx, "/w/new", -1); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan Event{d2, c2} {
		if ev := recvEvent(t, ch); ev.Type != EventNodeDeleted {
			t.Fatalf("event %+v", ev)
		}
	}

	// RemoveWatches.
	if err := c.RemoveWatches(ctx, "/w", WatchChild); !errors.Is(err, ErrNoWatcher) {
		t.Fatalf("RemoveWatches without a watch: %v", err)
	}
	_, _, rw, _ := c.ChildrenW(ctx, "/w")
	if err := c.RemoveWatches(ctx, "/w", WatchData); !errors.Is(err, ErrNoWatcher) {
		t.Fatalf("RemoveWatches of the wrong kind: %v", err)
	}
	if err := c.RemoveWatches(ctx, "/w", WatchAny); err != nil {
		t.Fatalf("RemoveWatches: %v", err)
	}
	if ev := recvEvent(t, rw); ev.Type != EventNotWatching || ev.Err != nil {
		t.Fatalf("removed watch got %+v", ev)
	}
	assertClosed(t, rw)
}

func mustCreate(t *testing.T, c *Client, p string) {
	t.Helper()
	if _, err := c.Create(ctxT(t), p, nil, CreateMode{}); err != nil {
		t.Fatalf("Create(%s): %v", p, err)
	}
}

// TestFailoverResendsInFlightWrite kills the stream after the server applied
// a write but before it replied: the client resumes on the other server,
// re-sends the write with its xid and gets the first outcome, once.
func TestFailoverResendsInFlightWrite(t *testing.T) {
	cl := newFakeCluster()
	c, s1, s2 := connectPair(t, cl)
	ctx := ctxT(t)
	nextState(t, c, StateConnected)
	mustCreate(t, c, "/base")

	var killedXid int64
	var once sync.Once
	s1.setOnRequest(func(r *apipb.Request) hookResult {
		if cr := r.GetCreate(); cr != nil && cr.Path == "/x" {
			act := actNormal
			once.Do(func() { killedXid, act = r.Xid, actApplyKill })
			return hookResult{act: act}
		}
		return hookResult{}
	})
	name, err := c.Create(ctx, "/x", []byte("once"), CreateMode{Sequential: true})
	if err != nil || name != "/x0000000001" { // "/base" was child 0 of "/"
		t.Fatalf("Create across failover: %q %v", name, err)
	}
	if ev := nextState(t, c, StateDisconnected); ev.Server != s1.addr || ev.Err == nil {
		t.Fatalf("Disconnected event %+v", ev)
	}
	if ev := nextState(t, c, StateReconnected); ev.Server != s2.addr {
		t.Fatalf("Reconnected to %q, want the other server %q", ev.Server, s2.addr)
	}
	if c.Server() != s2.addr {
		t.Fatalf("Server() = %q", c.Server())
	}
	if n := cl.appliedCount(killedXid); n != 1 {
		t.Fatalf("write xid %d applied %d times", killedXid, n)
	}
	var resent bool
	for _, r := range s2.receivedRequests() {
		if r.Xid == killedXid && r.GetCreate().GetPath() == "/x" {
			resent = true
		}
	}
	if !resent {
		t.Fatalf("s2 did not receive xid %d", killedXid)
	}
	crs := s2.connectRequests()
	if len(crs) != 1 || crs[0].SessionId != c.SessionID() || len(crs[0].Password) == 0 || crs[0].LastZxid == 0 {
		t.Fatalf("resume ConnectRequest %+v", crs)
	}
	// The session goes on, with increasing xids.
	if _, err := c.Create(ctx, "/y", nil, CreateMode{}); err != nil {
		t.Fatal(err)
	}
	reqs := s2.receivedRequests()
	if last := reqs[len(reqs)-1]; last.Xid <= killedXid {
		t.Fatalf("xid %d after resend of %d", last.Xid, killedXid)
	}
}

// TestWatchesReregisteredOnReconnect checks what the resume ConnectRequest
// carries and that the watches work on the new server.
func TestWatchesReregisteredOnReconnect(t *testing.T) {
	cl := newFakeCluster()
	c, s1, s2 := connectPair(t, cl)
	ctx := ctxT(t)
	mustCreate(t, c, "/d")
	mustCreate(t, c, "/e")
	mustCreate(t, c, "/p")

	_, _, dW, _ := c.GetW(ctx, "/d")
	_, _, eW, _ := c.ExistsW(ctx, "/e")   // exists: a data watch
	_, _, aW, _ := c.ExistsW(ctx, "/abs") // absent: an exist watch
	_, _, pW, _ := c.ChildrenW(ctx, "/p")

	s1.killStreams()
	nextState(t, c, StateReconnected)
	crs := s2.connectRequests()
	if len(crs) != 1 {
		t.Fatalf("s2 got %d connects", len(crs))
	}
	cr := crs[0]
	if !slices.Equal(cr.DataWatches, []string{"/d", "/e"}) || !slices.Equal(cr.ExistWatches, []string{"/abs"}) || !slices.Equal(cr.ChildWatches, []string{"/p"}) {
		t.Fatalf("resume watches data=%v exist=%v child=%v", cr.DataWatches, cr.ExistWatches, cr.ChildWatches)
	}
	if cr.LastZxid != c.LastZxid() {
		t.Fatalf("last_zxid %d, client has %d", cr.LastZxid, c.LastZxid())
	}

	// The re-registered watches fire on s2.
	if _, err := c.Set(ctx, "/d", nil, -1); err != nil {
		t.Fatal(err)
	}
	if ev := recvEvent(t, dW); ev.Type != EventNodeDataChanged {
		t.Fatalf("%+v", ev)
	}
	mustCreate(t, c, "/abs")
	if ev := recvEvent(t, aW); ev.Type != EventNodeCreated {
		t.Fatalf("%+v", ev)
	}
	mustCreate(t, c, "/p/c")
	if ev := recvEvent(t, pW); ev.Type != EventNodeChildrenChanged {
		t.Fatalf("%+v", ev)
	}
	assertNoEvent(t, eW)

	// A change made while disconnected fires at once on resume (the new
	// server compares with last_zxid).
	s2.setOnRequest(func(r *apipb.Request) hookResult { return hookResult{} })
	cl.mu.Lock()
	cl.zxid++
	cl.nodes["/e"].data = []byte("changed")
	cl.nodes["/e"].stat.Mzxid = cl.zxid
	cl.mu.Unlock()
	s2.killStreams()
	nextState(t, c, StateReconnected)
	if ev := recvEvent(t, eW); ev.Type != EventNodeDataChanged || ev.Path != "/e" {
		t.Fatalf("%+v", ev)
	}
}

// TestSessionExpiredOnResume: the session is gone when the client resumes.
func TestSessionExpiredOnResume(t *testing.T) {
	cl := newFakeCluster()
	s1, s2 := cl.newServer(t, "s1"), cl.newServer(t, "s2")
	c := connect(t, []*fakeServer{s1, s2})
	ctx := ctxT(t)
	mustCreate(t, c, "/w")
	_, _, watch, err := c.GetW(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	server := serverOf(c, s1, s2)

	// Hold the next write so that it and a read are in flight.
	server.setOnRequest(func(r *apipb.Request) hookResult {
		if r.GetCreate() != nil {
			return hookResult{act: actHold}
		}
		return hookResult{}
	})
	writeErr := make(chan error, 1)
	go func() {
		_, err := c.Create(ctx, "/held", nil, CreateMode{})
		writeErr <- err
	}()
	waitFor(t, "the held write", func() bool {
		return hasRequest(server, func(r *apipb.Request) bool { return r.GetCreate().GetPath() == "/held" })
	})
	readErr := make(chan error, 1)
	go func() {
		_, _, err := c.Get(ctx, "/w")
		readErr <- err
	}()
	waitFor(t, "the read", func() bool { return hasRequest(server, func(r *apipb.Request) bool { return r.GetGetData() != nil }) })

	cl.expireSession(c.SessionID())
	server.killStreams()

	ev := nextState(t, c, StateExpired)
	if !errors.Is(ev.Err, ErrSessionExpired) {
		t.Fatalf("Expired event err %v", ev.Err)
	}
	if err := <-writeErr; !errors.Is(err, ErrSessionExpired) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("in-flight write: %v", err)
	}
	if err := <-readErr; !errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("in-flight read: %v", err)
	}
	wev := recvEvent(t, watch)
	if wev.Type != EventNotWatching || !errors.Is(wev.Err, ErrSessionExpired) || wev.Path != "/w" {
		t.Fatalf("watch got %+v", wev)
	}
	assertClosed(t, watch)
	if _, _, err := c.Get(ctx, "/w"); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("call after expiry: %v", err)
	}
	if c.State() != StateExpired {
		t.Fatalf("State() = %v", c.State())
	}
	// No new session was opened behind the caller's back.
	news := 0
	for _, s := range []*fakeServer{s1, s2} {
		for _, cr := range s.connectRequests() {
			if cr.SessionId == 0 {
				news++
			}
		}
	}
	if news != 1 {
		t.Fatalf("%d new sessions requested, want 1", news)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close after expiry: %v", err)
	}
}

// connectPair connects to one of two servers and returns the client, the
// server it is on and the other one.
func connectPair(t *testing.T, cl *fakeCluster, opts ...Option) (*Client, *fakeServer, *fakeServer) {
	a, b := cl.newServer(t, "a"), cl.newServer(t, "b")
	c := connect(t, []*fakeServer{a, b}, opts...)
	if c.Server() == b.addr {
		a, b = b, a
	}
	return c, a, b
}

func serverOf(c *Client, ss ...*fakeServer) *fakeServer {
	for _, s := range ss {
		if s.addr == c.Server() {
			return s
		}
	}
	return nil
}

func hasRequest(s *fakeServer, match func(*apipb.Request) bool) bool {
	return slices.ContainsFunc(s.receivedRequests(), match)
}

func TestAuthFailedOnResume(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	ctx := ctxT(t)
	cl.setPassword(c.SessionID(), "other")
	s.killStreams()
	ev := nextState(t, c, StateExpired)
	if !errors.Is(ev.Err, ErrAuthFailed) || !errors.Is(ev.Err, ErrSessionExpired) || !strings.Contains(ev.Err.Error(), "wrong password") {
		t.Fatalf("Expired err %v", ev.Err)
	}
	if err := c.Sync(ctx, "/"); !errors.Is(err, ErrAuthFailed) || !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("call after auth failure: %v", err)
	}
}

func TestAuthFailedOnConnect(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	s.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_AUTH_FAILED, "no" })
	_, err := Connect(ctxT(t), []string{s.addr})
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Connect: %v", err)
	}
}

func TestConnectSkipsUnavailableServers(t *testing.T) {
	cl := newFakeCluster()
	bad, good := cl.newServer(t, "bad"), cl.newServer(t, "good")
	bad.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_UNAVAILABLE, "no leader" })
	for range 4 { // random order: both orders are likely covered
		c := connect(t, []*fakeServer{bad, good})
		if c.Server() != good.addr {
			t.Fatalf("connected to %s", c.Server())
		}
		c.Close(ctxT(t))
	}

	// Nothing accepts: Connect gives up when ctx ends, with the cause.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Connect(ctx, []string{bad.addr})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("Connect: %v", err)
	}
}

func TestReconnectSkipsUnavailableServer(t *testing.T) {
	cl := newFakeCluster()
	c, s2, s1 := connectPair(t, cl)
	s1.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_UNAVAILABLE, "behind" })
	s2.killStreams()
	ev := nextState(t, c, StateReconnected)
	if ev.Server != s2.addr {
		t.Fatalf("reconnected to %s", ev.Server)
	}
	crs := s1.connectRequests()
	if len(crs) == 0 || crs[0].SessionId != c.SessionID() {
		t.Fatalf("s1 (tried first, as the other server) got %+v", crs)
	}
	if err := c.Sync(ctxT(t), "/"); err != nil {
		t.Fatal(err)
	}
}

// TestUnavailableReplyFailsOver: a server that answers a request with
// UNAVAILABLE makes the client move, re-sending the request with its xid.
func TestUnavailableReplyFailsOver(t *testing.T) {
	cl := newFakeCluster()
	c, s1, s2 := connectPair(t, cl)
	ctx := ctxT(t)
	s1.setOnRequest(func(r *apipb.Request) hookResult {
		if r.GetCreate() != nil {
			return hookResult{act: actReply, code: apipb.ErrorCode_UNAVAILABLE, msg: "lost the leader"}
		}
		return hookResult{}
	})
	if _, err := c.Create(ctx, "/u", nil, CreateMode{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	ev := nextState(t, c, StateDisconnected)
	if !errors.Is(ev.Err, ErrUnavailable) {
		t.Fatalf("Disconnected err %v", ev.Err)
	}
	if c.Server() != s2.addr || cl.appliedCount(s2.receivedRequests()[0].Xid) != 1 {
		t.Fatalf("server %s", c.Server())
	}
}

func TestPingsWhenIdle(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s}, WithSessionTimeout(300*time.Millisecond))
	if c.SessionTimeout() != 300*time.Millisecond {
		t.Fatalf("timeout %v", c.SessionTimeout())
	}
	pings := func() []*apipb.Request {
		var out []*apipb.Request
		for _, r := range s.receivedRequests() {
			if r.GetPing() != nil {
				out = append(out, r)
			}
		}
		return out
	}
	waitFor(t, "three pings", func() bool { return len(pings()) >= 3 })
	ps := pings()
	for i := 1; i < len(ps); i++ {
		if ps[i].Xid <= ps[i-1].Xid {
			t.Fatalf("ping xids %d then %d", ps[i-1].Xid, ps[i].Xid)
		}
	}
	if c.State() != StateConnected {
		t.Fatalf("state %v", c.State())
	}
}

// TestReadTimeoutFailsOver: a server that goes silent (no replies, not even
// to pings) is abandoned after 2/3 of the session timeout.
func TestReadTimeoutFailsOver(t *testing.T) {
	cl := newFakeCluster()
	c, s1, s2 := connectPair(t, cl, WithSessionTimeout(600*time.Millisecond))
	s1.setOnRequest(func(*apipb.Request) hookResult { return hookResult{act: actBlackhole} })
	start := time.Now()
	if err := c.Sync(ctxT(t), "/"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	ev := nextState(t, c, StateDisconnected)
	if !strings.Contains(ev.Err.Error(), "no message") {
		t.Fatalf("Disconnected err %v", ev.Err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("gave up on the server after %v", d)
	}
	if c.Server() != s2.addr {
		t.Fatalf("server %s", c.Server())
	}
}

// TestGivesUpAfterSessionTimeout: no server accepts the session again.
func TestGivesUpAfterSessionTimeout(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s}, WithSessionTimeout(400*time.Millisecond))
	ctx := ctxT(t)
	mustCreate(t, c, "/w")
	_, _, watch, _ := c.GetW(ctx, "/w")
	s.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_UNAVAILABLE, "" })
	start := time.Now()
	s.killStreams()
	nextState(t, c, StateDisconnected)
	ev := nextState(t, c, StateExpired)
	if d := time.Since(start); d > 3*time.Second || d < 300*time.Millisecond {
		t.Fatalf("expired after %v with a 400ms session timeout", d)
	}
	if !errors.Is(ev.Err, ErrSessionExpired) {
		t.Fatalf("Expired err %v", ev.Err)
	}
	if len(s.connectRequests()) < 2 {
		t.Fatal("no reconnect attempt")
	}
	if ev := recvEvent(t, watch); ev.Type != EventNotWatching || !errors.Is(ev.Err, ErrSessionExpired) {
		t.Fatalf("watch got %+v", ev)
	}
	if _, err := c.Create(ctx, "/z", nil, CreateMode{}); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("call after expiry: %v", err)
	}
}

func TestServerStoppedPendingCallsWait(t *testing.T) {
	// While disconnected, calls queue and are sent on the next server.
	cl := newFakeCluster()
	c, s1, s2 := connectPair(t, cl)
	s2.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_UNAVAILABLE, "" })
	s1.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_UNAVAILABLE, "" })
	s1.killStreams()
	nextState(t, c, StateDisconnected)
	done := make(chan error, 1)
	go func() { _, err := c.Create(ctxT(t), "/q", nil, CreateMode{}); done <- err }()
	waitFor(t, "a refused reconnect", func() bool { return len(s2.connectRequests()) > 0 })
	s2.setRefuse(nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !cl.exists("/q") {
		t.Fatal("queued create not applied")
	}
}

func TestContextCancel(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	s.setOnRequest(func(r *apipb.Request) hookResult {
		if r.GetGetData() != nil {
			return hookResult{act: actHold}
		}
		return hookResult{}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, _, ch, err := c.GetW(ctx, "/"); _ = ch; done <- err }()
	waitFor(t, "the held read", func() bool { return hasRequest(s, func(r *apipb.Request) bool { return r.GetGetData() != nil }) })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	c.mu.Lock()
	n := len(c.watches)
	c.mu.Unlock()
	if n != 0 {
		t.Fatal("abandoned GetW left a watch")
	}
	if _, _, err := c.Get(canceledCtx(), "/"); !errors.Is(err, context.Canceled) {
		t.Fatalf("call with a done ctx: %v", err)
	}
	s.setOnRequest(nil)
	s.releaseHeld()
	if _, _, err := c.Get(ctxT(t), "/"); err != nil {
		t.Fatalf("call after release: %v", err)
	}
}

func canceledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestClose(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	waitFor(t, "idle goroutines", func() bool { return true })
	before := runtime.NumGoroutine()

	c := connect(t, []*fakeServer{s})
	ctx := ctxT(t)
	if _, err := c.Create(ctx, "/eph", nil, CreateMode{Kind: Ephemeral}); err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := c.GetW(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !hasRequest(s, func(r *apipb.Request) bool { return r.GetClose() != nil }) {
		t.Fatal("no CloseRequest sent")
	}
	if cl.exists("/eph") {
		t.Fatal("ephemeral survived Close")
	}
	if ev := recvEvent(t, watch); ev.Type != EventNotWatching || !errors.Is(ev.Err, ErrClosed) {
		t.Fatalf("watch got %+v", ev)
	}
	assertClosed(t, watch)
	if _, _, err := c.Get(ctx, "/"); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	var states []State
	for ev := range c.States() { // closed after StateClosed
		states = append(states, ev.State)
	}
	if !slices.Equal(states, []State{StateConnected, StateClosed}) {
		t.Fatalf("states %v", states)
	}
	waitFor(t, "no goroutine leak", func() bool { return runtime.NumGoroutine() <= before })
}

func TestCloseWhileDisconnectedGivesUpWithCtx(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	before := runtime.NumGoroutine()
	c := connect(t, []*fakeServer{s})
	s.setRefuse(func(*apipb.ConnectRequest) (apipb.ErrorCode, string) { return apipb.ErrorCode_UNAVAILABLE, "" })
	s.killStreams()
	nextState(t, c, StateDisconnected)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	if c.State() != StateClosed {
		t.Fatalf("state %v", c.State())
	}
	waitFor(t, "no goroutine leak", func() bool { return runtime.NumGoroutine() <= before })
}

func TestStatesNeverBlock(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	for i := range statesBuffer + 10 {
		waitFor(t, "the stream", func() bool { return s.activeStreams() == 1 })
		s.killStreams()
		waitFor(t, "reconnect", func() bool {
			return s.acceptedStreams() == i+2 && s.activeStreams() == 1 && c.State() == StateReconnected
		})
		if err := c.Sync(ctxT(t), "/"); err != nil { // a good reply: no failover backoff
			t.Fatal(err)
		}
	}
	if n := len(c.States()); n != statesBuffer {
		t.Fatalf("%d buffered events", n)
	}
	if err := c.Sync(ctxT(t), "/"); err != nil {
		t.Fatal(err)
	}
}

// TestNotifyStates: every subscription, and States, gets every state change
// in order; a subscription starts from the state it reports; stop and Close
// end it.
func TestNotifyStates(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	cur1, sub1, stop1 := c.NotifyStates()
	cur2, sub2, stop2 := c.NotifyStates()
	if cur1 != StateConnected || cur2 != StateConnected {
		t.Fatalf("current states %v, %v; want connected", cur1, cur2)
	}
	waitFor(t, "the stream", func() bool { return s.activeStreams() == 1 })
	s.killStreams()
	nextState(t, c, StateReconnected) // States itself, read here, as before
	// The fake server does not vouch: the session is suspended at the
	// disconnect (vouch.go).
	want := []State{StateDisconnected, StateSuspended, StateReconnected}
	for i, sub := range []<-chan StateEvent{sub1, sub2} {
		for _, w := range want {
			select {
			case ev := <-sub:
				if ev.State != w {
					t.Fatalf("subscription %d: %v, want %v", i+1, ev.State, w)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("subscription %d: no %v", i+1, w)
			}
		}
	}
	stop1()
	stop1() // again: harmless
	if _, ok := <-sub1; ok {
		t.Fatal("an event after stop")
	}
	if err := c.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var last State
	for ev := range sub2 { // closed after StateClosed
		last = ev.State
	}
	if last != StateClosed {
		t.Fatalf("last event %v, want closed", last)
	}
	stop2()
	if cur, sub, stop := c.NotifyStates(); cur != StateClosed {
		t.Fatalf("after Close: current %v", cur)
	} else if _, ok := <-sub; ok {
		t.Fatal("a subscription after Close is open")
	} else {
		stop()
	}
}

func TestStatJSON(t *testing.T) {
	st := Stat{Czxid: 1, Mzxid: 2, Pzxid: 3, Ctime: 4, Mtime: 5, Version: 6, Cversion: 7, Aversion: 8, EphemeralOwner: 9, DataLength: 10, NumChildren: 11}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"czxid":1,"mzxid":2,"pzxid":3,"ctime":4,"mtime":5,"version":6,"cversion":7,"aversion":8,"ephemeralOwner":9,"dataLength":10,"numChildren":11}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	st.Kind, st.TTL = TTL, 1500*time.Millisecond
	b, _ = json.Marshal(st)
	if !strings.HasSuffix(string(b), `"kind":"ttl","ttlMs":1500}`) {
		t.Fatalf("got %s", b)
	}
	var back Stat
	if err := json.Unmarshal(b, &back); err != nil || back != st {
		t.Fatalf("round trip %+v %v", back, err)
	}
	// A node kept for a lock-delay says until when.
	st.Kind, st.TTL, st.LockDelayUntil = Ephemeral, 0, 1700000000123
	b, _ = json.Marshal(st)
	if !strings.HasSuffix(string(b), `"kind":"ephemeral","lockDelayUntil":1700000000123}`) {
		t.Fatalf("got %s", b)
	}
	if err := json.Unmarshal(b, &back); err != nil || back != st {
		t.Fatalf("round trip %+v %v", back, err)
	}
	if got := statFromPB(&apipb.Stat{EphemeralOwner: 9, LockDelayUntilMs: 77}); got.LockDelayUntil != 77 || got.EphemeralOwner != 9 {
		t.Fatalf("decoded %+v", got)
	}
}

func TestNames(t *testing.T) {
	for ty, want := range map[EventType]string{EventNodeCreated: "NodeCreated", EventNodeDeleted: "NodeDeleted",
		EventNodeDataChanged: "NodeDataChanged", EventNodeChildrenChanged: "NodeChildrenChanged", EventNotWatching: "NotWatching"} {
		if ty.String() != want {
			t.Errorf("%d: %s", int(ty), ty)
		}
	}
	// EventType values follow the wire's.
	if EventType(apipb.EventType_NODE_CHILDREN_CHANGED) != EventNodeChildrenChanged || WatchKind(apipb.WatchKind_WATCH_CHILD) != WatchChild || NodeKind(apipb.NodeKind_TTL) != TTL {
		t.Error("enum values differ from the wire's")
	}
	if StateReconnected.String() != "Reconnected" || StateSuspended.String() != "Suspended" || Ephemeral.String() != "ephemeral" {
		t.Error("names")
	}
}

// TestCloseWithWriteInFlight: the session ends (Close gives up) while a write
// is unanswered: its outcome is unknown.
func TestCloseWithWriteInFlight(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	s.setOnRequest(func(r *apipb.Request) hookResult {
		if r.GetSetData() != nil {
			return hookResult{act: actHold}
		}
		return hookResult{}
	})
	done := make(chan error, 1)
	go func() { _, err := c.Set(ctxT(t), "/", nil, -1); done <- err }()
	waitFor(t, "the held write", func() bool { return hasRequest(s, func(r *apipb.Request) bool { return r.GetSetData() != nil }) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	if err := <-done; !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, ErrClosed) {
		t.Fatalf("in-flight write: %v", err)
	}
}

// TestSessionExpiredReply: a server answering a request with SESSION_EXPIRED
// ends the session.
func TestSessionExpiredReply(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	c := connect(t, []*fakeServer{s})
	s.setOnRequest(func(r *apipb.Request) hookResult {
		return hookResult{act: actReply, code: apipb.ErrorCode_SESSION_EXPIRED, msg: "expired by the leader"}
	})
	_, err := c.Create(ctxT(t), "/a", nil, CreateMode{})
	if !errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "expired by the leader") {
		t.Fatalf("Create: %v", err)
	}
	nextState(t, c, StateExpired)
	if _, _, err := c.Get(ctxT(t), "/"); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("Get: %v", err)
	}
}
