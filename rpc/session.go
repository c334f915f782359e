package rpc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
	"github.com/coordd/coordd/watch"
)

// maxOutbox bounds the messages queued for one client; a client that reads
// slower than that is disconnected (it reconnects and re-registers).
const maxOutbox = 1 << 16

// sessionTable tracks the sessions connected to this server and is the
// FSM's Observer: it routes each applied entry's replies and watch events
// to the connected sessions.
type sessionTable struct {
	n *Node

	mu       sync.Mutex
	conns    map[int64]*conn
	openWait map[string]chan session.Info // keyed by password
	// touched maps each session heard from since the last touch batch to
	// the highest xid it sent meanwhile (0: none, only a connect).
	touched map[int64]int64
}

func newSessionTable(n *Node) *sessionTable {
	return &sessionTable{
		n:        n,
		conns:    make(map[int64]*conn),
		openWait: make(map[string]chan session.Info),
		touched:  make(map[int64]int64),
	}
}

func (t *sessionTable) get(id int64) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conns[id]
}

// Applied implements fsm.Observer. The FSM's write lock is held.
func (t *sessionTable) Applied(a *fsm.Applied) {
	t.n.leader.applied(a)
	if a.Opened != nil {
		t.mu.Lock()
		if ch, ok := t.openWait[string(a.Opened.Password)]; ok {
			delete(t.openWait, string(a.Opened.Password))
			ch <- *a.Opened
		}
		t.mu.Unlock()
	}
	for _, nt := range a.Notifications {
		if c := t.get(nt.Session); c != nil {
			c.pushEvent(nt.Event)
		}
	}
	if a.Session != 0 && a.Result != nil {
		if c := t.get(a.Session); c != nil {
			c.completeWrite(a.Xid, a.Result, a.Tree, a.Index)
		}
	}
	for _, id := range a.Closed {
		c := t.get(id)
		switch {
		case c == nil:
		case a.Session == id && a.Xid != 0:
			c.end(nil) // closed at its client's request: the reply said so
		default:
			c.end(errResponse(0, apipb.ErrorCode_SESSION_EXPIRED, "session expired"))
		}
	}
}

// Restored implements fsm.Observer: the state was replaced wholesale, so
// every connected client must reconnect and re-register its watches.
func (t *sessionTable) Restored() {
	t.n.leader.restored()
	for _, c := range t.all() {
		c.end(nil)
	}
}

func (t *sessionTable) all() []*conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*conn, 0, len(t.conns))
	for _, c := range t.conns {
		out = append(out, c)
	}
	return out
}

// local returns the ids of the sessions connected here.
func (t *sessionTable) local() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int64, 0, len(t.conns))
	for id := range t.conns {
		out = append(out, id)
	}
	return out
}

func (t *sessionTable) closeAll() {
	for _, c := range t.all() {
		c.end(nil)
	}
}

// touch records that the session was heard from, with the xid of the
// request that arrived (0 for a connect).
func (t *sessionTable) touch(id, xid int64) {
	t.mu.Lock()
	t.touched[id] = max(t.touched[id], xid)
	t.mu.Unlock()
}

// vouchInterval is how often the sessions heard from are passed to the
// leader, and vouched for once it confirms them (apipb.Vouch).
func (t *sessionTable) vouchInterval() time.Duration { return t.n.cfg.Tick / 2 }

// runTouches passes the sessions heard from to the leader every vouch
// interval and, once the leader confirms it refreshed their deadlines in a
// term a majority confirmed after that, vouches for them to their clients.
//
// A batch is taken only after the previous one was answered, so a slow
// leader delays the vouches (the clients then suspend early: safe) rather
// than piling up batches. A server cut off from the leader vouches for
// nothing: its touches fail, and are kept for the next round.
func (t *sessionTable) runTouches() {
	tk := time.NewTicker(t.vouchInterval())
	defer tk.Stop()
	for {
		select {
		case <-t.n.ctx.Done():
			return
		case <-tk.C:
		}
		t.mu.Lock()
		if len(t.touched) == 0 {
			t.mu.Unlock()
			continue
		}
		batch := t.touched
		t.touched = make(map[int64]int64, len(batch))
		t.mu.Unlock()
		ids := make([]int64, 0, len(batch))
		for id := range batch {
			ids = append(ids, id)
		}
		confirmed, err := t.passTouches(ids)
		if err != nil {
			// Keep them for the next round: the leader may be changing.
			t.mu.Lock()
			for id, xid := range batch {
				t.touched[id] = max(t.touched[id], xid)
			}
			t.mu.Unlock()
			continue
		}
		if confirmed {
			t.vouch(batch)
		}
	}
}

