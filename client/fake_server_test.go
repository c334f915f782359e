package client

import (
	"context"
	"fmt"
	"net"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/rpc/apipb"
)

// A small in-memory coordd: a fakeCluster holds the replicated state (znodes,
// sessions, write-reply caches); fakeServers are its gRPC front ends, each with
// server-local watches. Test hooks refuse connects, kill streams, hold or
// drop replies.

type fnode struct {
	data []byte
	stat *apipb.Stat // NumChildren and DataLength computed on read
}

type fsess struct {
	id       int64
	password []byte
	timeout  int64
	cache    map[int64]*apipb.Response // replies of writes, by xid
}

type fakeCluster struct {
	mu       sync.Mutex
	zxid     int64
	nodes    map[string]*fnode
	seq      map[string]int64
	sessions map[int64]*fsess
	nextSess int64
	streams  map[*fstream]struct{}
	applied  map[int64]int // xid -> times a write was applied (all sessions)
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		nodes:    map[string]*fnode{"/": {stat: &apipb.Stat{}}},
		seq:      map[string]int64{},
		sessions: map[int64]*fsess{},
		nextSess: 1000,
		streams:  map[*fstream]struct{}{},
		applied:  map[int64]int{},
	}
}

// action is what a server does with a request (see fakeServer.onRequest).
type action int

const (
	actNormal    action = iota
	actApplyKill        // apply it, then kill the stream without replying
	actKill             // kill the stream without applying
	actHold             // block the stream's processing until released or killed
	actBlackhole        // stop sending anything on this stream, forever
	actReply            // reply with the error set in the hook's result
)

type hookResult struct {
	act  action
	code apipb.ErrorCode
	msg  string
}

type fakeServer struct {
	apipb.UnimplementedCoordServer
	t    *testing.T
	name string
	cl   *fakeCluster
	addr string
	gs   *grpc.Server

	mu        sync.Mutex
	connects  []*apipb.ConnectRequest
	requests  []*apipb.Request
	refuse    func(*apipb.ConnectRequest) (apipb.ErrorCode, string)
	onRequest func(*apipb.Request) hookResult
	release   chan struct{}
	active    map[*fstream]struct{}
	accepted  int // streams ever accepted

	tcpConns atomic.Int32 // TCP connections ever accepted

	// Vouches (apipb.Vouch), for clients that ask: every vouchEvery the
	// server takes the highest xid received on each stream and, confirmDelay
	// later (the leader's round), vouches for it, unless vouching is off
	// (a server cut off from its leader).
	vouchEvery   time.Duration // 0: the server does not vouch (an older server)
	confirmDelay time.Duration
	noVouch      atomic.Bool
	vouched      []vouchRecord
	received     map[int64]time.Duration // xid -> when first received (since start)
	start        time.Time
}

