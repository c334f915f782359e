package rpc

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/test/cluster/freeport"
)

// freeAddr returns a free 127.0.0.1 address, never the same twice in the
// test process (two picks for one cluster that were the same port made its
// bootstrap fail: "found duplicate address in configuration").
func freeAddr(t testing.TB) string { return freeport.Addr(t) }

// testConfig is a server's configuration for a test. With COORDD_TEST_LOG
// set in the environment, the server logs (level info) to t.Log, which
// shows only when the test fails or runs with -v.
//
// Raft's timeouts outlast the stalls of a loaded 2-core host: with the
// race detector and other test binaries running, a whole test process
// stops for 150-350 ms at times. A leader steps down when it has not heard
// from a majority for its lease, and a follower that has not heard from
// the leader for the heartbeat timeout calls an election; with 300 ms
// timeouts and a 150 ms lease such a stall cost the leader its term, and a
// test that needed a leader for a few seconds failed (a third of the runs
// of the package, four at once under load). The lease is as long as Raft
// allows; coordd's reads never rely on it (a read index asks a majority).
func testConfig(t testing.TB, id string) Config {
	c := Config{
		ID: id, DataDir: t.TempDir(), ClientAddr: freeAddr(t), PeerAddr: freeAddr(t),
		Tick: 100 * time.Millisecond, HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
	}
	if os.Getenv("COORDD_TEST_LOG") != "" {
		w := &testLogWriter{t: t}
		// Registered before the server's own cleanup, so run after it:
		// lines logged later (a transport shutting down) are dropped, as
		// t.Log panics once the test has completed.
		t.Cleanup(w.stop)
		c.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})).With("server", id)
	}
	return c
}

// testLogWriter writes each log line to t.Log until stopped.
type testLogWriter struct {
	t       testing.TB
	mu      sync.Mutex
	stopped bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

// followersOf returns nodes without leader, in their order.
func followersOf(nodes []*Node, leader *Node) []*Node {
	var out []*Node
	for _, n := range nodes {
		if n != leader {
			out = append(out, n)
		}
	}
	return out
}

func waitLeader(t testing.TB, nodes ...*Node) *Node {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.IsLeader() {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader elected")
	return nil
}

type rawSession struct {
	t      testing.TB
	stream apipb.Coord_SessionClient
	xid    int64
	cc     *grpc.ClientConn
	events []*apipb.WatchEvent // received by do while waiting for a reply
	ended  error               // how the stream ended, once it has
}

func dialRaw(t testing.TB, addr string, connect *apipb.ConnectRequest) (*rawSession, *apipb.ServerMessage) {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	stream, err := apipb.NewCoordClient(cc).Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	msg := &apipb.ClientMessage{}
	if connect != nil {
		msg.Kind = &apipb.ClientMessage_Connect{Connect: connect}
	}
	if err := stream.Send(msg); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return &rawSession{t: t, stream: stream, cc: cc}, first
}

func (s *rawSession) do(req *apipb.Request) *apipb.Response {
	s.t.Helper()
	s.xid++
	req.Xid = s.xid
	if err := s.stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: req}}); err != nil {
		s.t.Fatal(err)
	}
	for {
		m, err := s.stream.Recv()
		if err != nil {
			s.t.Fatal(err)
		}
		if e := m.GetEvent(); e != nil {
			s.events = append(s.events, e)
		}
		if r := m.GetResponse(); r != nil {
			if r.Xid != req.Xid {
				s.t.Fatalf("reply xid %d, want %d", r.Xid, req.Xid)
			}
			return r
		}
	}
}