// passTouches refreshes the sessions' deadlines on the leader (this server
// or another) and reports whether the leader then had its term confirmed
// by a majority, so that the sessions may be vouched for.
func (t *sessionTable) passTouches(ids []int64) (confirmed bool, err error) {
	n := t.n
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Tick)
	defer cancel()
	if n.leader.touch(ids) {
		// The round starts after the touches were recorded: a majority then
		// confirms that no later leader existed when they were.
		if _, err := n.leaderReadIndex(ctx); err != nil {
			return false, nil // recorded, but not confirmed: no vouch
		}
		return true, nil
	}
	return n.peers.touchLeader(ctx, ids)
}

// vouch tells each session of batch connected here that the leader has
// confirmed hearing from it as of the xid recorded.
func (t *sessionTable) vouch(batch map[int64]int64) {
	for id, xid := range batch {
		if xid == 0 {
			continue
		}
		if c := t.get(id); c != nil && c.vouches {
			c.mu.Lock()
			c.pushLocked(&apipb.ServerMessage{Kind: &apipb.ServerMessage_Vouch{Vouch: &apipb.Vouch{Xid: xid}}})
			c.mu.Unlock()
		}
	}
}

// open proposes a new session and waits for it to be applied here.
func (t *sessionTable) open(ctx context.Context, timeout time.Duration) (session.Info, error) {
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return session.Info{}, err
	}
	ch := make(chan session.Info, 1)
	t.mu.Lock()
	t.openWait[string(pw)] = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.openWait, string(pw))
		t.mu.Unlock()
	}()
	t.n.prop.submit(&cmdpb.Command{Cmd: &cmdpb.Command_OpenSession{OpenSession: &cmdpb.OpenSession{TimeoutMs: timeout.Milliseconds(), Password: pw}}})
	wait := time.NewTimer(max(5*time.Second, timeout))
	defer wait.Stop()
	select {
	case info := <-ch:
		return info, nil
	case <-wait.C:
		return session.Info{}, errors.New("timed out opening the session")
	case <-ctx.Done():
		return session.Info{}, ctx.Err()
	}
}

// Entry kinds of a session's request queue.
const (
	kindRead  = iota // runs on the local tree when it reaches the head
	kindWrite        // completes when the local FSM applies it
	kindSync         // completes when the local FSM reaches the leader's read index
	kindDone         // answered already (rejected locally)
)

type entry struct {
	req        *apipb.Request
	kind       int
	resp       *apipb.Response
	dispatched bool
	cmd        *cmdpb.Command
}

// conn is one session connected to this server: its ordered request queue
// and its outbound stream.
type conn struct {
	t  *sessionTable
	id int64
	// vouches: the client asked for Vouch messages.
	vouches bool

	mu      sync.Mutex
	queue   []*entry
	out     []*apipb.ServerMessage
	wake    chan struct{}
	ended   bool
	done    chan struct{}
	lastXid int64
}