// vouchRecord is one vouch sent.
type vouchRecord struct {
	xid int64
	at  time.Duration // since the server started
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

type fstream struct {
	srv                *fakeServer
	sess               *fsess
	out                chan *apipb.ServerMessage
	kill, mute         chan struct{}
	killOnce, muteOnce sync.Once
	data, exist, child map[string]bool
	persistent         map[string]bool // AddWatch's, either kind: registered, never fired by the fake
}

func (fs *fstream) doKill() { fs.killOnce.Do(func() { close(fs.kill) }) }
func (fs *fstream) doMute() { fs.muteOnce.Do(func() { close(fs.mute) }) }

func (cl *fakeCluster) newServer(t *testing.T, name string) *fakeServer {
	t.Helper()
	s, err := cl.listen(name)
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(s.gs.Stop)
	return s
}

// listen starts a server of cl on a free 127.0.0.1 port; gs.Stop stops it.
func (cl *fakeCluster) listen(name string) (*fakeServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return cl.serve(name, lis, lis.Addr().String()), nil
}

// serve starts a server of cl on lis, known to clients as addr, configured
// by opts before it serves.
func (cl *fakeCluster) serve(name string, lis net.Listener, addr string, opts ...func(*fakeServer)) *fakeServer {
	s := &fakeServer{name: name, cl: cl, addr: addr, gs: grpc.NewServer(),
		release: make(chan struct{}), active: map[*fstream]struct{}{}, start: time.Now()}
	for _, o := range opts {
		o(s)
	}
	apipb.RegisterCoordServer(s.gs, s)
	go s.gs.Serve(countingListener{lis, &s.tcpConns})
	return s
}

// FakeServers starts n in-memory servers of one fake cluster, for the
// package's examples (which may not start a real server: client's tests do
// not import the server packages), and returns their addresses. They run
// until the test binary exits.
func FakeServers(n int) []string {
	cl := newFakeCluster()
	var addrs []string
	for i := 0; i < n; i++ {
		s, err := cl.listen(fmt.Sprintf("example-%d", i+1))
		if err != nil {
			panic(err)
		}
		addrs = append(addrs, s.addr)
	}
	return addrs
}

func (s *fakeServer) setRefuse(f func(*apipb.ConnectRequest) (apipb.ErrorCode, string)) {
	s.mu.Lock()
	s.refuse = f
	s.mu.Unlock()
}

func (s *fakeServer) setOnRequest(f func(*apipb.Request) hookResult) {
	s.mu.Lock()
	s.onRequest = f
	s.mu.Unlock()
}

// releaseHeld lets every held request proceed.
func (s *fakeServer) releaseHeld() {
	s.mu.Lock()
	close(s.release)
	s.release = make(chan struct{})
	s.mu.Unlock()
}

// killStreams ends every session stream of this server with an error.
func (s *fakeServer) killStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for fs := range s.active {
		fs.doKill()
	}
}

func (s *fakeServer) activeStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

func (s *fakeServer) acceptedStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

func (s *fakeServer) connectRequests() []*apipb.ConnectRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*apipb.ConnectRequest(nil), s.connects...)
}

func (s *fakeServer) receivedRequests() []*apipb.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*apipb.Request(nil), s.requests...)
}

func errResponse(xid int64, code apipb.ErrorCode, msg string) *apipb.ServerMessage {
	return &apipb.ServerMessage{Kind: &apipb.ServerMessage_Response{Response: &apipb.Response{Xid: xid, Error: code, Message: msg}}}
}

