package jute_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/rpc/zk/jute"
)

// The proof that the encoding is right: a real ZooKeeper client,
// go-zookeeper, talks to a tiny server built from this package alone. The
// server checks that it decodes exactly what the client sent; the client
// checks that it decodes exactly what the server answered: connect,
// create/createContainer/createTTL, getData with a watch and its
// notification, setData, exists, getChildren2, getACL/setACL, sync, auth,
// reconfig, multi (failing and not), delete, pings, a reconnect that
// resumes the session, and close.

// seen is one message the fake server decoded.
type seen struct {
	hdr jute.RequestHeader // zero for a ConnectRequest
	req jute.Record
}

// reply is how the fake server answers a request.
type reply struct {
	before []jute.WatcherEvent // notifications sent ahead of the reply
	err    jute.Code
	body   jute.Encoder
}

type fakeServer struct {
	t       *testing.T
	ln      net.Listener
	connect func(*jute.ConnectRequest) jute.ConnectResponse
	handle  func(jute.RequestHeader, jute.Record) reply
	seen    chan seen     // every decoded message but pings
	pings   chan struct{} // one per ping answered
	wg      sync.WaitGroup

	mu        sync.Mutex
	zxid      int64 // the zxid of the last message sent
	lastReply int64 // the zxid of the last ordinary reply
	conns     []net.Conn
}

func startFakeServer(t *testing.T) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{
		t: t, ln: ln, zxid: 0x500000000,
		seen:  make(chan seen, 64),
		pings: make(chan struct{}, 1024),
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.dropConnections()
		s.wg.Wait()
	})
	return s
}

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			if err := s.serve(c); err != nil {
				s.t.Errorf("fake server: %v", err)
			}
		}()
	}
}

func (s *fakeServer) dropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

func (s *fakeServer) nextZxid() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zxid++
	return s.zxid
}

// serve runs one connection; it returns nil when the client or the test
// closes it, an error for anything the codec could not read.
func (s *fakeServer) serve(c net.Conn) error {
	br := bufio.NewReader(c)
	first, err := br.Peek(4)
	if err != nil {
		return nil
	}
	if p := jute.Classify([4]byte(first)); p != jute.PrefaceJute {
		return fmt.Errorf("first bytes % x classify as %v", first, p)
	}
	frame, err := jute.ReadFrame(br, jute.DefaultMaxBuffer)
	if err != nil {
		return fmt.Errorf("connect frame: %w", err)
	}
	var creq jute.ConnectRequest
	if err := jute.Unmarshal(frame, &creq); err != nil {
		return err
	}
	s.seen <- seen{req: &creq}
	cresp := s.connect(&creq)
	if _, err := c.Write(jute.AppendFrame(nil, &cresp)); err != nil {
		return nil
	}
	for {
		frame, err := jute.ReadFrame(br, jute.DefaultMaxBuffer)
		if err != nil {
			return nil // the client went away, or the test dropped the connection
		}
		var hdr jute.RequestHeader
		if err := jute.Unmarshal(frame, &hdr); err != nil {
			return err
		}
		req, err := jute.DecodeRequest(hdr.Type, frame[jute.RequestHeaderSize:])
		if err != nil {
			return err
		}
		if hdr.Type == jute.OpPing {
			if hdr.Xid != jute.XidPing {
				return fmt.Errorf("ping with xid %d", hdr.Xid)
			}
			s.mu.Lock()
			z := s.zxid
			s.mu.Unlock()
			if _, err := c.Write(jute.AppendFrame(nil, &jute.ReplyHeader{Xid: jute.XidPing, Zxid: z})); err != nil {
				return nil
			}
			s.pings <- struct{}{}
			continue
		}
		s.seen <- seen{hdr: hdr, req: req}
		rep := s.handle(hdr, req)
		var out []byte
		for _, ev := range rep.before {
			out = jute.AppendFrame(out, &jute.ReplyHeader{Xid: jute.XidNotification, Zxid: s.nextZxid()}, &ev)
		}
		z := s.nextZxid()
		s.mu.Lock()
		s.lastReply = z
		s.mu.Unlock()
		h := jute.ReplyHeader{Xid: hdr.Xid, Zxid: z, Err: rep.err}
		if rep.err == jute.CodeOK {
			out = jute.AppendFrame(out, &h, rep.body)
		} else {
			out = jute.AppendFrame(out, &h)
		}
		if _, err := c.Write(out); err != nil {
			return nil
		}
		if hdr.Type == jute.OpCloseSession {
			return nil
		}
	}
}

