package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/tree"
	"github.com/coordd/coordd/watch"
)

// logCluster is a one-server "cluster" for engine tests: it applies every
// submitted command to the FSM in submission order, as the next log entry
// of term 1, from a goroutine of its own (Submit must not block, and the
// engine submits with its locks held).
type logCluster struct {
	f     *fsm.FSM
	mu    sync.Mutex
	queue []*cmdpb.Command
	wake  chan struct{}
	index uint64
	logs  []*raft.Log // applied so far, for a lagging replica to replay
}

func newLogCluster(t *testing.T, f *fsm.FSM) *logCluster {
	c := &logCluster{f: f, wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.wake:
			}
			c.mu.Lock()
			q := c.queue
			c.queue = nil
			c.mu.Unlock()
			for _, cmd := range q {
				data, err := proto.Marshal(cmd)
				if err != nil {
					panic(err)
				}
				c.index++
				l := &raft.Log{Index: c.index, Term: 1, Type: raft.LogCommand, Data: data}
				// Recorded before it applies, so that a reply the entry
				// causes is never seen before a replica could replay it.
				c.mu.Lock()
				c.logs = append(c.logs, l)
				c.mu.Unlock()
				c.f.Apply(l)
			}
		}
	}()
	return c
}

func (c *logCluster) Submit(cmd *cmdpb.Command) {
	c.mu.Lock()
	c.queue = append(c.queue, cmd)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *logCluster) ReadIndex(<-chan struct{}) (int64, error) { return c.f.AppliedIndex(), nil }
func (c *logCluster) PassTouches(context.Context, []int64) (bool, error) {
	return true, nil
}
func (c *logCluster) Serving() (bool, string) { return true, "" }
func (c *logCluster) Reconfig(context.Context, Reconfig) (int64, error) {
	return 0, &Error{Code: ReconfigDisabled, Message: "not in this test"}
}

// testEngine is an engine on a fresh FSM fed by a logCluster.
func testEngine(t *testing.T) (*Engine, *logCluster) {
	t.Helper()
	f := fsm.New(fsm.Options{})
	c := newLogCluster(t, f)
	e := New(Config{ServerID: "1", FSM: f, Cluster: c, Tick: 100 * time.Millisecond,
		MinSessionTimeout: 200 * time.Millisecond, MaxSessionTimeout: 10 * time.Second})
	f.SetObserver(e)
	return e, c
}

// testSession is a connected session and what it has received.
type testSession struct {
	t         *testing.T
	s         *Session
	connected *Connected
	xid       int64
	got       []Message
}

// connectTest opens a session (req.SessionID 0) or resumes one.
func connectTest(t *testing.T, e *Engine, req ConnectRequest) *testSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req.TimeoutMs = 4000
	s, err := e.Connect(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Detach)
	ts := &testSession{t: t, s: s}
	m := ts.next()
	if m.Connected == nil {
		t.Fatalf("first message %+v, want Connected", m)
	}
	ts.connected = m.Connected
	return ts
}

// next returns the next message the session was sent, waiting for it.
func (ts *testSession) next() Message {
	ts.t.Helper()
	for len(ts.got) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		batch, ended := ts.s.Next(ctx)
		cancel()
		if len(batch) == 0 && ended {
			ts.t.Fatal("the session ended with nothing more to send")
		}
		ts.got = append(ts.got, batch...)
	}
	m := ts.got[0]
	ts.got = ts.got[1:]
	return m
}

// do submits req and returns its reply, with the events that came first.
func (ts *testSession) do(req Request) (*Response, []Event) {
	ts.t.Helper()
	ts.xid++
	req.Xid = ts.xid
	ts.s.Submit(&req)
	var evs []Event
	for {
		m := ts.next()
		switch {
		case m.Event != nil:
			evs = append(evs, *m.Event)
		case m.Response != nil:
			if m.Response.Xid != req.Xid {
				ts.t.Fatalf("reply to xid %d, want %d", m.Response.Xid, req.Xid)
			}
			return m.Response, evs
		case m.Final != nil:
			ts.t.Fatalf("%v: the session ended: %+v", req.Op, m.Final)
		}
	}
}