func (s *fakeServer) Session(stream apipb.Coord_SessionServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	creq := first.GetConnect()
	if creq == nil {
		return status.Error(codes.InvalidArgument, "first message must be a connect")
	}
	s.mu.Lock()
	s.connects = append(s.connects, creq)
	refuse := s.refuse
	s.mu.Unlock()
	if refuse != nil {
		if code, msg := refuse(creq); code != apipb.ErrorCode_OK {
			return stream.Send(errResponse(0, code, msg))
		}
	}

	cl := s.cl
	fs := &fstream{srv: s, out: make(chan *apipb.ServerMessage, 4096), kill: make(chan struct{}), mute: make(chan struct{}),
		data: map[string]bool{}, exist: map[string]bool{}, child: map[string]bool{}, persistent: map[string]bool{}}
	cl.mu.Lock()
	if creq.SessionId == 0 {
		cl.nextSess++
		fs.sess = &fsess{id: cl.nextSess, password: []byte(fmt.Sprintf("pw-%d", cl.nextSess)), timeout: creq.TimeoutMs, cache: map[int64]*apipb.Response{}}
		if fs.sess.timeout == 0 {
			fs.sess.timeout = 10000
		}
		cl.sessions[fs.sess.id] = fs.sess
	} else {
		sess, ok := cl.sessions[creq.SessionId]
		if !ok {
			cl.mu.Unlock()
			return stream.Send(errResponse(0, apipb.ErrorCode_SESSION_EXPIRED, "no such session"))
		}
		if string(sess.password) != string(creq.Password) {
			cl.mu.Unlock()
			return stream.Send(errResponse(0, apipb.ErrorCode_AUTH_FAILED, "wrong password"))
		}
		if creq.LastZxid > cl.zxid {
			cl.mu.Unlock()
			return stream.Send(errResponse(0, apipb.ErrorCode_UNAVAILABLE, "behind the client"))
		}
		fs.sess = sess
	}
	var vouchMs int64
	if creq.Vouches {
		vouchMs = s.vouchEvery.Milliseconds()
	}
	fs.out <- &apipb.ServerMessage{Kind: &apipb.ServerMessage_Connected{Connected: &apipb.ConnectResponse{
		SessionId: fs.sess.id, Password: fs.sess.password, TimeoutMs: fs.sess.timeout, ServerId: s.name, Zxid: cl.zxid,
		VouchIntervalMs: vouchMs}}}
	// Re-register the resumed watches, firing at once those whose node changed.
	for _, p := range creq.DataWatches {
		n := cl.nodes[p]
		switch {
		case n == nil:
			fs.event(apipb.EventType_NODE_DELETED, p, cl.zxid)
		case n.stat.Mzxid > creq.LastZxid:
			fs.event(apipb.EventType_NODE_DATA_CHANGED, p, n.stat.Mzxid)
		default:
			fs.data[p] = true
		}
	}
	for _, p := range creq.ExistWatches {
		if n := cl.nodes[p]; n != nil {
			fs.event(apipb.EventType_NODE_CREATED, p, n.stat.Czxid)
		} else {
			fs.exist[p] = true
		}
	}
	for _, p := range creq.ChildWatches {
		n := cl.nodes[p]
		switch {
		case n == nil:
			fs.event(apipb.EventType_NODE_DELETED, p, cl.zxid)
		case n.stat.Pzxid > creq.LastZxid:
			fs.event(apipb.EventType_NODE_CHILDREN_CHANGED, p, n.stat.Pzxid)
		default:
			fs.child[p] = true
		}
	}
	for _, p := range append(creq.PersistentWatches, creq.PersistentRecursiveWatches...) {
		fs.persistent[p] = true
	}
	cl.streams[fs] = struct{}{}
	cl.mu.Unlock()
	s.mu.Lock()
	s.active[fs] = struct{}{}
	s.accepted++
	s.mu.Unlock()
	defer func() {
		cl.mu.Lock()
		delete(cl.streams, fs)
		cl.mu.Unlock()
		s.mu.Lock()
		delete(s.active, fs)
		s.mu.Unlock()
	}()

	ctx := stream.Context()
	var highest atomic.Int64 // highest xid received on this stream
	if vouchMs > 0 {
		go s.vouchLoop(ctx, fs, &highest)
	}
	writerDone := make(chan struct{})
	go func() { // the only goroutine that sends on the stream
		defer close(writerDone)
		for {
			select {
			case <-fs.kill:
				return
			case <-ctx.Done():
				return
			case <-fs.mute:
				select {
				case <-fs.kill:
				case <-ctx.Done():
				}
				return
			case m := <-fs.out:
				if m == nil {
					return
				}
				if err := stream.Send(m); err != nil {
					return
				}
			}
		}
	}()
	reqs := make(chan *apipb.Request)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				close(reqs)
				return
			}
			select {
			case reqs <- m.GetRequest():
			case <-ctx.Done():
				return
			}
		}
	}()
	killed := func() error {
		fs.doKill()
		<-writerDone
		return status.Error(codes.Unavailable, "killed by test")
	}
	muted := false
	for {
		var req *apipb.Request
		var ok bool
		select {
		case <-fs.kill:
			return killed()
		case <-ctx.Done():
			<-writerDone
			return ctx.Err()
		case req, ok = <-reqs:
			if !ok {
				fs.doKill()
				<-writerDone
				return nil
			}
		}
		if req == nil {
			return killed()
		}
		s.mu.Lock()
		s.requests = append(s.requests, req)
		if s.received == nil {
			s.received = map[int64]time.Duration{}
		}
		if _, ok := s.received[req.Xid]; !ok {
			s.received[req.Xid] = time.Since(s.start)
		}
		highest.Store(max(highest.Load(), req.Xid))
		hook := s.onRequest
		release := s.release
		s.mu.Unlock()
		if muted {
			continue
		}
		h := hookResult{}
		if hook != nil {
			h = hook(req)
		}
		switch h.act {
		case actKill:
			return killed()
		case actApplyKill:
			cl.mu.Lock()
			cl.handle(fs, req)
			cl.mu.Unlock()
			return killed()
		case actBlackhole:
			muted = true
			fs.doMute()
			continue
		case actReply:
			fs.out <- errResponse(req.Xid, h.code, h.msg)
			continue
		case actHold:
			select {
			case <-release:
			case <-fs.kill:
				return killed()
			case <-ctx.Done():
				<-writerDone
				return ctx.Err()
			}
		}
		cl.mu.Lock()
		resp := cl.handle(fs, req)
		fs.out <- &apipb.ServerMessage{Kind: &apipb.ServerMessage_Response{Response: resp}}
		cl.mu.Unlock()
		if req.GetClose() != nil {
			fs.out <- nil // flush, then end the stream
			<-writerDone
			return nil
		}
	}
}