// expect takes the next message the server decoded and checks it.
func (s *fakeServer) expect(t *testing.T, op jute.OpCode, want jute.Record) jute.RequestHeader {
	t.Helper()
	select {
	case got := <-s.seen:
		if got.hdr.Type != op {
			t.Fatalf("server decoded a %v request %+v, want %v", got.hdr.Type, got.req, op)
		}
		if op != 0 && got.hdr.Xid <= 0 {
			t.Errorf("%v request with xid %d", op, got.hdr.Xid)
		}
		if !reflect.DeepEqual(got.req, want) {
			t.Fatalf("server decoded %v request\n %#v\nwant %#v", op, got.req, want)
		}
		return got.hdr
	case <-time.After(10 * time.Second):
		t.Fatalf("no %v request reached the server", op)
	}
	return jute.RequestHeader{}
}

func zkStat(s jute.Stat) *zk.Stat {
	return &zk.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength,
		NumChildren: s.NumChildren, Pzxid: s.Pzxid,
	}
}

// stat returns a Stat with a different value in every field.
func stat(seed int64) jute.Stat {
	return jute.Stat{
		Czxid: seed + 1, Mzxid: seed + 2, Ctime: seed + 3, Mtime: seed + 4,
		Version: int32(seed + 5), Cversion: int32(seed + 6), Aversion: int32(seed + 7),
		EphemeralOwner: seed + 8, DataLength: int32(seed + 9), NumChildren: int32(seed + 10),
		Pzxid: seed + 11,
	}
}

type bufLogger struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *bufLogger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, format+"\n", args...)
}

