package rpc

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/peerpb"
)

func singleNode(t testing.TB) *Node {
	t.Helper()
	n := newTestNode(t, "1")
	waitLeader(t, n)
	return n
}

func newSession(t testing.TB, n *Node) *rawSession {
	t.Helper()
	s, first := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 4000})
	if first.GetConnected() == nil {
		t.Fatalf("connect: %v", first)
	}
	return s
}

// healthy asserts the server still serves a fresh session.
func healthy(t *testing.T, n *Node) {
	t.Helper()
	s := newSession(t, n)
	if r := s.do(&apipb.Request{Op: &apipb.Request_Ping{Ping: &apipb.PingRequest{}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("ping after abuse: %v", r)
	}
}

// TestGarbageOnPorts: bytes that are not gRPC (or not our peer protocol)
// are dropped without harm.
func TestGarbageOnPorts(t *testing.T) {
	n := singleNode(t)
	junk := [][]byte{
		[]byte("GET / HTTP/1.1\r\n\r\n"),
		bytes.Repeat([]byte{0xff}, 4096),
		{tagRaft, 0x00, 0xff, 0xff, 0xff, 0xff},
		{tagPeer, 'P', 'R', 'I', 0, 0, 0},
		{'Z'},
		{},
	}
	for _, addr := range []string{n.ClientAddr(), n.cfg.PeerAddr} {
		for _, j := range junk {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write(j)
			_ = c.Close()
		}
	}
	healthy(t, n)
}

// TestBadSessionMessages: protocol violations get an error reply or a
// closed stream, and bad requests an error reply, never a panic.
func TestBadSessionMessages(t *testing.T) {
	n := singleNode(t)

	// A request before connect.
	s, first := dialRaw(t, n.ClientAddr(), nil)
	_ = s
	if r := first.GetResponse(); r == nil || r.Error != apipb.ErrorCode_MARSHALLING_ERROR {
		t.Fatalf("connect with an empty message: %v", first)
	}

	// Resuming an unknown session, or with a wrong password.
	_, first = dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{SessionId: 12345, Password: []byte("x")})
	if r := first.GetResponse(); r == nil || r.Error != apipb.ErrorCode_SESSION_EXPIRED {
		t.Fatalf("unknown session: %v", first)
	}
	good := newSession(t, n)
	var id int64
	good.do(&apipb.Request{Op: &apipb.Request_Ping{Ping: &apipb.PingRequest{}}})
	n.fsm.Read(func(v fsm.View) { id = v.Sessions.List()[0].ID })
	_, first = dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{SessionId: id, Password: []byte("wrong")})
	if r := first.GetResponse(); r == nil || r.Error != apipb.ErrorCode_AUTH_FAILED {
		t.Fatalf("wrong password: %v", first)
	}

	// Requests that are wrong but well-formed: an error reply each, and the
	// session goes on.
	for _, tc := range []struct {
		name string
		req  *apipb.Request
		want apipb.ErrorCode
	}{
		{"no op", &apipb.Request{}, apipb.ErrorCode_BAD_ARGUMENTS},
		{"bad path read", &apipb.Request{Op: &apipb.Request_GetData{GetData: &apipb.GetDataRequest{Path: "no-slash"}}}, apipb.ErrorCode_BAD_ARGUMENTS},
		{"bad path write", &apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/a/../b"}}}, apipb.ErrorCode_BAD_ARGUMENTS},
		{"oversize data", &apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/big", Data: make([]byte, 1<<20+1)}}}, apipb.ErrorCode_BAD_ARGUMENTS},
		{"empty multi op", &apipb.Request{Op: &apipb.Request_Multi{Multi: &apipb.MultiRequest{Ops: []*apipb.MultiOp{{}}}}}, apipb.ErrorCode_BAD_ARGUMENTS},
		{"bad kind", &apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/k", Kind: 42}}}, apipb.ErrorCode_BAD_ARGUMENTS},
		{"no watcher", &apipb.Request{Op: &apipb.Request_RemoveWatches{RemoveWatches: &apipb.RemoveWatchesRequest{Path: "/"}}}, apipb.ErrorCode_NO_WATCHER},
	} {
		if r := good.do(tc.req); r.Error != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, r, tc.want)
		}
	}
	if r := good.do(&apipb.Request{Op: &apipb.Request_Exists{Exists: &apipb.ExistsRequest{Path: "/big"}}}); r.GetExists().GetStat() != nil {
		t.Fatalf("oversize create left a node: %v", r)
	}

	// A non-increasing xid ends the session stream with an error.
	good.xid = 0
	good.xid-- // the next request reuses xid 0
	if err := good.stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: &apipb.Request{Xid: 1, Op: &apipb.Request_Ping{Ping: &apipb.PingRequest{}}}}}); err != nil {
		t.Fatal(err)
	}
	sawError := false
	for {
		m, err := good.stream.Recv()
		if err != nil {
			break
		}
		if r := m.GetResponse(); r != nil && r.Error == apipb.ErrorCode_MARSHALLING_ERROR {
			sawError = true
		}
	}
	if !sawError {
		t.Fatal("a repeated xid was not answered with an error")
	}

	// A message over the port's gRPC limit closes the stream (the Go client
	// refuses to send one: TestOversizeWriteFailsAlone in test/cluster).
	big := newSession(t, n)
	_ = big.stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: &apipb.Request{Xid: 1,
		Op: &apipb.Request_SetData{SetData: &apipb.SetDataRequest{Path: "/", Data: make([]byte, minWireLimit+1)}}}}})
	if _, err := big.stream.Recv(); err == nil {
		t.Fatal("an over-limit message got a reply instead of a closed stream")
	}
	healthy(t, n)
}

