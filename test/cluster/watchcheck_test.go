package cluster

// Helpers of the watch tests (watch_test.go): a recorder of everything a
// session sends and receives on its stream, a checker of ZooKeeper's watch
// ordering rules over that record, a client-side network that can pin a
// session to one server, refuse connections or freeze traffic, and small
// waiting helpers.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/apipb"
)

// ---------------------------------------------------------------------------
// Wire recorder.

// wireMsg is one message received by a session, in receive order.
type wireMsg struct {
	event     *apipb.WatchEvent
	resp      *apipb.Response
	req       *apipb.Request // the request resp answers (nil if unknown)
	connected *apipb.ConnectResponse
}

func (m wireMsg) String() string {
	switch {
	case m.event != nil:
		return fmt.Sprintf("event %v %s zxid=%d kinds=%d", m.event.Type, m.event.Path, m.event.Zxid, m.event.Kinds)
	case m.connected != nil:
		return fmt.Sprintf("connected to %s zxid=%d", m.connected.ServerId, m.connected.Zxid)
	case m.resp != nil:
		op := "?"
		if m.req != nil {
			op = fmt.Sprintf("%T", m.req.Op)
		}
		return fmt.Sprintf("reply xid=%d %s zxid=%d err=%v", m.resp.Xid, op, m.resp.Zxid, m.resp.Error)
	}
	return "empty"
}

// wireRec records a session's stream as the client library sees it, below
// the library: a gRPC stream interceptor. It also lets a test observe sends
// and hold back received messages (onSend/onRecv run on the client's sender
// and receiver goroutines, before the library handles the message).
type wireRec struct {
	mu       sync.Mutex
	reqs     map[int64]*apipb.Request
	msgs     []wireMsg
	connects []*apipb.ConnectRequest
	onSend   func(*apipb.ClientMessage)
	onRecv   func(*apipb.ServerMessage)
}

func newWireRec() *wireRec { return &wireRec{reqs: map[int64]*apipb.Request{}} }

func (r *wireRec) setHooks(onSend func(*apipb.ClientMessage), onRecv func(*apipb.ServerMessage)) {
	r.mu.Lock()
	r.onSend, r.onRecv = onSend, onRecv
	r.mu.Unlock()
}

func (r *wireRec) sent(m *apipb.ClientMessage) {
	m = proto.Clone(m).(*apipb.ClientMessage)
	r.mu.Lock()
	switch k := m.Kind.(type) {
	case *apipb.ClientMessage_Request:
		r.reqs[k.Request.Xid] = k.Request
	case *apipb.ClientMessage_Connect:
		r.connects = append(r.connects, k.Connect)
	}
	hook := r.onSend
	r.mu.Unlock()
	if hook != nil {
		hook(m)
	}
}

func (r *wireRec) received(m *apipb.ServerMessage) {
	m = proto.Clone(m).(*apipb.ServerMessage)
	r.mu.Lock()
	hook := r.onRecv
	r.mu.Unlock()
	if hook != nil {
		hook(m) // may block: the library has not seen m yet
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch k := m.Kind.(type) {
	case *apipb.ServerMessage_Event:
		r.msgs = append(r.msgs, wireMsg{event: k.Event})
	case *apipb.ServerMessage_Response:
		r.msgs = append(r.msgs, wireMsg{resp: k.Response, req: r.reqs[k.Response.Xid]})
	case *apipb.ServerMessage_Connected:
		r.msgs = append(r.msgs, wireMsg{connected: k.Connected})
	}
}

func (r *wireRec) interceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &recStream{ClientStream: cs, r: r}, nil
}

type recStream struct {
	grpc.ClientStream
	r *wireRec
}

func (s *recStream) SendMsg(m any) error {
	if cm, ok := m.(*apipb.ClientMessage); ok {
		s.r.sent(cm)
	}
	return s.ClientStream.SendMsg(m)
}

func (s *recStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		if sm, ok := m.(*apipb.ServerMessage); ok {
			s.r.received(sm)
		}
	}
	return err
}

// snapshot returns a copy of the received messages.
func (r *wireRec) snapshot() []wireMsg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wireMsg(nil), r.msgs...)
}

// events returns the watch events received for path ("" for all).
func (r *wireRec) events(p string) []*apipb.WatchEvent {
	var out []*apipb.WatchEvent
	for _, m := range r.snapshot() {
		if m.event != nil && (p == "" || m.event.Path == p) {
			out = append(out, m.event)
		}
	}
	return out
}