func TestSmokeSingleNode(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	s, first := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 2000})
	if first.GetConnected() == nil {
		t.Fatalf("connect: %v", first)
	}
	r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/a", Data: []byte("x")}}})
	if r.Error != apipb.ErrorCode_OK || r.GetCreate().Path != "/a" {
		t.Fatalf("create: %v", r)
	}
	r = s.do(&apipb.Request{Op: &apipb.Request_GetData{GetData: &apipb.GetDataRequest{Path: "/a"}}})
	if string(r.GetGetData().Data) != "x" {
		t.Fatalf("get: %v", r)
	}
	r = s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/a"}}})
	if r.Error != apipb.ErrorCode_NODE_EXISTS {
		t.Fatalf("create dup: %v", r)
	}
	r = s.do(&apipb.Request{Op: &apipb.Request_Sync{Sync: &apipb.SyncRequest{Path: "/"}}})
	if r.Error != apipb.ErrorCode_OK {
		t.Fatalf("sync: %v", r)
	}
}

func TestSmokeThreeNodes(t *testing.T) {
	nodes, leader := threeNodes(t)
	var follower *Node
	for _, n := range nodes {
		if n != leader {
			follower = n
		}
	}
	s, first := dialRaw(t, follower.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 2000})
	if first.GetConnected() == nil {
		t.Fatalf("connect: %v", first)
	}
	for i := 0; i < 20; i++ {
		r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/q-", Sequential: true}}})
		if r.Error != apipb.ErrorCode_OK {
			t.Fatalf("create: %v", r)
		}
	}
	r := s.do(&apipb.Request{Op: &apipb.Request_GetChildren{GetChildren: &apipb.GetChildrenRequest{Path: "/"}}})
	// The 20 nodes and ZooKeeper's /zookeeper, which every server has.
	if got := r.GetGetChildren().Children; len(got) != 21 || got[20] != "zookeeper" || r.GetGetChildren().Stat.NumChildren != 21 {
		t.Fatalf("children: %v", r)
	}
	r = s.do(&apipb.Request{Op: &apipb.Request_Sync{Sync: &apipb.SyncRequest{Path: "/"}}})
	if r.Error != apipb.ErrorCode_OK {
		t.Fatalf("sync: %v", r)
	}
	st, err := apipb.NewCoordClient(s.cc).Status(context.Background(), &apipb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 3 || st.Leader != leader.ID() {
		t.Fatalf("status: %v", st)
	}
	for _, m := range st.Members {
		if m.Role == "unreachable" || m.ClientAddress == "" {
			t.Fatalf("status member: %v", m)
		}
	}
}

// threeNodes starts a 3-node cluster and returns its nodes and leader;
// each edit, if any, changes every server's Config.
func threeNodes(t *testing.T, edits ...func(*Config)) ([]*Node, *Node) {
	t.Helper()
	var nodes []*Node
	startOver(t, func() error {
		cfgs := []Config{testConfig(t, "1"), testConfig(t, "2"), testConfig(t, "3")}
		for i := range cfgs {
			for _, e := range edits {
				e(&cfgs[i])
			}
		}
		var peers []Peer
		for _, c := range cfgs {
			peers = append(peers, Peer{ID: c.ID, Addr: c.PeerAddr})
		}
		nodes = nil
		for _, c := range cfgs {
			c.Peers = peers
			n, err := NewNode(c)
			if err != nil {
				for _, n := range nodes {
					n.Close()
				}
				return err
			}
			t.Cleanup(func() { n.Close() })
			nodes = append(nodes, n)
		}
		return nil
	})
	return nodes, waitAgreedLeader(t, nodes...)
}

// waitAgreedLeader waits until one of nodes leads and every one of them
// knows it, and returns it. A follower that has not heard from a leader
// elected after a slow first election refuses clients ("has no leader"),
// so a test that goes to a follower at once must wait for this, not only
// for a leader.
func waitAgreedLeader(t *testing.T, nodes ...*Node) *Node {
	t.Helper()
	var leader *Node
	waitFor(t, func() bool {
		leader = nil
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range nodes {
			if _, id := n.raft.LeaderWithID(); string(id) != leader.ID() {
				return false
			}
		}
		return true
	})
	return leader
}

// newTestNode starts one server on the config testConfig makes.
func newTestNode(t testing.TB, id string) *Node {
	t.Helper()
	return newTestNodeWith(t, id)
}