// dialPeerService connects to n's peer API as another server would.
func dialPeerService(t *testing.T, n *Node) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+n.cfg.PeerAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return n.mux.dialTagged(ctx, addr, tagPeer)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestForwardRejectsForbiddenCommands: a peer cannot make the leader
// propose commands only the leader may make, or garbage.
func TestForwardRejectsForbiddenCommands(t *testing.T) {
	n := singleNode(t)
	cc := dialPeerService(t, n)
	// Wait for the leader's own term-start entry, so the index is quiet.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n.LeaderReady() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("leader never became active")
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := n.fsm.AppliedIndex()
	noop, _ := proto.Marshal(&cmdpb.Command{Cmd: &cmdpb.Command_Reap{Reap: &cmdpb.Reap{Paths: []string{"/"}}}})
	for _, payload := range [][]byte{{0xff, 0xff}, noop} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		stream, err := peerpb.NewPeerClient(cc).Forward(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&peerpb.ForwardRequest{Seq: 1, Command: payload}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		cancel()
		if err != nil || resp.Error == "" {
			t.Fatalf("forbidden forward accepted: %v %v", resp, err)
		}
	}
	if n.fsm.AppliedIndex() != before {
		t.Fatal("a rejected forward reached the log")
	}
	healthy(t, n)
}