// lastConnect returns the last ConnectRequest sent.
func (r *wireRec) lastConnect() *apipb.ConnectRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.connects) == 0 {
		return nil
	}
	return r.connects[len(r.connects)-1]
}

// ---------------------------------------------------------------------------
// Ordering checker.

// armed is what the checker believes the server holds for a session on a
// path: a data watch set when the node's Mzxid was dataM (or, absent, an
// exists watch on an absent node) and a child watch set at Pzxid childP.
type armed struct {
	data, absent bool
	dataM        int64
	child        bool
	childP       int64
}

// checkWire replays a session's record and returns every violation of the
// watch rules it can see from the wire alone:
//
//   - the nonzero zxids of replies and events never decrease (a NodeDeleted
//     replayed on reconnect carries zxid 0 and is exempt; so is the
//     ConnectResponse, which carries the server's applied index);
//   - while a watch is armed, no reply reflects a change the watch covers
//     before the event for it (a newer Mzxid/Pzxid, absence of a watched
//     node, presence of an exists-watched absent node, the session's own
//     successful write to the path or a child);
//   - every event fires a watch the session holds, with a zxid newer than the
//     state the watch was set on, and disarms it: an event with no armed
//     watch (a duplicate, an event for a getData/getChildren that returned
//     NoNode, for a removed watch...) is a violation;
//   - an event that names persistent kinds (WatchEvent.kinds 4, 8) has a
//     persistent watch (AddWatch, not removed since) on its path, or a
//     recursive one on its path or an ancestor; a recursive watch never gets
//     NodeChildrenChanged; no event arrives twice (same type, path, zxid);
//   - while a persistent or recursive watch covers a path, no reply shows
//     the path's data or creation newer than the watch before its event
//     (Mzxid), nor, for a persistent watch, its children (Pzxid).
//
// A resume (a ConnectResponse) re-arms the persistent watches at the new
// server's applied zxid.
func checkWire(msgs []wireMsg) []string {
	var bad []string
	report := func(i int, format string, args ...any) {
		bad = append(bad, fmt.Sprintf("msg %d: %s", i, fmt.Sprintf(format, args...)))
	}
	arms := map[string]*armed{}
	get := func(p string) *armed {
		a := arms[p]
		if a == nil {
			a = &armed{}
			arms[p] = a
		}
		return a
	}
	var last int64
	pers := map[string]int64{} // persistent watches: path -> zxid armed at
	rec := map[string]int64{}  // recursive watches likewise
	dataEv := map[string]int64{}
	childEv := map[string]int64{}
	type evKey struct {
		t    apipb.EventType
		p    string
		zxid int64
	}
	seen := map[evKey]bool{}
	// covered returns the zxid the oldest persistent or recursive watch on
	// p (recursive: or an ancestor) was armed at, and false if none.
	covered := func(p string, recursiveOnly bool) (int64, bool) {
		var at int64
		found := false
		take := func(z int64) {
			if !found || z < at {
				at, found = z, true
			}
		}
		if z, ok := pers[p]; ok && !recursiveOnly {
			take(z)
		}
		for q := p; ; q = path.Dir(q) {
			if z, ok := rec[q]; ok {
				take(z)
			}
			if q == "/" {
				break
			}
		}
		return at, found
	}
	for i, m := range msgs {
		switch {
		case m.connected != nil:
			// A resume re-registers the persistent watches without firing
			// what changed meanwhile (ZooKeeper's rule; the client tells its
			// readers with an EventResync): they cover changes after the
			// new server's applied zxid.
			for _, w := range []map[string]int64{pers, rec} {
				for p, z := range w {
					w[p] = max(z, m.connected.Zxid)
				}
			}
			continue
		case m.event != nil:
			ev := m.event
			if ev.Zxid != 0 {
				if ev.Zxid < last {
					report(i, "%v: zxid went backwards (last %d)", m, last)
				}
				last = ev.Zxid
				k := evKey{ev.Type, ev.Path, ev.Zxid}
				if seen[k] {
					report(i, "%v: received twice", m)
				}
				seen[k] = true
			}
			if ev.Kinds&4 != 0 {
				if _, ok := pers[ev.Path]; !ok {
					report(i, "%v: no persistent watch on the path", m)
				}
			}
			if ev.Kinds&8 != 0 {
				if ev.Type == apipb.EventType_NODE_CHILDREN_CHANGED {
					report(i, "%v: NodeChildrenChanged for a recursive watch", m)
				} else if _, ok := covered(ev.Path, true); !ok {
					report(i, "%v: no recursive watch on the path or above", m)
				}
			}
			if ev.Type == apipb.EventType_NODE_CHILDREN_CHANGED {
				childEv[ev.Path] = max(childEv[ev.Path], ev.Zxid)
			} else {
				dataEv[ev.Path] = max(dataEv[ev.Path], ev.Zxid)
			}
			if ev.Kinds != 0 && ev.Kinds&3 == 0 {
				continue // persistent kinds only: no one-shot watch involved
			}
			a := get(ev.Path)
			switch ev.Type {
			case apipb.EventType_NODE_CREATED:
				if !a.data || !a.absent {
					report(i, "%v: no exists-watch on an absent node armed", m)
				}
				a.data, a.absent = false, false
			case apipb.EventType_NODE_DATA_CHANGED:
				if !a.data || a.absent {
					report(i, "%v: no data watch armed", m)
				} else if ev.Zxid <= a.dataM {
					report(i, "%v: stale, the watch was set at mzxid %d", m, a.dataM)
				}
				a.data = false
			case apipb.EventType_NODE_CHILDREN_CHANGED:
				if !a.child {
					report(i, "%v: no child watch armed", m)
				} else if ev.Zxid <= a.childP {
					report(i, "%v: stale, the watch was set at pzxid %d", m, a.childP)
				}
				a.child = false
			case apipb.EventType_NODE_DELETED:
				if !(a.data && !a.absent) && !a.child {
					report(i, "%v: no watch armed", m)
				}
				if ev.Zxid != 0 && ((a.data && ev.Zxid <= a.dataM) || (a.child && ev.Zxid <= a.childP)) {
					report(i, "%v: stale (armed at mzxid %d / pzxid %d)", m, a.dataM, a.childP)
				}
				a.data, a.absent, a.child = false, false, false
			default:
				report(i, "%v: unknown event type", m)
			}
		case m.resp != nil:
			r, q := m.resp, m.req
			if r.Zxid != 0 {
				if r.Zxid < last {
					report(i, "%v: zxid went backwards (last %d)", m, last)
				}
				last = r.Zxid
			}
			if q == nil {
				continue
			}
			// present reports a reply showing p exists with stat st.
			present := func(p string, st *apipb.Stat) {
				if at, ok := covered(p, false); ok && st.Mzxid > at && st.Mzxid > dataEv[p] {
					report(i, "%v: shows %s at mzxid %d before its event (persistent watch set at %d)", m, p, st.Mzxid, at)
				}
				if at, ok := pers[p]; ok && st.Pzxid > at && st.Pzxid > childEv[p] {
					report(i, "%v: shows %s at pzxid %d before its event (persistent watch set at %d)", m, p, st.Pzxid, at)
				}
				a := get(p)
				if a.data && a.absent {
					report(i, "%v: shows %s exists before NodeCreated", m, p)
				}
				if a.data && !a.absent && st.Mzxid > a.dataM {
					report(i, "%v: shows %s at mzxid %d before the event (watch set at %d)", m, p, st.Mzxid, a.dataM)
				}
				if a.child && st.Pzxid > a.childP {
					report(i, "%v: shows %s at pzxid %d before the event (watch set at %d)", m, p, st.Pzxid, a.childP)
				}
			}
			absent := func(p string) {
				a := get(p)
				if (a.data && !a.absent) || a.child {
					report(i, "%v: shows %s absent before NodeDeleted", m, p)
				}
			}
			childChanged := func(p string) {
				parent := path.Dir(p)
				if a := get(parent); a.child {
					report(i, "%v: own change under %s answered before NodeChildrenChanged", m, parent)
				}
			}
			ok := r.Error == apipb.ErrorCode_OK
			switch op := q.Op.(type) {
			case *apipb.Request_GetData:
				p := op.GetData.Path
				switch {
				case ok:
					st := r.GetGetData().GetStat()
					present(p, st)
					if op.GetData.Watch {
						if a := get(p); !a.data {
							a.data, a.absent, a.dataM = true, false, st.Mzxid
						}
					}
				case r.Error == apipb.ErrorCode_NO_NODE:
					absent(p)
				}
			case *apipb.Request_Exists:
				p := op.Exists.Path
				if !ok && r.Error != apipb.ErrorCode_NO_NODE {
					continue
				}
				st := r.GetExists().GetStat()
				if st != nil {
					present(p, st)
				} else {
					absent(p)
				}
				if op.Exists.Watch {
					if a := get(p); !a.data {
						a.data, a.absent = true, st == nil
						if st != nil {
							a.dataM = st.Mzxid
						}
					}
				}
			case *apipb.Request_GetChildren:
				p := op.GetChildren.Path
				switch {
				case ok:
					st := r.GetGetChildren().GetStat()
					present(p, st)
					if op.GetChildren.Watch {
						if a := get(p); !a.child {
							a.child, a.childP = true, st.Pzxid
						}
					}
				case r.Error == apipb.ErrorCode_NO_NODE:
					absent(p)
				}
			case *apipb.Request_SetData:
				if ok {
					present(op.SetData.Path, r.GetSetData().GetStat())
				}
			case *apipb.Request_Create:
				if ok {
					p := r.GetCreate().GetPath()
					present(p, r.GetCreate().GetStat())
					childChanged(p)
				}
			case *apipb.Request_Delete:
				if ok {
					absent(op.Delete.Path)
					childChanged(op.Delete.Path)
				}
			case *apipb.Request_AddWatch:
				if ok {
					if op.AddWatch.Recursive {
						if _, had := rec[op.AddWatch.Path]; !had {
							rec[op.AddWatch.Path] = r.Zxid
						}
					} else if _, had := pers[op.AddWatch.Path]; !had {
						pers[op.AddWatch.Path] = r.Zxid
					}
				}
			case *apipb.Request_RemoveWatches:
				if ok || r.Error == apipb.ErrorCode_NO_WATCHER {
					p := op.RemoveWatches.Path
					a := get(p)
					switch op.RemoveWatches.Kind {
					case apipb.WatchKind_WATCH_DATA:
						a.data, a.absent = false, false
					case apipb.WatchKind_WATCH_CHILD:
						a.child = false
					case apipb.WatchKind_WATCH_PERSISTENT:
						delete(pers, p)
					case apipb.WatchKind_WATCH_PERSISTENT_RECURSIVE:
						delete(rec, p)
					default:
						a.data, a.absent, a.child = false, false, false
						delete(pers, p)
						delete(rec, p)
					}
				}
			}
		}
	}
	return bad
}