func (ts *testSession) ok(req Request) *Response {
	ts.t.Helper()
	r, _ := ts.do(req)
	if r.Code != OK {
		ts.t.Fatalf("%v %s: %v %s", req.Op, req.Path, r.Code, r.Message)
	}
	return r
}

// TestCloseSendsOwnEphemeralEvents: a session that closes is sent the
// events its own watches match in its ephemerals' deletion — one-shot and
// recursive alike, once per event — before the reply to its close
// (ZooKeeper's rule, docs/zookeeper-watches.md W8); then the table holds
// none of its watches. Another session's watches fire as for any delete.
func TestCloseSendsOwnEphemeralEvents(t *testing.T) {
	e, _ := testEngine(t)
	a, b := connectTest(t, e, ConnectRequest{}), connectTest(t, e, ConnectRequest{})
	b.ok(Request{Op: OpCreate, Path: "/e"})
	a.ok(Request{Op: OpCreate, Path: "/e/n", Create: Create{Kind: tree.Ephemeral}})
	a.ok(Request{Op: OpAddWatch, Path: "/e", Recursive: true})
	a.ok(Request{Op: OpGetData, Path: "/e/n", Watch: true})
	b.ok(Request{Op: OpGetChildren, Path: "/e", Watch: true})

	r, evs := a.do(Request{Op: OpClose})
	if r.Code != OK {
		t.Fatalf("close: %v %s", r.Code, r.Message)
	}
	if len(evs) != 1 || evs[0].Type != tree.EventNodeDeleted || evs[0].Path != "/e/n" || evs[0].Kinds != watch.Data|watch.PersistentRecursive {
		t.Fatalf("closing session was sent %+v before its close's reply, want one NodeDeleted /e/n for its data and recursive watches", evs)
	}
	if w := e.Watches().SessionWatches(a.s.ID()); len(w.Data)+len(w.PersistentRecursive) > 0 {
		t.Fatalf("closed session still holds watches %+v", w)
	}
	if m := b.next(); m.Event == nil || m.Event.Type != tree.EventNodeChildrenChanged || m.Event.Path != "/e" {
		t.Fatalf("other session got %+v, want NodeChildrenChanged /e", m)
	}
}

// TestExpiryRemovesPersistentWatches: the expiry of a session connected
// here removes its persistent and recursive watches (and the one-shot
// ones); it is sent what its own watches match in its ephemerals' deletion,
// as on a close, then SessionExpired; later changes reach only the others.
func TestExpiryRemovesPersistentWatches(t *testing.T) {
	e, c := testEngine(t)
	a, b := connectTest(t, e, ConnectRequest{}), connectTest(t, e, ConnectRequest{})
	b.ok(Request{Op: OpCreate, Path: "/x"})
	a.ok(Request{Op: OpCreate, Path: "/x/eph", Create: Create{Kind: tree.Ephemeral}})
	a.ok(Request{Op: OpAddWatch, Path: "/x"})
	a.ok(Request{Op: OpAddWatch, Path: "/x", Recursive: true})
	a.ok(Request{Op: OpAddWatch, Path: "/elsewhere", Recursive: true})
	a.ok(Request{Op: OpExists, Path: "/absent", Watch: true})
	b.ok(Request{Op: OpAddWatch, Path: "/x", Recursive: true})
	if got := e.Watches().Len(); got != 5 {
		t.Fatalf("%d registrations, want 5", got)
	}

	c.Submit(&cmdpb.Command{Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: a.s.ID(), Expired: true, Term: 1}}})
	var evs []Event
	for {
		m := a.next()
		if m.Event != nil {
			evs = append(evs, *m.Event)
			continue
		}
		if m.Final == nil || m.Final.Code != SessionExpired {
			t.Fatalf("expired session got %+v, want its end with SessionExpired", m)
		}
		break
	}
	want := []Event{
		{Type: tree.EventNodeDeleted, Path: "/x/eph", Kinds: watch.PersistentRecursive},
		{Type: tree.EventNodeChildrenChanged, Path: "/x", Kinds: watch.Persistent},
	}
	if len(evs) != len(want) {
		t.Fatalf("expired session was sent %+v, want %+v", evs, want)
	}
	for i := range want {
		if evs[i].Type != want[i].Type || evs[i].Path != want[i].Path || evs[i].Kinds != want[i].Kinds {
			t.Fatalf("expired session was sent %+v, want %+v", evs, want)
		}
	}
	if w := e.Watches().SessionWatches(a.s.ID()); len(w.Data)+len(w.Child)+len(w.Persistent)+len(w.PersistentRecursive) > 0 {
		t.Fatalf("expired session still holds watches %+v", w)
	}
	if got := e.Watches().Len(); got != 1 {
		t.Fatalf("%d registrations after the expiry, want 1 (the other session's)", got)
	}
	if m := b.next(); m.Event == nil || m.Event.Path != "/x/eph" || m.Event.Type != tree.EventNodeDeleted {
		t.Fatalf("other session got %+v, want NodeDeleted /x/eph", m)
	}
	_, evs = b.do(Request{Op: OpCreate, Path: "/x/later"})
	if len(evs) != 1 || evs[0].Path != "/x/later" {
		t.Fatalf("other session's recursive watch: %+v, want NodeCreated /x/later", evs)
	}
	select {
	case <-a.s.Done():
	default:
		t.Fatal("the expired session's connection did not end")
	}
}

