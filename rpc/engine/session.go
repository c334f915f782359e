package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/tree"
)

// maxOutbox bounds the messages queued for one client; a client that reads
// slower than that is disconnected (it reconnects and re-registers).
const maxOutbox = 1 << 16

// Entry kinds of a session's request queue.
const (
	kindRead  = iota // runs on the local tree when it reaches the head
	kindWrite        // completes when the local FSM applies it
	kindSync         // completes when the local FSM reaches the leader's read index
	kindDone         // answered already (rejected locally)
)

type entry struct {
	req        *Request
	kind       int
	resp       *Response
	dispatched bool
	cmd        *cmdpb.Command
	// key is the xid the command carries in the log, which its result
	// comes back with: the client's xid, or the connection's own number
	// of the request (Session.epoch set), given when it is dispatched.
	key     int64
	arrived time.Time
}

// Session is one session connected to this server, over either protocol:
// its ordered request queue and its outbound queue.
//
// Requests run in the order they were submitted: a read when it reaches the
// head of the queue, a write as soon as it is submitted (writes pipeline)
// and answered when this server's FSM applies it, a sync once this server
// has applied the leader's read index. Replies leave strictly in request
// order, so a read waits behind the session's earlier writes.
type Session struct {
	e       *Engine
	id      int64
	vouches bool
	// conn is what the front-end knows of the connection (its ip and
	// verified certificate subject): set before the session is shown to
	// anyone, never changed.
	conn auth.Conn

	// epoch, when not 0, is the connection's epoch (ConnectRequest.
	// ClientRetries false, cluster level 2): its commands carry it and the
	// connection's own numbers (seq), not the client's xids. Set before
	// the session is shown to anyone, never changed.
	epoch int64

	mu    sync.Mutex
	seq   int64 // the last number given to a command of the connection
	queue []*entry
	out   []Message
	wake  chan struct{}
	ended bool
	done  chan struct{}
}