// vouchLoop vouches for the requests received on fs, as a server passing
// its keep-alives to the leader does, until the stream ends.
func (s *fakeServer) vouchLoop(ctx context.Context, fs *fstream, highest *atomic.Int64) {
	tk := time.NewTicker(s.vouchEvery)
	defer tk.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-fs.kill:
			return
		case <-tk.C:
		}
		xid := highest.Load()
		if xid <= last || s.noVouch.Load() {
			continue
		}
		if s.confirmDelay > 0 {
			select {
			case <-ctx.Done():
				return
			case <-fs.kill:
				return
			case <-time.After(s.confirmDelay):
			}
		}
		if s.noVouch.Load() {
			continue // cut off while the leader was asked
		}
		last = xid
		s.mu.Lock()
		s.vouched = append(s.vouched, vouchRecord{xid, time.Since(s.start)})
		s.mu.Unlock()
		select {
		case fs.out <- &apipb.ServerMessage{Kind: &apipb.ServerMessage_Vouch{Vouch: &apipb.Vouch{Xid: xid}}}:
		case <-ctx.Done():
			return
		}
	}
}

// lastVouch returns the last vouch sent (zero if none).
func (s *fakeServer) lastVouch() vouchRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.vouched) == 0 {
		return vouchRecord{}
	}
	return s.vouched[len(s.vouched)-1]
}

// receivedAt is when the server first received xid (since it started).
func (s *fakeServer) receivedAt(xid int64) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.received[xid]
	return at, ok
}

// event queues a watch event on fs (cluster lock held).
func (fs *fstream) event(t apipb.EventType, p string, zxid int64) {
	fs.out <- &apipb.ServerMessage{Kind: &apipb.ServerMessage_Event{Event: &apipb.WatchEvent{Type: t, Path: p, Zxid: zxid}}}
}

// inject queues ev on every stream of s, after what is queued there.
func (s *fakeServer) inject(ev *apipb.WatchEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for fs := range s.active {
		fs.out <- &apipb.ServerMessage{Kind: &apipb.ServerMessage_Event{Event: ev}}
	}
}

// fire fires the watches that an event of type t on p triggers, on every
// stream, once per stream (cluster lock held).
func (cl *fakeCluster) fire(t apipb.EventType, p string) {
	for fs := range cl.streams {
		hit := false
		switch t {
		case apipb.EventType_NODE_CREATED:
			hit = fs.exist[p]
			delete(fs.exist, p)
		case apipb.EventType_NODE_DATA_CHANGED:
			hit = fs.exist[p] || fs.data[p]
			delete(fs.exist, p)
			delete(fs.data, p)
		case apipb.EventType_NODE_DELETED:
			hit = fs.exist[p] || fs.data[p] || fs.child[p]
			delete(fs.exist, p)
			delete(fs.data, p)
			delete(fs.child, p)
		case apipb.EventType_NODE_CHILDREN_CHANGED:
			hit = fs.child[p]
			delete(fs.child, p)
		}
		if hit {
			fs.event(t, p, cl.zxid)
		}
	}
}