// assertWireOK fails t with every violation checkWire finds in w's record.
func assertWireOK(t testing.TB, name string, w *wclient) {
	t.Helper()
	msgs := w.rec.snapshot()
	bad := checkWire(msgs)
	var max int64
	for _, m := range msgs {
		if m.event != nil && m.event.Zxid > max {
			max = m.event.Zxid
		}
		if m.resp != nil && m.resp.Zxid > max {
			max = m.resp.Zxid
		}
	}
	if got := w.LastZxid(); got != max {
		bad = append(bad, fmt.Sprintf("LastZxid() = %d, but the highest zxid received is %d", got, max))
	}
	if len(bad) == 0 {
		return
	}
	if len(bad) > 20 {
		bad = append(bad[:20], fmt.Sprintf("... and %d more", len(bad)-20))
	}
	t.Errorf("session %s (0x%x): %d watch ordering violations:", name, w.SessionID(), len(bad))
	for _, b := range bad {
		t.Errorf("  %s", b)
	}
	if len(msgs) <= 200 {
		for i, m := range msgs {
			t.Logf("  record %d: %v", i, m)
		}
	}
}

// ---------------------------------------------------------------------------
// Client-side network.

var errBlocked = errors.New("clientNet: connection refused by the test")

// clientNet is the network between one client and the servers. It can
// restrict which servers the client may connect to, and freeze the traffic of
// every connection (a black hole: nothing is lost, nothing gets through)
// while refusing new ones.
type clientNet struct {
	mu       sync.Mutex
	allow    map[string]bool // nil: every server
	frozen   bool
	thawed   chan struct{} // closed while not frozen
	conns    map[*freezeConn]struct{}
	deferred []*freezeConn // closed while frozen: really closed on thaw
	shutdown bool
}