// TestForwardConfirmsBeforeRejecting: when a forward stream ends with a
// rejected command, the commands before it are confirmed first, and the
// rejection comes last.
func TestForwardConfirmsBeforeRejecting(t *testing.T) {
	n := singleNode(t)
	cc := dialPeerService(t, n)
	waitFor(t, n.LeaderReady)
	// A delete for a session that does not exist: it commits (and the
	// state machine answers "session expired").
	ok, _ := proto.Marshal(&cmdpb.Command{Cmd: &cmdpb.Command_Write{Write: &cmdpb.Write{SessionId: 42, Xid: 1,
		Op: &cmdpb.Write_Delete{Delete: &cmdpb.Delete{Path: "/a", Version: -1}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := peerpb.NewPeerClient(cc).Forward(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq, payload := range [][]byte{ok, {0xff, 0xff}} {
		if err := stream.Send(&peerpb.ForwardRequest{Seq: uint64(seq + 1), Command: payload}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := stream.Recv()
	if err != nil || first.Seq != 1 || first.Error != "" || first.Index == 0 {
		t.Fatalf("first reply %v (%v), want the confirmation of seq 1", first, err)
	}
	second, err := stream.Recv()
	if err != nil || second.Seq != 2 || second.Error == "" {
		t.Fatalf("second reply %v (%v), want the rejection of seq 2", second, err)
	}
}

// FuzzSessionRequest: any decodable request gets a reply or a closed
// stream, and the server keeps serving.
func FuzzSessionRequest(f *testing.F) {
	for _, r := range []*apipb.Request{
		{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/a", Data: []byte("x"), Kind: apipb.NodeKind_CONTAINER, Sequential: true}}},
		{Op: &apipb.Request_Multi{Multi: &apipb.MultiRequest{Ops: []*apipb.MultiOp{{Op: &apipb.MultiOp_Check{Check: &apipb.CheckRequest{Path: "/", Version: 3}}}}}}},
		{Op: &apipb.Request_GetChildren{GetChildren: &apipb.GetChildrenRequest{Path: "/", Watch: true}}},
		{Op: &apipb.Request_Sync{Sync: &apipb.SyncRequest{Path: "//"}}},
	} {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	n := singleNode(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &apipb.Request{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		s := newSession(t, n)
		req.Xid = 1
		if err := s.stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: req}}); err != nil {
			return
		}
		for {
			m, err := s.stream.Recv()
			if err != nil || m.GetResponse() != nil {
				break
			}
		}
		healthy(t, n)
	})
}

// TestServerBehindClientRefuses: a server whose state is older than the
// client's last zxid does not serve the session (single system image).
func TestServerBehindClientRefuses(t *testing.T) {
	// A session that outlives the test: the refused resume waits
	// ConnectWait (2 s), as long as testConfig's longest session, and no
	// ping keeps it alive meanwhile.
	n := newTestNodeWith(t, "1", func(c *Config) { c.MaxSessionTimeout = time.Hour })
	waitLeader(t, n)
	s, first := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 3600000})
	if first.GetConnected() == nil {
		t.Fatalf("connect: %v", first)
	}
	s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/a"}}})
	var id int64
	var pw []byte
	n.fsm.Read(func(v fsm.View) {
		in := v.Sessions.List()[0]
		id, pw = in.ID, in.Password
	})
	ahead := n.fsm.AppliedIndex() + 1000
	start := time.Now()
	_, first = dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{SessionId: id, Password: pw, LastZxid: ahead})
	if r := first.GetResponse(); r == nil || r.Error != apipb.ErrorCode_UNAVAILABLE {
		t.Fatalf("resume with a zxid from the future: %v", first)
	}
	if waited := time.Since(start); waited < engine.ConnectWait/2 {
		t.Fatalf("refused after %v without waiting to catch up", waited)
	}
	// At or below the server's zxid the session resumes.
	_, first = dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{SessionId: id, Password: pw, LastZxid: n.fsm.AppliedIndex()})
	if first.GetConnected() == nil {
		t.Fatalf("resume at the server's zxid: %v", first)
	}
}

// TestStampSetsTime: stamping the encoded command is setting its time.
func TestStampSetsTime(t *testing.T) {
	cmd := &cmdpb.Command{Cmd: &cmdpb.Command_Noop{Noop: &cmdpb.Noop{LeaderId: "x"}}}
	data, _ := proto.Marshal(cmd)
	before := time.Now().UnixMilli()
	got := &cmdpb.Command{}
	if err := proto.Unmarshal(stamp(data), got); err != nil {
		t.Fatal(err)
	}
	if got.TimeMs < before || got.GetNoop().GetLeaderId() != "x" {
		t.Fatalf("stamped command: %v", got)
	}
}

// smallLimitsNode starts a single-node cluster whose requests carry at most
// 65 KB (1 KB of data), and whose client port's wire limit is wire (0: the
// default).
func smallLimitsNode(t *testing.T, wire int) *Node {
	t.Helper()
	var n *Node
	startOver(t, func() (err error) {
		cfg := testConfig(t, "1")
		cfg.MaxDataSize = 1 << 10
		cfg.wire = wire
		n, err = NewNode(cfg)
		return err
	})
	t.Cleanup(func() { n.Close() })
	waitLeader(t, n)
	return n
}

// TestLargeReplies: a getChildren listing larger than any request may be is
// served whole, up to the bound on a reply; over it the read gets an error,
// registers no watch, and the session goes on on the same stream.
func TestLargeReplies(t *testing.T) {
	n := smallLimitsNode(t, 256<<10)
	s := newSession(t, n)
	create := func(path string) *apipb.MultiOp {
		return &apipb.MultiOp{Op: &apipb.MultiOp_Create{Create: &apipb.CreateRequest{Path: path}}}
	}
	addChildren := func(from, to int) {
		t.Helper()
		for i := from; i < to; i += 200 {
			m := &apipb.MultiRequest{}
			for j := i; j < min(i+200, to); j++ {
				m.Ops = append(m.Ops, create(fmt.Sprintf("/big/%s-%04d", strings.Repeat("x", 200), j)))
			}
			if r := s.do(&apipb.Request{Op: &apipb.Request_Multi{Multi: m}}); r.Error != apipb.ErrorCode_OK {
				t.Fatalf("multi create: %v", r)
			}
		}
	}
	list := func(watch bool) *apipb.Response {
		return s.do(&apipb.Request{Op: &apipb.Request_GetChildren{GetChildren: &apipb.GetChildrenRequest{Path: "/big", Watch: watch}}})
	}
	if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/big"}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("create /big: %v", r)
	}

	addChildren(0, 1000) // 1 000 names of 205 bytes: 205 KB
	r := list(false)
	if r.Error != apipb.ErrorCode_OK || len(r.GetGetChildren().GetChildren()) != 1000 {
		t.Fatalf("listing 1 000 children (205 KB, more than a request may carry): error %v %q, %d names", r.Error, r.Message, len(r.GetGetChildren().GetChildren()))
	}

	addChildren(1000, 1300) // 267 KB: over the bound
	r = list(true)
	if r.Error != apipb.ErrorCode_MARSHALLING_ERROR || !strings.Contains(r.Message, "reply too large") {
		t.Fatalf("listing 1 300 children (267 KB, over the 256 KB bound): %v %q, want MARSHALLING_ERROR, reply too large", r.Error, r.Message)
	}
	// The failed read set no watch: a new child fires nothing, and the
	// create's reply is the next message on the stream.
	if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/big/one-more"}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("create after the oversize read: %v", r)
	}
	if got := s.events; len(got) != 0 {
		t.Fatalf("events after an oversize read with a watch: %v", got)
	}
	if r := s.do(&apipb.Request{Op: &apipb.Request_Ping{Ping: &apipb.PingRequest{}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("ping after the oversize read: %v", r)
	}
}

// TestOversizeRequests: a write larger than a request may be (its data, or a
// multi's ops together) gets BAD_ARGUMENTS, changes nothing, and the session
// goes on on the same stream: the port receives messages up to its wire
// limit so that it can answer them.
func TestOversizeRequests(t *testing.T) {
	n := smallLimitsNode(t, 0)
	s := newSession(t, n)
	creates := &apipb.MultiRequest{}
	for i := range 100 { // 100 KB in all, each op's data within the limit
		creates.Ops = append(creates.Ops, &apipb.MultiOp{Op: &apipb.MultiOp_Create{Create: &apipb.CreateRequest{
			Path: fmt.Sprintf("/m%d", i), Data: make([]byte, 1000)}}})
	}
	for _, tc := range []struct {
		name, want string
		req        *apipb.Request
	}{
		{"data of 100 KB", "data length 102400 exceeds the limit of 1024 bytes",
			&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/m0", Data: make([]byte, 100<<10)}}}},
		{"multi of 100 KB", "exceeds the limit of 66560 bytes", &apipb.Request{Op: &apipb.Request_Multi{Multi: creates}}},
	} {
		r := s.do(tc.req)
		if r.Error != apipb.ErrorCode_BAD_ARGUMENTS || !strings.Contains(r.Message, tc.want) {
			t.Errorf("%s: %v %q, want BAD_ARGUMENTS and %q", tc.name, r.Error, r.Message, tc.want)
		}
	}
	r := s.do(&apipb.Request{Op: &apipb.Request_Exists{Exists: &apipb.ExistsRequest{Path: "/m0"}}})
	if r.Error != apipb.ErrorCode_OK || r.GetExists().GetStat() != nil {
		t.Fatalf("/m0 after the refused writes: %v", r)
	}
}