func isWrite(req *apipb.Request) bool {
	switch req.Op.(type) {
	case *apipb.Request_Create, *apipb.Request_Delete, *apipb.Request_SetData, *apipb.Request_Multi, *apipb.Request_Close:
		return true
	}
	return false
}

type fevent struct {
	t apipb.EventType
	p string
}

// handle executes req for fs's session and returns the reply (cluster lock
// held). Writes are applied once per (session, xid).
func (cl *fakeCluster) handle(fs *fstream, req *apipb.Request) *apipb.Response {
	sess := fs.sess
	for xid := range sess.cache {
		if xid < req.LowestPendingXid {
			delete(sess.cache, xid)
		}
	}
	if isWrite(req) {
		if r, ok := sess.cache[req.Xid]; ok {
			return r
		}
		cl.zxid++
		cl.applied[req.Xid]++
	}
	r := &apipb.Response{Xid: req.Xid, Zxid: cl.zxid}
	var evs []fevent
	switch op := req.Op.(type) {
	case *apipb.Request_Create:
		name, st, code := cl.create(op.Create, sess.id, &evs)
		r.Error = code
		if code == apipb.ErrorCode_OK {
			r.Result = &apipb.Response_Create{Create: &apipb.CreateResponse{Path: name, Stat: st}}
		}
	case *apipb.Request_Delete:
		r.Error = cl.delete(op.Delete.Path, op.Delete.Version, &evs)
	case *apipb.Request_SetData:
		st, code := cl.set(op.SetData, &evs)
		r.Error = code
		if code == apipb.ErrorCode_OK {
			r.Result = &apipb.Response_SetData{SetData: &apipb.SetDataResponse{Stat: st}}
		}
	case *apipb.Request_GetData:
		n := cl.nodes[op.GetData.Path]
		if n == nil {
			r.Error, r.Message = apipb.ErrorCode_NO_NODE, op.GetData.Path
			break
		}
		if op.GetData.Watch {
			fs.data[op.GetData.Path] = true
		}
		r.Result = &apipb.Response_GetData{GetData: &apipb.GetDataResponse{Data: n.data, Stat: cl.stat(op.GetData.Path)}}
	case *apipb.Request_Exists:
		n := cl.nodes[op.Exists.Path]
		e := &apipb.ExistsResponse{}
		if n != nil {
			e.Stat = cl.stat(op.Exists.Path)
		}
		if op.Exists.Watch {
			if n != nil {
				fs.data[op.Exists.Path] = true
			} else {
				fs.exist[op.Exists.Path] = true
			}
		}
		r.Result = &apipb.Response_Exists{Exists: e}
	case *apipb.Request_GetChildren:
		if cl.nodes[op.GetChildren.Path] == nil {
			r.Error = apipb.ErrorCode_NO_NODE
			break
		}
		if op.GetChildren.Watch {
			fs.child[op.GetChildren.Path] = true
		}
		r.Result = &apipb.Response_GetChildren{GetChildren: &apipb.GetChildrenResponse{
			Children: cl.children(op.GetChildren.Path), Stat: cl.stat(op.GetChildren.Path)}}
	case *apipb.Request_Sync:
		r.Result = &apipb.Response_Sync{Sync: &apipb.SyncResponse{Path: op.Sync.Path}}
	case *apipb.Request_Multi:
		r.Result = &apipb.Response_Multi{Multi: cl.multi(op.Multi, sess.id, &evs, r)}
	case *apipb.Request_Ping:
	case *apipb.Request_Close:
		var eph []string
		for p, n := range cl.nodes {
			if n.stat.EphemeralOwner == sess.id {
				eph = append(eph, p)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(eph)))
		for _, p := range eph {
			cl.delete(p, -1, &evs)
		}
		delete(cl.sessions, sess.id)
	case *apipb.Request_AddWatch:
		fs.persistent[op.AddWatch.Path] = true
	case *apipb.Request_CheckWatches:
		if !fs.persistent[op.CheckWatches.Path] {
			r.Error = apipb.ErrorCode_NO_WATCHER
		}
	case *apipb.Request_RemoveWatches:
		p, k := op.RemoveWatches.Path, op.RemoveWatches.Kind
		found := false
		if (k == apipb.WatchKind_WATCH_PERSISTENT || k == apipb.WatchKind_WATCH_PERSISTENT_RECURSIVE || k == apipb.WatchKind_WATCH_ANY) && fs.persistent[p] {
			found = true
			delete(fs.persistent, p)
		}
		if (k == apipb.WatchKind_WATCH_ANY || k == apipb.WatchKind_WATCH_DATA) && (fs.data[p] || fs.exist[p]) {
			found = true
			delete(fs.data, p)
			delete(fs.exist, p)
		}
		if (k == apipb.WatchKind_WATCH_ANY || k == apipb.WatchKind_WATCH_CHILD) && fs.child[p] {
			found = true
			delete(fs.child, p)
		}
		if !found {
			r.Error = apipb.ErrorCode_NO_WATCHER
		}
	default:
		r.Error = apipb.ErrorCode_UNIMPLEMENTED
	}
	for _, e := range evs {
		cl.fire(e.t, e.p)
	}
	if isWrite(req) {
		sess.cache[req.Xid] = r
	}
	return r
}