// newTestNodeWith starts one server on the config testConfig makes, as
// changed by edits.
func newTestNodeWith(t testing.TB, id string, edits ...func(*Config)) *Node {
	t.Helper()
	var n *Node
	startOver(t, func() (err error) {
		c := testConfig(t, id)
		for _, e := range edits {
			e(&c)
		}
		n, err = NewNode(c)
		return err
	})
	t.Cleanup(func() { n.Close() })
	return n
}

// startOver runs start, which picks its addresses with freeAddr, again
// when one of them was taken in between (by another test's connection),
// up to 5 times in all.
func startOver(t testing.TB, start func() error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := start()
		if err == nil {
			return
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			t.Fatal(err)
		}
	}
}

// TestFollowersLearnCommitsAtOnce: the leader pushes each new commit index
// to the followers (rpc/third_party/raft). With Raft's own fallback, CommitTimeout,
// set to an hour, a write on the leader still reaches both followers' state
// machines, and a write made through a follower (which answers only once it
// has applied the write) is still answered, with no later entry to carry the
// commit index.
func TestFollowersLearnCommitsAtOnce(t *testing.T) {
	// Sessions that outlive the test: an expiry would be an entry too.
	nodes, leader := threeNodes(t, func(c *Config) { c.commitTimeout, c.MaxSessionTimeout = time.Hour, time.Hour })
	var followers []*Node
	for _, n := range nodes {
		if n != leader {
			followers = append(followers, n)
		}
	}
	onLeader, first := dialRaw(t, leader.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 3600000})
	if first.GetConnected() == nil {
		t.Fatalf("connect: %v", first)
	}
	r := onLeader.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/on-leader"}}})
	if r.Error != apipb.ErrorCode_OK {
		t.Fatalf("create: %v", r)
	}
	waitFor(t, func() bool {
		return followers[0].fsm.AppliedIndex() >= r.Zxid && followers[1].fsm.AppliedIndex() >= r.Zxid
	})

	onFollower, first := dialRaw(t, followers[0].ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 3600000})
	if first.GetConnected() == nil {
		t.Fatalf("connect: %v", first)
	}
	req := &apipb.Request{Xid: 1, Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/on-follower"}}}
	if err := onFollower.stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: req}}); err != nil {
		t.Fatal(err)
	}
	type reply struct {
		m   *apipb.ServerMessage
		err error
	}
	done := make(chan reply, 1)
	go func() {
		m, err := onFollower.stream.Recv()
		done <- reply{m, err}
	}()
	select {
	case got := <-done:
		if got.err != nil || got.m.GetResponse().GetError() != apipb.ErrorCode_OK || got.m.GetResponse().GetXid() != 1 {
			t.Fatalf("create through a follower: %v, %v", got.m, got.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write through a follower was not answered within 10s")
	}
}

// TestRoutineRaftLogsAreNotWarnings: a cluster's first election is normal
// operation and logs nothing at the default level (warn).
func TestRoutineRaftLogsAreNotWarnings(t *testing.T) {
	var buf syncBuffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})
	n := newTestNodeWith(t, "1", func(c *Config) { c.Logger = slog.New(h) })
	waitLeader(t, n)
	waitFor(t, n.LeaderReady)
	if out := buf.String(); out != "" {
		t.Fatalf("a single server's start logged at warn or above:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServesOnceItHasALeader: a server whose first election took longer
// than the leaderless limit serves clients as soon as it knows its leader,
// not only once watchQuorum's next tick has noticed (a client that
// connected in between was refused with "has no leader").
func TestServesOnceItHasALeader(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	n.leaderSeen.Lock()
	n.leaderlessSince = time.Now().Add(-time.Hour) // as after a slow first election
	n.leaderSeen.Unlock()
	if ok, why := n.serving(); !ok {
		t.Fatalf("a server with a leader refuses clients: %s", why)
	}
	s, first := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 2000})
	if first.GetConnected() == nil {
		t.Fatalf("connect: %v", first)
	}
	if r := s.do(&apipb.Request{Op: &apipb.Request_Ping{Ping: &apipb.PingRequest{}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatal(r)
	}
}