func newSession(e *Engine, id int64, vouches bool) *Session {
	return &Session{e: e, id: id, vouches: vouches, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// ID returns the session's id.
func (s *Session) ID() int64 { return s.id }

// Done is closed when the session's connection has ended (see End).
func (s *Session) Done() <-chan struct{} { return s.done }

// pushLocked queues a message for the client; s.mu is held.
func (s *Session) pushLocked(m Message) {
	if s.ended {
		return
	}
	if len(s.out) >= maxOutbox {
		s.e.log.Warn("client too slow, dropping its connection", "session", s.id)
		s.endLocked()
		return
	}
	s.out = append(s.out, m)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// mayRead reports whether the session may READ a node with acl, given the
// identities in a's registry (or, for a session a closed, those it held
// until then): a watch event is delivered only then (ZooKeeper 3.8.4 and
// 3.9.2, CVE-2024-23944: an event tells the path, which a recursive watch
// would otherwise show of nodes the watcher may not read). An open ACL
// costs no check.
func (s *Session) mayRead(acl *[]tree.ACL, a *fsm.Applied) bool {
	if acl == nil || len(*acl) == 0 || tree.IsOpen(*acl) {
		return true
	}
	r := s.requester(fsm.View{Sessions: a.Sessions})
	if ids, ok := a.ClosedIdentities[s.id]; ok {
		r.IDs = ids
	}
	return r.Allowed(*acl, tree.PermRead)
}

func (s *Session) pushEvent(ev Event) {
	s.mu.Lock()
	s.pushLocked(Message{Event: &ev})
	s.mu.Unlock()
}

// End stops the connection after what is queued (and final, if given) has
// been sent: Next returns the rest with ended set.
func (s *Session) End(final *Response) {
	s.mu.Lock()
	if final != nil {
		s.pushLocked(Message{Final: final})
	}
	s.endLocked()
	s.mu.Unlock()
}

func (s *Session) endLocked() {
	if !s.ended {
		s.ended = true
		close(s.done)
		// What is still queued is never answered now.
		s.e.outstanding.Add(-int64(len(s.queue)))
	}
}

// Next waits for messages to send and returns them in order, with ended
// set once the connection has ended (the messages are then the last).
// It returns (nil, true) when ctx ends.
func (s *Session) Next(ctx context.Context) ([]Message, bool) {
	for {
		s.mu.Lock()
		batch, ended := s.out, s.ended
		s.out = nil
		s.mu.Unlock()
		if len(batch) > 0 || ended {
			if len(batch) > 0 {
				s.e.cfg.Meter.Sent(len(batch))
			}
			return batch, ended
		}
		select {
		case <-s.wake:
		case <-s.done:
		case <-ctx.Done():
			return nil, true
		}
	}
}

// Submit adds a request in arrival order and starts what can start. The
// front-end calls it from one goroutine, in the order the requests arrived.
func (s *Session) Submit(req *Request) {
	e := s.e
	e.cfg.Meter.Received()
	e.touch(s.id, req.Xid)
	en := &entry{req: req, kind: kindRead, arrived: time.Now()}
	switch {
	case req.Op == OpSync, req.Op == OpReconfig:
		en.kind = kindSync
	case req.Op == OpClose:
		en.kind = kindWrite
		en.cmd = &cmdpb.Command{Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: s.id, Xid: req.Xid, Server: e.cfg.ServerID}}}
	case req.Op == OpAddAuth:
		en.kind, en.resp, en.cmd = s.addAuth(req)
	case req.Op.IsWrite():
		if resp := s.admit(req); resp != nil {
			en.kind, en.resp = kindDone, resp
			break
		}
		w, err := writeToCmd(s.id, s.conn, req)
		if err != nil {
			en.kind, en.resp = kindDone, errResponse(req, BadArguments, err.Error())
			break
		}
		w.Server = e.cfg.ServerID
		en.kind = kindWrite
		en.cmd = &cmdpb.Command{Cmd: &cmdpb.Command_Write{Write: w}}
	}
	s.enqueue(en)
}

// addAuth turns an addAuth into the identities it adds, as ZooKeeper's
// authentication providers decide them on the server the client talks to:
// digest adds digest:user:base64(sha1(user:password)), and super first when
// that is this server's super digest; ip and x509 add nothing (they are the
// connection's own identities), x509 failing without a verified client
// certificate; sasl, whose identities come only from a SASL exchange
// (Authenticate), and any other scheme fail with AuthFailed. The identities go
// through the log (the command), so that every server checks the session's
// later writes alike; the credentials never do. It returns the entry's kind
// and either its reply (kindDone) or its command (kindWrite).
func (s *Session) addAuth(req *Request) (int, *Response, *cmdpb.Command) {
	var ids []*cmdpb.Identity
	switch req.AuthScheme {
	case auth.SchemeDigest:
		digest := auth.Digest(req.Auth)
		if super := s.e.cfg.SuperDigest; super != "" && digest == super {
			ids = append(ids, &cmdpb.Identity{Scheme: auth.SchemeSuper})
		}
		ids = append(ids, &cmdpb.Identity{Scheme: auth.SchemeDigest, Id: digest})
	case auth.SchemeIP:
		return kindDone, &Response{}, nil
	case auth.SchemeX509:
		if s.conn.X509 != "" {
			return kindDone, &Response{}, nil
		}
		return kindDone, errResponse(req, AuthFailed, "x509: the connection has no verified client certificate"), nil
	case auth.SchemeSASL:
		// ZooKeeper's SASLAuthenticationProvider refuses it too: a sasl
		// identity comes only from a SASL exchange (Authenticate).
		return kindDone, errResponse(req, AuthFailed, "sasl: authenticate with ZooKeeper's SASL exchange, not addAuth"), nil
	default:
		scheme := req.AuthScheme
		if len(scheme) > 64 {
			scheme = scheme[:64] + "..."
		}
		return kindDone, errResponse(req, AuthFailed, fmt.Sprintf("unknown authentication scheme %q (digest, ip, x509)", scheme)), nil
	}
	return kindWrite, nil, &cmdpb.Command{Cmd: &cmdpb.Command_AddAuth{AddAuth: &cmdpb.AddAuth{SessionId: s.id, Xid: req.Xid, Ids: ids, Server: s.e.cfg.ServerID}}}
}

// Reject queues an error reply for a request the front-end could not make
// sense of, in its place among the session's replies.
func (s *Session) Reject(req *Request, code Code, msg string) {
	s.e.cfg.Meter.Received()
	s.e.touch(s.id, req.Xid)
	s.enqueue(&entry{req: req, kind: kindDone, resp: errResponse(req, code, msg), arrived: time.Now()})
}

// enqueue adds an entry at the tail and starts what can start.
func (s *Session) enqueue(en *entry) {
	e := s.e
	s.mu.Lock()
	syncPending := false
	for _, q := range s.queue {
		if q.kind == kindSync && q.resp == nil {
			syncPending = true
		}
	}
	s.queue = append(s.queue, en)
	if !s.ended {
		// Counted while the session is connected: endLocked takes back
		// what is left in the queue.
		e.outstanding.Add(1)
	}
	if en.kind == kindWrite && !syncPending {
		s.dispatchLocked(en)
	}
	if en.kind == kindSync {
		go s.runSync(en)
	}
	ready := s.queue[0].kind == kindRead || s.queue[0].resp != nil
	s.mu.Unlock()
	if ready {
		e.cfg.FSM.Read(func(v fsm.View) {
			s.mu.Lock()
			s.drainLocked(v)
			s.mu.Unlock()
		})
	}
}

// admit checks a write against this server's limits before it enters the
// log, and returns the error reply if it fails them. Nothing after this
// checks them again: servers may differ in their limits, and every server
// applies what another admitted.
func (s *Session) admit(req *Request) *Response {
	cfg := &s.e.cfg
	if size, limit := dataSize(req), cfg.FSM.MaxDataSize(); size > limit {
		return errResponse(req, BadArguments, fmt.Sprintf("data length %d exceeds the limit of %d bytes", size, limit))
	}
	// The request's size, checked whole: its ops' data may each be within
	// the data limit.
	if size, limit := requestSize(req), cfg.MaxRequestSize; limit > 0 && size > limit {
		return errResponse(req, BadArguments, fmt.Sprintf("request of %d bytes exceeds the limit of %d bytes", size, limit))
	}
	if req.Op == OpSetACL && len(req.ACL) == 0 {
		if err := tree.ValidatePath(req.Path); err != nil {
			return errResponse(req, BadArguments, fsm.Detail(err))
		}
		return errResponse(req, InvalidACL, "an ACL needs at least one entry")
	}
	if cfg.DisableTTL && createsTTL(req) {
		return errResponse(req, Unimplemented, "TTL nodes are disabled on this server (--ttl-nodes=false)")
	}
	return nil
}

// runSync waits until this server has applied everything the leader had
// committed when the sync started, then completes the entry.
func (s *Session) runSync(en *entry) {
	e := s.e
	resp := &Response{Xid: en.req.Xid, Op: en.req.Op, Path: en.req.Path}
	var idx int64
	var err error
	if en.req.Op == OpReconfig {
		idx, err = s.reconfig(en.req.Reconfig)
	} else {
		idx, err = e.cfg.Cluster.ReadIndex(s.done)
	}
	var ce *Error
	switch {
	case errors.As(err, &ce):
		resp = errResponse(en.req, ce.Code, ce.Message)
	case err != nil:
		resp = errResponse(en.req, ConnectionLoss, en.req.Op.String()+": "+err.Error())
	case !e.cfg.FSM.WaitApplied(s.done, idx):
		return
	case en.req.Op == OpReconfig:
		// The new configuration, as a getConfig after it would read it.
		e.cfg.FSM.Read(func(v fsm.View) {
			data, st, _ := v.Tree.Get(systemConfig)
			resp.Data, resp.Stat = data, &st
		})
	}
	e.cfg.FSM.Read(func(v fsm.View) {
		s.mu.Lock()
		en.resp = resp
		s.drainLocked(v)
		s.mu.Unlock()
	})
}

// reconfig makes a reconfig's membership change and returns the index of
// the new configuration. Only the super user may, as in ZooKeeper, whose
// reconfig needs WRITE on /zookeeper/config, readable by all and writable
// by none; as there, that is asked only of a request that passes its
// checks (checkReconfig).
func (s *Session) reconfig(r Reconfig) (int64, error) {
	super := false
	var err error
	s.e.cfg.FSM.Read(func(v fsm.View) {
		if err = checkReconfig(v, r); err == nil {
			super = s.requester(v).Super()
		}
	})
	if err != nil {
		return 0, err
	}
	if !super {
		return 0, &Error{Code: NoAuth, Message: "reconfig: only the super user may change the membership (addauth digest as the --superdigest user)"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return s.e.cfg.Cluster.Reconfig(ctx, r)
}

// completeWrite records the FSM's result for the write the log knows as
// (epoch, xid) and answers whatever is now at the head. A result of another
// connection's epoch answers nothing here, whatever its xid. Called with
// the FSM's write lock held.
//
// It returns the client's xid of the request it answered, if any.
func (s *Session) completeWrite(epoch, xid int64, r *cmdpb.Result, v fsm.View) (clientXid int64, answered bool) {
	if epoch != s.epoch {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, en := range s.queue {
		if en.kind == kindWrite && en.dispatched && en.key == xid && en.resp == nil {
			en.resp = resultResponse(en.req, r)
			clientXid, answered = en.req.Xid, true
			break
		}
	}
	s.drainLocked(v)
	return clientXid, answered
}

// drainLocked answers the queue from its head for as long as it can: done
// entries are sent, reads run now (the caller holds the FSM lock, read or
// write, so they see a consistent state), a pending write or sync stops it.
func (s *Session) drainLocked(v fsm.View) {
	if s.ended {
		return // nothing more is sent, and no watch may be left behind
	}
	popped := false
	for len(s.queue) > 0 {
		en := s.queue[0]
		if en.resp == nil {
			if en.kind != kindRead {
				break
			}
			en.resp = s.read(en.req, v)
		}
		if en.kind != kindWrite {
			en.resp.Zxid = v.Applied
		}
		en.resp.Xid, en.resp.Op = en.req.Xid, en.req.Op
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.e.outstanding.Add(-1)
		s.e.cfg.Meter.Answered(en.req.Op, time.Since(en.arrived))
		s.pushLocked(Message{Response: en.resp})
		popped = true
		if s.ended {
			break // the client was too slow (pushLocked): nothing more is sent
		}
		if en.kind == kindSync {
			s.dispatchHeldLocked()
		}
	}
	if popped && len(s.queue) == 0 {
		s.queue = nil
	}
}

// dispatchHeldLocked submits the writes that waited behind a sync (a write
// that follows a pending sync is held back until the sync completes, so
// that its fixed zxid is never queued behind a later one).
func (s *Session) dispatchHeldLocked() {
	for _, en := range s.queue {
		if en.kind == kindSync && en.resp == nil {
			return
		}
		if en.kind == kindWrite && !en.dispatched {
			s.dispatchLocked(en)
		}
	}
}

// dispatchLocked submits a write's command (s.mu held), in the order of the
// session's requests. On a connection keyed by its epoch, the command gets
// the connection's next number here: the numbers rise in the order the
// commands enter the log, which is how the state machine knows a
// re-proposal from a new request.
func (s *Session) dispatchLocked(en *entry) {
	en.dispatched = true
	en.key = en.req.Xid
	if s.epoch != 0 {
		s.seq++
		en.key = s.seq
		switch c := en.cmd.GetCmd().(type) {
		case *cmdpb.Command_Write:
			c.Write.Epoch, c.Write.Xid, c.Write.LowestPendingXid = s.epoch, s.seq, 0
		case *cmdpb.Command_CloseSession:
			c.CloseSession.Epoch, c.CloseSession.Xid = s.epoch, s.seq
		case *cmdpb.Command_AddAuth:
			c.AddAuth.Epoch, c.AddAuth.Xid = s.epoch, s.seq
		}
	}
	s.e.cfg.Cluster.Submit(en.cmd)
}