func parentOf(p string) string { return path.Dir(p) }

func (cl *fakeCluster) children(p string) []string {
	var out []string
	for q := range cl.nodes {
		if q != "/" && parentOf(q) == p {
			out = append(out, path.Base(q))
		}
	}
	sort.Strings(out)
	return out
}

func (cl *fakeCluster) stat(p string) *apipb.Stat {
	n := cl.nodes[p]
	st := proto.Clone(n.stat).(*apipb.Stat)
	st.DataLength = int32(len(n.data))
	st.NumChildren = int32(len(cl.children(p)))
	return st
}

func (cl *fakeCluster) create(c *apipb.CreateRequest, owner int64, evs *[]fevent) (string, *apipb.Stat, apipb.ErrorCode) {
	if !strings.HasPrefix(c.Path, "/") || c.Path == "/" {
		return "", nil, apipb.ErrorCode_BAD_ARGUMENTS
	}
	parent := parentOf(c.Path)
	pn := cl.nodes[parent]
	if pn == nil {
		return "", nil, apipb.ErrorCode_NO_NODE
	}
	if pn.stat.EphemeralOwner != 0 {
		return "", nil, apipb.ErrorCode_NO_CHILDREN_FOR_EPHEMERALS
	}
	name := c.Path
	if c.Sequential {
		name = fmt.Sprintf("%s%010d", c.Path, cl.seq[parent])
	}
	if cl.nodes[name] != nil {
		return "", nil, apipb.ErrorCode_NODE_EXISTS
	}
	cl.seq[parent]++
	n := &fnode{data: c.Data, stat: &apipb.Stat{Czxid: cl.zxid, Mzxid: cl.zxid, Pzxid: cl.zxid, Kind: c.Kind, TtlMs: c.TtlMs}}
	if c.Kind == apipb.NodeKind_EPHEMERAL {
		n.stat.EphemeralOwner = owner
	}
	cl.nodes[name] = n
	pn.stat.Cversion++
	pn.stat.Pzxid = cl.zxid
	*evs = append(*evs, fevent{apipb.EventType_NODE_CREATED, name}, fevent{apipb.EventType_NODE_CHILDREN_CHANGED, parent})
	return name, cl.stat(name), apipb.ErrorCode_OK
}

