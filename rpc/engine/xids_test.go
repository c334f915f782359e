package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
)

// repeatCluster is a one-server "cluster" that applies what is submitted in
// order, as logCluster does, and now and then logs again the last few
// commands it logged, in order: what a server's proposer does when it sends
// its unconfirmed commands again after a leader change.
type repeatCluster struct {
	logCluster
	rng    *rand.Rand // the applier's only
	recent []*cmdpb.Command
}

func newRepeatCluster(t *testing.T, f *fsm.FSM, seed int64) *repeatCluster {
	c := &repeatCluster{logCluster: logCluster{f: f, wake: make(chan struct{}, 1)}, rng: rand.New(rand.NewSource(seed))}
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
				c.log(cmd)
				c.recent = append(c.recent, cmd)
				if len(c.recent) > 6 {
					c.recent = c.recent[1:]
				}
				if c.rng.Intn(5) == 0 {
					for _, again := range c.recent[c.rng.Intn(len(c.recent)):] {
						c.log(again)
					}
				}
			}
		}
	}()
	return c
}

func (c *repeatCluster) Submit(cmd *cmdpb.Command) { c.logCluster.Submit(cmd) }

// log applies cmd as the next entry.
func (c *repeatCluster) log(cmd *cmdpb.Command) {
	data, err := proto.Marshal(cmd)
	if err != nil {
		panic(err)
	}
	c.index++
	c.f.Apply(&raft.Log{Index: c.index, Term: 1, Type: raft.LogCommand, Data: data})
}

// sent is a request in flight on a connection, and what its reply must be.
type sent struct {
	xid  int64
	name string // its create's unique prefix, "/<name>-"
}

// xidClient is one session's client: ZooKeeper's kind (xids from a
// strategy, never re-sent) or coordd's (xids unique in the session,
// unanswered writes re-sent after a reconnect).
type xidClient struct {
	t       *testing.T
	e       *Engine
	rng     *rand.Rand
	retries bool // coordd's kind
	id      int64
	pw      []byte
	s       *Session
	got     []Message // received on the connection, not yet read
	xid     int64     // the last xid sent on this connection (ZooKeeper's) or session (coordd's)
	inner   []sent    // in flight on the current connection, in order
	next    int       // names handed out
	acked   map[string]string
	unknown map[string]bool // sent, connection dropped before the reply
}

func (c *xidClient) connect() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.e.Connect(ctx, ConnectRequest{SessionID: c.id, Password: c.pw, TimeoutMs: 10000, ClientRetries: c.retries})
	if err != nil {
		c.t.Fatal(err)
	}
	c.s, c.got = s, nil
	m := c.recv()
	if m.Connected == nil {
		c.t.Fatalf("first message %+v", m)
	}
	c.id, c.pw = m.Connected.SessionID, m.Connected.Password
	if !c.retries {
		c.xid = 0 // kazoo's habit: every connection from 1
	}
}

// recv returns the next message of the connection.
func (c *xidClient) recv() Message {
	c.t.Helper()
	for len(c.got) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		batch, ended := c.s.Next(ctx)
		cancel()
		if len(batch) == 0 && ended {
			c.t.Fatal("the connection ended")
		}
		c.got = append(c.got, batch...)
	}
	m := c.got[0]
	c.got = c.got[1:]
	return m
}

// send submits a sequential create of a new name.
func (c *xidClient) send() {
	c.next++
	name := fmt.Sprintf("c%x-%d", c.id, c.next)
	var xid int64
	switch {
	case c.retries:
		c.xid++
		xid = c.xid
	case c.rng.Intn(4) == 0:
		xid = 7 // a client that repeats an xid
	default:
		c.xid++
		xid = c.xid
	}
	c.submit(sent{xid: xid, name: name})
}

func (c *xidClient) submit(q sent) {
	req := &Request{Xid: q.xid, Op: OpCreate, Path: "/" + q.name + "-", Create: Create{Sequential: true}}
	if c.retries && len(c.inner) > 0 {
		req.LowestPendingXid = c.inner[0].xid
	} else if c.retries {
		req.LowestPendingXid = q.xid
	}
	c.inner = append(c.inner, q)
	c.s.Submit(req)
}

// answer reads the reply of the oldest request in flight and checks it is
// that request's.
func (c *xidClient) answer() {
	c.t.Helper()
	for {
		m := c.recv()
		if m.Response == nil {
			continue
		}
		q := c.inner[0]
		c.inner = c.inner[1:]
		r := m.Response
		if r.Xid != q.xid {
			c.t.Fatalf("reply with xid %d, want %d", r.Xid, q.xid)
		}
		if r.Code != OK || !strings.HasPrefix(r.Path, "/"+q.name+"-") {
			c.t.Fatalf("request %s (xid %d) answered %v %q: another request's reply", q.name, q.xid, r.Code, r.Path)
		}
		c.acked[q.name] = r.Path
		delete(c.unknown, q.name)
		return
	}
}

// drop ends the connection with requests in flight, and connects again;
// coordd's kind sends the unanswered ones again, with their xids.
func (c *xidClient) drop() {
	c.s.Detach()
	again := c.inner
	c.inner = nil
	c.connect()
	for _, q := range again {
		if c.retries {
			c.submit(q)
		} else {
			c.unknown[q.name] = true
		}
	}
}