func newConn(t *sessionTable, id int64) *conn {
	return &conn{t: t, id: id, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// pushLocked queues a message for the client; c.mu is held.
func (c *conn) pushLocked(m *apipb.ServerMessage) {
	if c.ended {
		return
	}
	if len(c.out) >= maxOutbox {
		c.t.n.log.Warn("client too slow, dropping its connection", "session", c.id)
		c.endLocked()
		return
	}
	c.out = append(c.out, m)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) pushEvent(ev tree.Event) {
	c.mu.Lock()
	c.pushLocked(&apipb.ServerMessage{Kind: &apipb.ServerMessage_Event{Event: &apipb.WatchEvent{
		Type: apipb.EventType(ev.Type), Path: ev.Path, Zxid: ev.Zxid,
	}}})
	c.mu.Unlock()
}

// end stops the connection after what is queued (and final, if given) has
// been sent.
func (c *conn) end(final *apipb.Response) {
	c.mu.Lock()
	if final != nil {
		c.pushLocked(&apipb.ServerMessage{Kind: &apipb.ServerMessage_Response{Response: final}})
	}
	c.endLocked()
	c.mu.Unlock()
}

func (c *conn) endLocked() {
	if !c.ended {
		c.ended = true
		close(c.done)
	}
}

// enqueue adds a request in arrival order and starts what can start.
func (c *conn) enqueue(req *apipb.Request) {
	e := &entry{req: req, kind: kindRead}
	n := c.t.n
	switch req.Op.(type) {
	case nil:
		e.kind, e.resp = kindDone, errResponse(req.Xid, apipb.ErrorCode_BAD_ARGUMENTS, "request without an operation")
	case *apipb.Request_Sync:
		e.kind = kindSync
	case *apipb.Request_Close:
		e.kind = kindWrite
		e.cmd = &cmdpb.Command{Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: c.id, Xid: req.Xid}}}
	case *apipb.Request_GetData, *apipb.Request_Exists, *apipb.Request_GetChildren, *apipb.Request_Ping, *apipb.Request_RemoveWatches:
	default:
		if size := dataSize(req); size > n.fsm.MaxDataSize() {
			e.kind, e.resp = kindDone, errResponse(req.Xid, apipb.ErrorCode_BAD_ARGUMENTS,
				fmt.Sprintf("data length %d exceeds the limit of %d bytes", size, n.fsm.MaxDataSize()))
			break
		}
		// This server's limit on a request, checked whole, since its ops'
		// data may each be within MaxDataSize. The peer port and the log
		// take any write a server admits (fsm.DataSizeCap).
		if size, limit := proto.Size(req), n.cfg.maxMessageSize(); size > limit {
			e.kind, e.resp = kindDone, errResponse(req.Xid, apipb.ErrorCode_BAD_ARGUMENTS,
				fmt.Sprintf("request of %d bytes exceeds the limit of %d bytes", size, limit))
			break
		}
		if n.cfg.DisableTTL && createsTTL(req) {
			e.kind, e.resp = kindDone, errResponse(req.Xid, apipb.ErrorCode_UNIMPLEMENTED, "TTL nodes are disabled on this server (--ttl-nodes=false)")
			break
		}
		w, _ := writeToCmd(c.id, req)
		e.kind = kindWrite
		e.cmd = &cmdpb.Command{Cmd: &cmdpb.Command_Write{Write: w}}
	}
	c.mu.Lock()
	syncPending := false
	for _, q := range c.queue {
		if q.kind == kindSync && q.resp == nil {
			syncPending = true
		}
	}
	c.queue = append(c.queue, e)
	if e.kind == kindWrite && !syncPending {
		e.dispatched = true
		n.prop.submit(e.cmd)
	}
	if e.kind == kindSync {
		go c.runSync(e)
	}
	ready := c.queue[0].kind == kindRead || c.queue[0].resp != nil
	c.mu.Unlock()
	if ready {
		n.fsm.Read(func(v fsm.View) {
			c.mu.Lock()
			c.drainLocked(v.Tree, v.Watches, v.Applied)
			c.mu.Unlock()
		})
	}
}

// runSync waits until this server has applied everything the leader had
// committed when the sync started, then completes the entry.
func (c *conn) runSync(e *entry) {
	n := c.t.n
	resp := &apipb.Response{Xid: e.req.Xid, Result: &apipb.Response_Sync{Sync: &apipb.SyncResponse{Path: e.req.GetSync().Path}}}
	idx, err := n.readIndex(c.done)
	if err != nil {
		resp = errResponse(e.req.Xid, apipb.ErrorCode_CONNECTION_LOSS, "sync: "+err.Error())
	} else if !n.fsm.WaitApplied(c.done, idx) {
		return
	}
	n.fsm.Read(func(v fsm.View) {
		c.mu.Lock()
		e.resp = resp
		c.drainLocked(v.Tree, v.Watches, v.Applied)
		c.mu.Unlock()
	})
}

// completeWrite records the FSM's result for the write with this xid and
// answers whatever is now at the head. Called with the FSM's write lock held.
func (c *conn) completeWrite(xid int64, r *cmdpb.Result, t *tree.Tree, applied int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.queue {
		if e.kind == kindWrite && e.req.Xid == xid && e.resp == nil {
			e.resp = resultToAPI(e.req, r)
			break
		}
	}
	c.drainLocked(t, c.t.n.fsm.Watches(), applied)
}

// drainLocked answers the queue from its head for as long as it can: done
// entries are sent, reads run now (the caller holds the FSM lock, read or
// write, so they see a consistent state), a pending write or sync stops it.
func (c *conn) drainLocked(t *tree.Tree, w *watch.Manager, applied int64) {
	if c.ended {
		return // nothing more is sent, and no watch may be left behind
	}
	popped := false
	for len(c.queue) > 0 {
		e := c.queue[0]
		if e.resp == nil {
			if e.kind != kindRead {
				break
			}
			e.resp = c.read(e.req, t, w)
		}
		if e.kind != kindWrite {
			e.resp.Zxid = applied
		}
		e.resp.Xid = e.req.Xid
		c.pushLocked(&apipb.ServerMessage{Kind: &apipb.ServerMessage_Response{Response: e.resp}})
		c.queue[0] = nil
		c.queue = c.queue[1:]
		popped = true
		if e.kind == kindSync {
			c.dispatchHeldLocked()
		}
	}
	if popped && len(c.queue) == 0 {
		c.queue = nil
	}
}