func newClientNet() *clientNet {
	th := make(chan struct{})
	close(th)
	return &clientNet{thawed: th, conns: map[*freezeConn]struct{}{}}
}

// only lets the client connect to the given servers (none: to no server).
func (n *clientNet) only(addrs ...string) {
	n.mu.Lock()
	n.allow = map[string]bool{}
	for _, a := range addrs {
		n.allow[a] = true
	}
	n.mu.Unlock()
}

// any lets the client connect to every server.
func (n *clientNet) any() {
	n.mu.Lock()
	n.allow = nil
	n.mu.Unlock()
}

// freeze stops all traffic and refuses new connections until thaw.
func (n *clientNet) freeze() {
	n.mu.Lock()
	if !n.frozen {
		n.frozen = true
		n.thawed = make(chan struct{})
	}
	n.mu.Unlock()
}

func (n *clientNet) thaw() {
	n.mu.Lock()
	was := n.frozen
	if n.frozen {
		n.frozen = false
		close(n.thawed)
	}
	conns := make([]*freezeConn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	deferred := n.deferred
	n.deferred = nil
	n.mu.Unlock()
	if was {
		for _, c := range conns {
			c.flush()
		}
	}
	for _, c := range deferred {
		c.Conn.Close()
	}
}

// close thaws and closes every connection (test cleanup).
func (n *clientNet) close() {
	n.mu.Lock()
	n.shutdown = true
	conns := make([]*freezeConn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	n.thaw()
	for _, c := range conns {
		c.Close()
	}
}

func (n *clientNet) dial(ctx context.Context, addr string) (net.Conn, error) {
	n.mu.Lock()
	ok := !n.frozen && !n.shutdown && (n.allow == nil || n.allow[addr])
	n.mu.Unlock()
	if !ok {
		return nil, errBlocked
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	fc := &freezeConn{Conn: c, n: n, closed: make(chan struct{})}
	n.mu.Lock()
	n.conns[fc] = struct{}{}
	n.mu.Unlock()
	return fc, nil
}

// wait blocks while the network is frozen; false if c was closed meanwhile.
func (n *clientNet) wait(c *freezeConn) bool {
	n.mu.Lock()
	th := n.thawed
	n.mu.Unlock()
	select {
	case <-th:
		return true
	case <-c.closed:
		return false
	}
}

// freezeConn is a connection through a clientNet. While the network is
// frozen it behaves like a black-holed TCP connection: writes succeed (the
// bytes wait in a buffer, as in a socket's send buffer, and go out on thaw),
// reads get nothing.
type freezeConn struct {
	net.Conn
	n         *clientNet
	closeOnce sync.Once
	closed    chan struct{}
	wmu       sync.Mutex
	pending   []byte
}

func (c *freezeConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	if !c.n.wait(c) {
		return 0, net.ErrClosed
	}
	return k, err
}

func (c *freezeConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.n.mu.Lock()
	frozen := c.n.frozen
	c.n.mu.Unlock()
	if frozen {
		c.pending = append(c.pending, p...)
		return len(p), nil
	}
	if len(c.pending) > 0 {
		if _, err := c.Conn.Write(c.pending); err != nil {
			return 0, err
		}
		c.pending = nil
	}
	return c.Conn.Write(p)
}

// flush sends what was written while frozen.
func (c *freezeConn) flush() {
	_, _ = c.Write(nil)
}

// Close closes the connection; while the network is frozen the peer does
// not learn of it (no FIN gets through a black hole) until thaw.
func (c *freezeConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.n.mu.Lock()
		if c.n.frozen {
			c.n.deferred = append(c.n.deferred, c)
		}
		frozen := c.n.frozen
		delete(c.n.conns, c)
		c.n.mu.Unlock()
		if !frozen {
			c.Conn.Close()
		}
	})
	return nil
}

// ---------------------------------------------------------------------------
// Sessions.

// wclient is a session with a wire recorder and its own client network.
type wclient struct {
	*client.Client
	rec *wireRec
	net *clientNet
}

type wopts struct {
	pin     string        // connect only to this server (then any may be used)
	timeout time.Duration // requested session timeout (default 4s)
	keepPin bool          // keep the pin after connecting
	opts    []client.Option
}

// wconnect opens a recorded session on c's servers.
func wconnect(t testing.TB, servers []string, o wopts) *wclient {
	t.Helper()
	rec := newWireRec()
	cn := newClientNet()
	if o.pin != "" {
		cn.only(o.pin)
	}
	if o.timeout == 0 {
		o.timeout = 4 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := client.Connect(ctx, servers, append([]client.Option{
		client.WithSessionTimeout(o.timeout),
		client.WithDialOptions(grpc.WithContextDialer(cn.dial), grpc.WithStreamInterceptor(rec.interceptor))}, o.opts...)...)
	if err != nil {
		t.Fatalf("connect %v: %v", servers, err)
	}
	if o.pin != "" && !o.keepPin {
		cn.any()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cn.thaw()
		_ = cl.Close(ctx)
		cn.close()
	})
	return &wclient{Client: cl, rec: rec, net: cn}
}

// memberOf returns the index of the member a session is connected to.
func memberOf(c *Cluster, cl *client.Client) int {
	for i, m := range c.Members {
		if m.Cfg.ClientAddr == cl.Server() {
			return i
		}
	}
	return -1
}

// watchLen is member i's watch count (0 when it is stopped).
func watchLen(c *Cluster, i int) int {
	if n := c.Members[i].Node(); n != nil {
		return n.Watches().Len()
	}
	return 0
}

// totalWatchLen sums the watch counts of the running members.
func totalWatchLen(c *Cluster) int {
	total := 0
	for i := range c.Members {
		total += watchLen(c, i)
	}
	return total
}

// waitApplied waits until every running member applied idx.
func waitApplied(t testing.TB, c *Cluster, idx int64) {
	t.Helper()
	done := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(done) })
	defer timer.Stop()
	for i, m := range c.Members {
		if n := m.Node(); n != nil && !n.FSM().WaitApplied(done, idx) {
			t.Fatalf("member %d did not apply %d (at %d)", i, idx, n.FSM().AppliedIndex())
		}
	}
}