func (l *bufLogger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func ptr[T any](v T) *T { return &v }

func TestGoZookeeperClientAgainstCodecServer(t *testing.T) {
	const (
		sessionID  = int64(0x1d00000abcdef01)
		negotiated = 3000 // ms: the client asks for 10 s and must adopt this
	)
	passwd := []byte("fake-server-pw16")
	var (
		statW, statSet, statKids = stat(100), stat(200), stat(300)
		statACL, statSetACL      = stat(400), stat(500)
		statMulti, statReconfig  = stat(600), stat(700)
		aclOut                   = []jute.ACL{{Perms: jute.PermRead | jute.PermAdmin, ID: jute.ID{Scheme: "digest", ID: "user:hash"}}, {Perms: jute.PermAll, ID: jute.AnyoneID}}
		worldAll                 = []jute.ACL{{Perms: jute.PermAll, ID: jute.AnyoneID}}
		config                   = "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\nversion=100000000"
	)

	s := startFakeServer(t)
	s.connect = func(req *jute.ConnectRequest) jute.ConnectResponse {
		return jute.ConnectResponse{
			ProtocolVersion: jute.ProtocolVersion, TimeOut: negotiated, SessionID: sessionID,
			Passwd: passwd, HasReadOnly: req.HasReadOnly,
		}
	}
	s.handle = func(h jute.RequestHeader, req jute.Record) reply {
		switch r := req.(type) {
		case *jute.CreateRequest:
			if h.Type == jute.OpCreateContainer {
				// ZooKeeper answers createContainer with a Create2Response;
				// a client that asked for a path only reads the path.
				return reply{body: &jute.Create2Response{Path: r.Path, Stat: stat(1)}}
			}
			return reply{body: &jute.CreateResponse{Path: r.Path + "0000000001"}}
		case *jute.CreateTTLRequest:
			return reply{body: &jute.Create2Response{Path: r.Path, Stat: stat(2)}}
		case *jute.GetDataRequest:
			return reply{body: &jute.GetDataResponse{Data: []byte("w-data"), Stat: statW}}
		case *jute.SetDataRequest:
			// The watch notification travels before the reply that reflects it.
			return reply{
				before: []jute.WatcherEvent{{Type: jute.EventNodeDataChanged, State: jute.StateSyncConnected, Path: r.Path}},
				body:   &jute.SetDataResponse{Stat: statSet},
			}
		case *jute.ExistsRequest:
			return reply{err: jute.CodeNoNode}
		case *jute.GetChildren2Request:
			return reply{body: &jute.GetChildren2Response{Children: []string{"a", "w"}, Stat: statKids}}
		case *jute.GetACLRequest:
			return reply{body: &jute.GetACLResponse{ACL: aclOut, Stat: statACL}}
		case *jute.SetACLRequest:
			return reply{body: &jute.SetACLResponse{Stat: statSetACL}}
		case *jute.SyncRequest:
			return reply{body: &jute.SyncResponse{Path: r.Path}}
		case *jute.ReconfigRequest:
			return reply{body: &jute.GetDataResponse{Data: []byte(config), Stat: statReconfig}}
		case *jute.MultiRequest:
			if r.Ops[0].Request.(*jute.CreateRequest).Path == "/m1" {
				// The second op fails: ZooKeeper's partial-failure shape.
				return reply{body: &jute.MultiResponse{Results: jute.FailedMultiResults(len(r.Ops), 1, jute.CodeBadVersion)}}
			}
			var res []jute.OpResult
			for _, op := range r.Ops {
				out := jute.OpResult{Type: jute.ResultType(op.Type)}
				switch q := op.Request.(type) {
				case *jute.CreateRequest:
					out.Path = q.Path
				case *jute.SetDataRequest:
					out.Stat = statMulti
				}
				res = append(res, out)
			}
			return reply{body: &jute.MultiResponse{Results: res}}
		}
		return reply{body: &jute.Empty{}} // delete, auth, setWatches, closeSession
	}

	log := &bufLogger{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("go-zookeeper's log:\n%s", log)
		}
	})
	c, events, err := zk.Connect([]string{s.ln.Addr().String()}, 10*time.Second, zk.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			c.Close()
		}
	})

	// The handshake: go-zookeeper's ConnectRequest has no readOnly byte.
	s.expect(t, 0, &jute.ConnectRequest{
		ProtocolVersion: 0, LastZxidSeen: 0, TimeOut: 10000, SessionID: 0, Passwd: make([]byte, 16),
	})
	waitState(t, events, zk.StateHasSession)
	if got := c.SessionID(); got != sessionID {
		t.Fatalf("client has session %#x, want %#x", got, sessionID)
	}

	// create
	path, err := c.Create("/a", []byte("data-a"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil || path != "/a0000000001" {
		t.Fatalf("Create = %q, %v", path, err)
	}
	s.expect(t, jute.OpCreate, &jute.CreateRequest{Path: "/a", Data: []byte("data-a"), ACL: worldAll, Flags: jute.ModeEphemeralSequential})

	// createContainer (nil data goes as jute's null) and createTTL
	path, err = c.CreateContainer("/c", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	if err != nil || path != "/c" {
		t.Fatalf("CreateContainer = %q, %v", path, err)
	}
	s.expect(t, jute.OpCreateContainer, &jute.CreateRequest{Path: "/c", Data: nil, ACL: worldAll, Flags: jute.ModeContainer})
	path, err = c.CreateTTL("/t", []byte("t"), zk.FlagTTL, zk.WorldACL(zk.PermAll), 5*time.Second)
	if err != nil || path != "/t" {
		t.Fatalf("CreateTTL = %q, %v", path, err)
	}
	s.expect(t, jute.OpCreateTTL, &jute.CreateTTLRequest{Path: "/t", Data: []byte("t"), ACL: worldAll, Flags: jute.ModePersistentWithTTL, TTL: 5000})

	// getData with a watch, then setData, whose reply the notification precedes
	data, st, watch, err := c.GetW("/w")
	if err != nil || string(data) != "w-data" || !reflect.DeepEqual(st, zkStat(statW)) {
		t.Fatalf("GetW = %q, %+v, %v", data, st, err)
	}
	s.expect(t, jute.OpGetData, &jute.GetDataRequest{Path: "/w", Watch: true})
	st, err = c.Set("/w", []byte("new"), 4)
	if err != nil || !reflect.DeepEqual(st, zkStat(statSet)) {
		t.Fatalf("Set = %+v, %v", st, err)
	}
	s.expect(t, jute.OpSetData, &jute.SetDataRequest{Path: "/w", Data: []byte("new"), Version: 4})
	select {
	case ev := <-watch:
		want := zk.Event{Type: zk.EventNodeDataChanged, State: zk.StateSyncConnected, Path: "/w"}
		if ev.Type != want.Type || ev.State != want.State || ev.Path != want.Path || ev.Err != nil {
			t.Fatalf("watch event %+v, want %+v", ev, want)
		}
	default:
		t.Fatal("the notification did not reach the watch before the setData reply")
	}

	// an error reply
	ok, _, err := c.Exists("/missing")
	if ok || err != nil {
		t.Fatalf("Exists(/missing) = %v, %v", ok, err)
	}
	s.expect(t, jute.OpExists, &jute.ExistsRequest{Path: "/missing"})

	kids, st, err := c.Children("/")
	if err != nil || !reflect.DeepEqual(kids, []string{"a", "w"}) || !reflect.DeepEqual(st, zkStat(statKids)) {
		t.Fatalf("Children = %v, %+v, %v", kids, st, err)
	}
	s.expect(t, jute.OpGetChildren2, &jute.GetChildren2Request{Path: "/"})

	acl, st, err := c.GetACL("/a")
	wantACL := []zk.ACL{{Perms: zk.PermRead | zk.PermAdmin, Scheme: "digest", ID: "user:hash"}, {Perms: zk.PermAll, Scheme: "world", ID: "anyone"}}
	if err != nil || !reflect.DeepEqual(acl, wantACL) || !reflect.DeepEqual(st, zkStat(statACL)) {
		t.Fatalf("GetACL = %+v, %+v, %v", acl, st, err)
	}
	s.expect(t, jute.OpGetACL, &jute.GetACLRequest{Path: "/a"})
	st, err = c.SetACL("/a", zk.WorldACL(zk.PermRead), 2)
	if err != nil || !reflect.DeepEqual(st, zkStat(statSetACL)) {
		t.Fatalf("SetACL = %+v, %v", st, err)
	}
	s.expect(t, jute.OpSetACL, &jute.SetACLRequest{Path: "/a", ACL: []jute.ACL{{Perms: jute.PermRead, ID: jute.AnyoneID}}, Version: 2})

	if p, err := c.Sync("/a"); err != nil || p != "/a" {
		t.Fatalf("Sync = %q, %v", p, err)
	}
	s.expect(t, jute.OpSync, &jute.SyncRequest{Path: "/a"})

	if err := c.AddAuth("digest", []byte("user:pw")); err != nil {
		t.Fatalf("AddAuth: %v", err)
	}
	s.expect(t, jute.OpAuth, &jute.AuthPacket{Type: 0, Scheme: "digest", Auth: []byte("user:pw")})

	st, err = c.IncrementalReconfig([]string{"server.4=127.0.0.4:2888:3888;2181"}, nil, -1)
	if err != nil || !reflect.DeepEqual(st, zkStat(statReconfig)) {
		t.Fatalf("IncrementalReconfig = %+v, %v", st, err)
	}
	s.expect(t, jute.OpReconfig, &jute.ReconfigRequest{
		JoiningServers: ptr("server.4=127.0.0.4:2888:3888;2181"), LeavingServers: ptr(""), NewMembers: nil, CurConfigID: -1,
	})

	// multi with a failing op: per-op results, the first error returned
	res, err := c.Multi(
		&zk.CreateRequest{Path: "/m1", Data: []byte("1"), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagPersistent},
		&zk.SetDataRequest{Path: "/m2", Data: []byte("2"), Version: 7},
		&zk.DeleteRequest{Path: "/m3", Version: -1},
		&zk.CheckVersionRequest{Path: "/m4", Version: 2},
	)
	if !errors.Is(err, zk.ErrBadVersion) || len(res) != 4 {
		t.Fatalf("failing Multi = %+v, %v", res, err)
	}
	if res[0].Error != nil || res[1].Error != zk.ErrBadVersion || res[2].Error == nil || !strings.Contains(res[2].Error.Error(), "-2") || res[3].Error == nil {
		t.Fatalf("failing Multi results %+v", res)
	}
	s.expect(t, jute.OpMulti, &jute.MultiRequest{Ops: []jute.Op{
		{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/m1", Data: []byte("1"), ACL: worldAll, Flags: jute.ModePersistent}},
		{Type: jute.OpSetData, Request: &jute.SetDataRequest{Path: "/m2", Data: []byte("2"), Version: 7}},
		{Type: jute.OpDelete, Request: &jute.DeleteRequest{Path: "/m3", Version: -1}},
		{Type: jute.OpCheck, Request: &jute.CheckVersionRequest{Path: "/m4", Version: 2}},
	}})

	// multi that succeeds
	res, err = c.Multi(
		&zk.CreateRequest{Path: "/s1", Data: []byte("1"), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: "/s2", Data: nil, Version: -1},
		&zk.DeleteRequest{Path: "/s3", Version: 1},
		&zk.CheckVersionRequest{Path: "/s4", Version: 0},
	)
	if err != nil || len(res) != 4 || res[0].String != "/s1" || !reflect.DeepEqual(res[1].Stat, zkStat(statMulti)) {
		t.Fatalf("Multi = %+v, %v", res, err)
	}
	for i, r := range res {
		if r.Error != nil {
			t.Errorf("op %d: %v", i, r.Error)
		}
	}
	s.expect(t, jute.OpMulti, &jute.MultiRequest{Ops: []jute.Op{
		{Type: jute.OpCreate, Request: &jute.CreateRequest{Path: "/s1", Data: []byte("1"), ACL: worldAll, Flags: jute.ModeEphemeral}},
		{Type: jute.OpSetData, Request: &jute.SetDataRequest{Path: "/s2", Data: nil, Version: -1}},
		{Type: jute.OpDelete, Request: &jute.DeleteRequest{Path: "/s3", Version: 1}},
		{Type: jute.OpCheck, Request: &jute.CheckVersionRequest{Path: "/s4", Version: 0}},
	}})

	if err := c.Delete("/a", 3); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	s.expect(t, jute.OpDelete, &jute.DeleteRequest{Path: "/a", Version: 3})

	// pings: the client keeps the connection alive with them only if it
	// reads the replies (it drops a connection silent for 2/3 of the timeout)
	for i := 0; i < 2; i++ {
		select {
		case <-s.pings:
		case <-time.After(10 * time.Second):
			t.Fatalf("ping %d never came", i+1)
		}
	}

	// reconnect: the client resumes its session with what the server gave it
	// and re-sends its credentials. (No watch is pending here: go-zookeeper
	// v1.0.4 reads lastZxid in sendSetWatches while its receive loop writes
	// it, a data race the race detector reports; go-zookeeper/zk PR #35.
	// SetWatches has its own golden bytes.)
	s.mu.Lock()
	lastZxid := s.lastReply
	s.mu.Unlock()
	s.dropConnections()
	s.expect(t, 0, &jute.ConnectRequest{
		LastZxidSeen: lastZxid, TimeOut: negotiated, SessionID: sessionID, Passwd: passwd,
	})
	s.expect(t, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("user:pw")})
	if _, err := c.Sync("/after"); err != nil {
		t.Fatalf("Sync after reconnect: %v", err)
	}
	s.expect(t, jute.OpSync, &jute.SyncRequest{Path: "/after"})

	// close
	c.Close()
	closed = true
	s.expect(t, jute.OpCloseSession, &jute.Empty{})
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, open := <-events:
			if !open {
				return // the client's goroutines are done
			}
		case <-deadline:
			t.Fatal("the client did not shut down after close")
		}
	}
}

func waitState(t *testing.T, events <-chan zk.Event, want zk.State) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == want {
				return
			}
		case <-deadline:
			t.Fatalf("client never reached %v", want)
		}
	}
}