// dispatchHeldLocked proposes the writes that waited behind a sync.
func (c *conn) dispatchHeldLocked() {
	for _, e := range c.queue {
		if e.kind == kindSync && e.resp == nil {
			return
		}
		if e.kind == kindWrite && !e.dispatched {
			e.dispatched = true
			c.t.n.prop.submit(e.cmd)
		}
	}
}

// replyOverhead is more than a reply's encoding adds to its data or names:
// the stat, the xid, the message's own framing.
const replyOverhead = 1 << 10

// oversize returns an error reply for resp's request if a reply carrying
// size bytes of data or names could exceed what the server may send, and
// nil otherwise. Such a request fails and registers no watch; the session
// and its stream go on (gRPC would end a stream whose message is over the
// limit, and the client would resend the read on the next one, forever).
func (c *conn) oversize(resp *apipb.Response, size int) *apipb.Response {
	limit := c.t.n.cfg.wireLimit()
	if size+replyOverhead <= limit {
		return nil
	}
	resp.Error = apipb.ErrorCode_MARSHALLING_ERROR
	resp.Message = fmt.Sprintf("reply too large: %d bytes of data or child names, and this server sends at most %d", size, limit-replyOverhead)
	return resp
}

// read runs a read-only request against the local tree.
func (c *conn) read(req *apipb.Request, t *tree.Tree, w *watch.Manager) *apipb.Response {
	resp := &apipb.Response{Xid: req.Xid}
	fail := func(err error) *apipb.Response {
		resp.Error, resp.Message = treeErrCode(err), fsm.Detail(err)
		return resp
	}
	if req.GetPing() == nil {
		if err := tree.ValidatePath(readPath(req)); err != nil {
			return fail(err)
		}
	}
	switch op := req.Op.(type) {
	case *apipb.Request_GetData:
		data, st, err := t.Get(op.GetData.Path)
		if err != nil {
			return fail(err)
		}
		if r := c.oversize(resp, len(data)); r != nil {
			return r
		}
		if op.GetData.Watch {
			w.Add(c.id, op.GetData.Path, watch.Data)
		}
		resp.Result = &apipb.Response_GetData{GetData: &apipb.GetDataResponse{Data: data, Stat: statToAPI(st)}}
	case *apipb.Request_Exists:
		st, err := t.Exists(op.Exists.Path)
		if err != nil && !errors.Is(err, tree.ErrNoNode) {
			return fail(err)
		}
		if op.Exists.Watch {
			w.Add(c.id, op.Exists.Path, watch.Data)
		}
		er := &apipb.ExistsResponse{}
		if err == nil {
			er.Stat = statToAPI(st)
		}
		resp.Result = &apipb.Response_Exists{Exists: er}
	case *apipb.Request_GetChildren:
		names, st, err := t.Children(op.GetChildren.Path)
		if err != nil {
			return fail(err)
		}
		size := 0
		for _, name := range names {
			size += len(name) + 3 // the name, its tag and its length
		}
		if r := c.oversize(resp, size); r != nil {
			return r
		}
		if op.GetChildren.Watch {
			w.Add(c.id, op.GetChildren.Path, watch.Child)
		}
		resp.Result = &apipb.Response_GetChildren{GetChildren: &apipb.GetChildrenResponse{Children: names, Stat: statToAPI(st)}}
	case *apipb.Request_RemoveWatches:
		kind := watch.Any
		switch op.RemoveWatches.Kind {
		case apipb.WatchKind_WATCH_DATA:
			kind = watch.Data
		case apipb.WatchKind_WATCH_CHILD:
			kind = watch.Child
		}
		if !w.Remove(c.id, op.RemoveWatches.Path, kind) {
			resp.Error, resp.Message = apipb.ErrorCode_NO_WATCHER, "no watch of that kind on "+op.RemoveWatches.Path
		}
	case *apipb.Request_Ping:
	}
	return resp
}

// readPath is the path a local request names ("" for a ping).
func readPath(req *apipb.Request) string {
	switch op := req.Op.(type) {
	case *apipb.Request_GetData:
		return op.GetData.Path
	case *apipb.Request_Exists:
		return op.Exists.Path
	case *apipb.Request_GetChildren:
		return op.GetChildren.Path
	case *apipb.Request_RemoveWatches:
		return op.RemoveWatches.Path
	}
	return ""
}