func (cl *fakeCluster) delete(p string, version int32, evs *[]fevent) apipb.ErrorCode {
	n := cl.nodes[p]
	if n == nil || p == "/" {
		return apipb.ErrorCode_NO_NODE
	}
	if version != -1 && version != n.stat.Version {
		return apipb.ErrorCode_BAD_VERSION
	}
	if len(cl.children(p)) > 0 {
		return apipb.ErrorCode_NOT_EMPTY
	}
	delete(cl.nodes, p)
	pn := cl.nodes[parentOf(p)]
	pn.stat.Cversion++
	pn.stat.Pzxid = cl.zxid
	*evs = append(*evs, fevent{apipb.EventType_NODE_DELETED, p}, fevent{apipb.EventType_NODE_CHILDREN_CHANGED, parentOf(p)})
	return apipb.ErrorCode_OK
}

func (cl *fakeCluster) set(s *apipb.SetDataRequest, evs *[]fevent) (*apipb.Stat, apipb.ErrorCode) {
	n := cl.nodes[s.Path]
	if n == nil {
		return nil, apipb.ErrorCode_NO_NODE
	}
	if s.Version != -1 && s.Version != n.stat.Version {
		return nil, apipb.ErrorCode_BAD_VERSION
	}
	n.data = s.Data
	n.stat.Version++
	n.stat.Mzxid = cl.zxid
	*evs = append(*evs, fevent{apipb.EventType_NODE_DATA_CHANGED, s.Path})
	return cl.stat(s.Path), apipb.ErrorCode_OK
}

func (cl *fakeCluster) multi(m *apipb.MultiRequest, owner int64, evs *[]fevent, r *apipb.Response) *apipb.MultiResponse {
	saved := map[string]*fnode{}
	for p, n := range cl.nodes {
		saved[p] = &fnode{data: n.data, stat: proto.Clone(n.stat).(*apipb.Stat)}
	}
	savedSeq := map[string]int64{}
	for p, v := range cl.seq {
		savedSeq[p] = v
	}
	var local []fevent
	res := make([]*apipb.MultiResult, len(m.Ops))
	failed := -1
	for i, op := range m.Ops {
		out := &apipb.MultiResult{}
		switch o := op.Op.(type) {
		case *apipb.MultiOp_Create:
			out.Path, out.Stat, out.Error = cl.create(o.Create, owner, &local)
		case *apipb.MultiOp_Delete:
			out.Path, out.Error = o.Delete.Path, cl.delete(o.Delete.Path, o.Delete.Version, &local)
		case *apipb.MultiOp_SetData:
			out.Path = o.SetData.Path
			out.Stat, out.Error = cl.set(o.SetData, &local)
		case *apipb.MultiOp_Check:
			out.Path = o.Check.Path
			n := cl.nodes[o.Check.Path]
			switch {
			case n == nil:
				out.Error = apipb.ErrorCode_NO_NODE
			case o.Check.Version != -1 && o.Check.Version != n.stat.Version:
				out.Error = apipb.ErrorCode_BAD_VERSION
			}
		}
		res[i] = out
		if out.Error != apipb.ErrorCode_OK {
			failed = i
			break
		}
	}
	if failed < 0 {
		*evs = append(*evs, local...)
		return &apipb.MultiResponse{Results: res}
	}
	cl.nodes = saved
	cl.seq = savedSeq
	r.Error = res[failed].Error
	r.Message = fmt.Sprintf("op %d failed", failed)
	for i := range m.Ops {
		switch {
		case i < failed:
			res[i] = &apipb.MultiResult{}
		case i > failed:
			res[i] = &apipb.MultiResult{Error: apipb.ErrorCode_RUNTIME_INCONSISTENCY}
		default:
			res[i] = &apipb.MultiResult{Error: res[i].Error}
		}
	}
	return &apipb.MultiResponse{Results: res}
}

// expireSession forgets a session, as the leader's expiry would.
func (cl *fakeCluster) expireSession(id int64) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	delete(cl.sessions, id)
}

func (cl *fakeCluster) appliedCount(xid int64) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.applied[xid]
}

func (cl *fakeCluster) exists(p string) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.nodes[p] != nil
}

func (cl *fakeCluster) setPassword(id int64, pw string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.sessions[id].password = []byte(pw)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