// TestReregisterOrder: the one-shot watches a resume fires at once come in
// zxid order (coordd's API promises it), and in ZooKeeper's order — data,
// exist, child lists — when the request asks for it (ZooKeeper's
// setWatches2, docs/zookeeper-watches.md W7).
func TestReregisterOrder(t *testing.T) {
	e, _ := testEngine(t)
	a, b := connectTest(t, e, ConnectRequest{}), connectTest(t, e, ConnectRequest{})
	b.ok(Request{Op: OpCreate, Path: "/d"})
	b.ok(Request{Op: OpCreate, Path: "/c"})
	rel := b.ok(Request{Op: OpSync, Path: "/"}).Zxid
	a.s.Detach()
	// Changed in the opposite order to the lists: child, exist, data.
	zc := b.ok(Request{Op: OpCreate, Path: "/c/k"}).Zxid
	zx := b.ok(Request{Op: OpCreate, Path: "/x"}).Zxid
	zd := b.ok(Request{Op: OpSetData, Path: "/d", Data: []byte("v"), Version: -1}).Zxid
	lists := Watches{RelZxid: rel, Data: []string{"/d"}, Exist: []string{"/x"}, Child: []string{"/c"}}
	byZxid := []Event{{Type: tree.EventNodeChildrenChanged, Path: "/c", Zxid: zc}, {Type: tree.EventNodeCreated, Path: "/x", Zxid: zx}, {Type: tree.EventNodeDataChanged, Path: "/d", Zxid: zd}}
	byList := []Event{byZxid[2], byZxid[1], byZxid[0]}
	check := func(what string, ts *testSession, want []Event) {
		t.Helper()
		for i, w := range want {
			m := ts.next()
			if m.Event == nil || m.Event.Type != w.Type || m.Event.Path != w.Path || m.Event.Zxid != w.Zxid {
				t.Fatalf("%s: message %d is %+v, want %+v", what, i, m, w)
			}
		}
	}

	r := connectTest(t, e, ConnectRequest{SessionID: a.s.ID(), Password: a.connected.Password, Watches: lists})
	check("resume", r, byZxid)
	r.s.Detach()
	r = connectTest(t, e, ConnectRequest{SessionID: a.s.ID(), Password: a.connected.Password})
	lists.ListOrder = true
	r.xid++
	r.s.Submit(&Request{Xid: r.xid, Op: OpSetWatches, Watches: lists})
	check("setWatches in list order", r, byList)
}