// ---------------------------------------------------------------------------
// Waiting on watch channels.

// recvEvent waits up to d for ch's event and checks the channel is closed
// after it.
func recvEvent(t testing.TB, ch <-chan client.Event, d time.Duration, what string) client.Event {
	t.Helper()
	if ch == nil {
		t.Fatalf("%s: nil watch channel", what)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed without an event", what)
		}
		select {
		case ev2, ok := <-ch:
			if ok {
				t.Fatalf("%s: second event on a one-shot channel: %+v after %+v", what, ev2, ev)
			}
		case <-timer.C:
			t.Fatalf("%s: channel not closed after its event", what)
		}
		return ev
	case <-timer.C:
		t.Fatalf("%s: no event within %v", what, d)
	}
	return client.Event{}
}

// expectEvent waits for ch's event and checks its type, path and (when
// zxid >= 0) zxid.
func expectEvent(t testing.TB, ch <-chan client.Event, typ client.EventType, p string, zxid int64, what string) client.Event {
	t.Helper()
	ev := recvEvent(t, ch, 5*time.Second, what)
	if ev.Type != typ || ev.Path != p || (zxid >= 0 && ev.Zxid != zxid) {
		t.Fatalf("%s: got %v %s zxid=%d, want %v %s zxid=%d", what, ev.Type, ev.Path, ev.Zxid, typ, p, zxid)
	}
	return ev
}