// TestRepliesBelongToTheirRequests: random interleavings of connections,
// xids and re-proposals, for ZooKeeper's kind of client (xids from 1 on
// every connection, repeated, never re-sent) and coordd's (unique xids,
// unanswered writes re-sent after a reconnect), never answer a request with
// another's reply, never apply a write twice, and never lose one that was
// acknowledged.
func TestRepliesBelongToTheirRequests(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			f := fsm.New(fsm.Options{})
			c := newRepeatCluster(t, f, seed)
			e := New(Config{ServerID: "1", FSM: f, Cluster: c, Tick: 100 * time.Millisecond,
				MinSessionTimeout: 200 * time.Millisecond, MaxSessionTimeout: 10 * time.Second})
			f.SetObserver(e)
			c.Submit(&cmdpb.Command{Cmd: &cmdpb.Command_SetLevel{SetLevel: &cmdpb.SetLevel{Level: fsm.Level}}})
			rng := rand.New(rand.NewSource(seed))
			var clients []*xidClient
			for i := 0; i < 4; i++ {
				cl := &xidClient{t: t, e: e, rng: rng, retries: i%2 == 1, acked: map[string]string{}, unknown: map[string]bool{}}
				cl.connect()
				clients = append(clients, cl)
			}
			for step := 0; step < 400; step++ {
				cl := clients[rng.Intn(len(clients))]
				switch k := rng.Intn(10); {
				case k < 5:
					cl.send()
				case k < 9 && len(cl.inner) > 0:
					cl.answer()
				case k == 9:
					cl.drop()
				}
			}
			for _, cl := range clients {
				for len(cl.inner) > 0 {
					cl.answer()
				}
			}
			counts := map[string][]string{}
			f.Read(func(v fsm.View) {
				kids, _, err := v.Tree.Children("/")
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range kids {
					if i := strings.LastIndexByte(k, '-'); i > 0 {
						counts[k[:i]] = append(counts[k[:i]], "/"+k)
					}
				}
			})
			total := 0
			for _, cl := range clients {
				for name, p := range cl.acked {
					total++
					if got := counts[name]; len(got) != 1 || got[0] != p {
						t.Errorf("acknowledged %s (%s): the tree holds %v", name, p, got)
					}
				}
				for name := range cl.unknown {
					if got := counts[name]; len(got) > 1 {
						t.Errorf("%s, whose connection dropped, applied %d times", name, len(got))
					}
				}
			}
			for name, got := range counts {
				if len(got) > 1 {
					t.Errorf("%s applied %d times: %v", name, len(got), got)
				}
			}
			if total < 100 {
				t.Fatalf("only %d writes acknowledged: the test exercised little", total)
			}
		})
	}
}

// countingHandler counts the log records whose message is msg.
type countingHandler struct {
	slog.Handler
	msg string
	n   *atomic.Int32
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }

// TestRefusalLoggedOnce: a request the state machine refuses for who sent
// it (here coordd's client reusing an xid for another request) is answered
// with the error and logged at info, once per session and code, so that an
// operator finds why a client's writes fail without a log line per write.
func TestRefusalLoggedOnce(t *testing.T) {
	f := fsm.New(fsm.Options{})
	c := newLogCluster(t, f)
	var n atomic.Int32
	e := New(Config{ServerID: "1", FSM: f, Cluster: c, Tick: 100 * time.Millisecond,
		MinSessionTimeout: 200 * time.Millisecond, MaxSessionTimeout: 10 * time.Second,
		Logger: slog.New(countingHandler{msg: "a request was refused", n: &n})})
	f.SetObserver(e)
	c.Submit(&cmdpb.Command{Cmd: &cmdpb.Command_SetLevel{SetLevel: &cmdpb.SetLevel{Level: fsm.Level}}})
	ts := connectTest(t, e, ConnectRequest{ClientRetries: true})
	ts.ok(Request{Op: OpCreate, Path: "/a"})
	for i := 0; i < 3; i++ {
		ts.xid = 0 // the same xid again, for another request
		r, _ := ts.do(Request{Op: OpCreate, Path: fmt.Sprintf("/b%d", i)})
		if r.Code != BadArguments || r.Path != "" {
			t.Fatalf("a reused xid for another request: %v %q %s", r.Code, r.Path, r.Message)
		}
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("the refusal was logged %d times, want once", got)
	}
}

// TestResumeAfterAnAbandonedAttempt: a client that gave up on a slow
// server left its resume behind there; it applies just before the resume
// of the client's next attempt, with the same epoch. The next attempt's
// resume is stale, and the connect proposes again above it instead of
// failing: the client gets its session, and its writes apply.
func TestResumeAfterAnAbandonedAttempt(t *testing.T) {
	e, c := testEngine(t)
	c.Submit(&cmdpb.Command{Cmd: &cmdpb.Command_SetLevel{SetLevel: &cmdpb.SetLevel{Level: fsm.Level}}})
	first := connectTest(t, e, ConnectRequest{})
	id, pw := first.connected.SessionID, first.connected.Password
	first.s.Detach()
	for round := 0; round < 20; round++ {
		var cur int64
		e.cfg.FSM.Read(func(v fsm.View) { cur, _ = v.Sessions.Epoch(id) })
		// The abandoned attempt's resume, with the epoch the next one
		// will propose too.
		c.Submit(&cmdpb.Command{Cmd: &cmdpb.Command_ResumeSession{ResumeSession: &cmdpb.ResumeSession{SessionId: id, Server: "1", Epoch: cur + 1}}})
		ts := connectTest(t, e, ConnectRequest{SessionID: id, Password: pw})
		ts.ok(Request{Op: OpCreate, Path: fmt.Sprintf("/r%d", round)})
		ts.s.Detach()
	}
}