// noEvent checks that ch has nothing pending (it must not have fired yet).
func noEvent(t testing.TB, ch <-chan client.Event, what string) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		t.Fatalf("%s: unexpected event %+v (open=%v)", what, ev, ok)
	default:
	}
}

// marker proves the absence of events: w watches path, by changes it, and
// w's marker event arrives. Any event the server queued for w for an earlier
// change was sent before it (per-session order), so once the marker is in,
// the record shows every earlier event. It returns the marker's zxid.
func marker(t testing.TB, ctx context.Context, w *wclient, by *client.Client, p string) int64 {
	t.Helper()
	if _, err := by.Create(ctx, p, nil, client.CreateMode{}); err != nil && !errors.Is(err, client.ErrNodeExists) {
		t.Fatalf("marker create: %v", err)
	}
	if err := w.Sync(ctx, p); err != nil {
		t.Fatalf("marker sync: %v", err)
	}
	_, _, ch, err := w.GetW(ctx, p)
	if err != nil {
		t.Fatalf("marker GetW: %v", err)
	}
	st, err := by.Set(ctx, p, []byte("m"), -1)
	if err != nil {
		t.Fatalf("marker set: %v", err)
	}
	expectEvent(t, ch, client.EventNodeDataChanged, p, st.Mzxid, "marker")
	return st.Mzxid
}

// noWireEvents fails when w received any event for the given paths.
func noWireEvents(t testing.TB, w *wclient, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if evs := w.rec.events(p); len(evs) > 0 {
			t.Errorf("unexpected events for %s: %v", p, evs)
		}
	}
}
