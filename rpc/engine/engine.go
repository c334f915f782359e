package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
	"github.com/coordd/coordd/watch"
)

// Cluster is what the engine needs of the server around it: the way into
// the replicated log and to the leader.
type Cluster interface {
	// Submit queues a command for the log, in order; it never blocks on
	// the network. The engine learns the outcome from the FSM.
	Submit(cmd *cmdpb.Command)
	// ReadIndex returns an index this server must apply for a read to
	// reflect every write committed anywhere before the call; done ends
	// the wait early.
	ReadIndex(done <-chan struct{}) (int64, error)
	// PassTouches refreshes the sessions' deadlines on the leader and
	// reports whether the leader then had a majority confirm its term, so
	// that the sessions may be vouched for.
	PassTouches(ctx context.Context, ids []int64) (confirmed bool, err error)
	// Serving reports whether this server may serve clients: it knows a
	// leader, or lost it only moments ago, and can write its log; if not,
	// why not, in words that follow "server ID " ("has no leader").
	Serving() (ok bool, why string)
	// Reconfig changes the membership and returns the new configuration's
	// version; a failure is an *Error.
	Reconfig(ctx context.Context, r Reconfig) (version int64, err error)
}

// Error is a failure with its code, from the Cluster.
type Error struct {
	Code    Code
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Config configures an Engine.
type Config struct {
	// ServerID names this server in replies and logs.
	ServerID string
	// FSM is this server's state machine; the engine must be its observer
	// (directly or through the server's).
	FSM     *fsm.FSM
	Cluster Cluster
	// Tick is the session time unit; keep-alives are passed to the leader
	// every Tick/2.
	Tick time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound a requested timeout.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxRequestSize bounds a write request (its paths and data); larger
	// ones fail with BadArguments. MaxDataSize (the FSM's) bounds each
	// znode's data.
	MaxRequestSize int
	// MaxReplySize bounds the data or names of one reply; a read whose
	// reply would be larger fails with MarshallingError.
	MaxReplySize int
	// DisableTTL refuses the creation of TTL nodes.
	DisableTTL bool
	// SuperDigest, when set, is the digest id (user:base64(sha1(user:
	// password))) whose addAuth makes a session the super user, whom no
	// ACL refuses (ZooKeeper's DigestAuthenticationProvider.superDigest).
	SuperDigest string
	// Meter is told of the requests and messages that pass (nil: nobody).
	Meter  Meter
	Logger *slog.Logger
}

// Meter counts what passes through the engine, for the server's metrics
// and ZooKeeper's four-letter words: requests received, messages handed to
// a front-end, and each request's latency. Its methods are called on the
// request path, some with locks held: they must be quick and never block.
//
// An interface rather than a metrics library: the engine stays free of
// exporters (the server's rpc/metrics implements it with Prometheus), and
// its tests count with a few lines.
type Meter interface {
	// Received counts a request (a connect included) that arrived.
	Received()
	// Sent counts n messages handed to a front-end to send: replies,
	// events, connects' answers, vouches.
	Sent(n int)
	// Answered is told that the reply to a request of op is queued, d
	// after the request arrived.
	Answered(op Op, d time.Duration)
}

// noMeter counts nothing.
type noMeter struct{}

func (noMeter) Received()                  {}
func (noMeter) Sent(int)                   {}
func (noMeter) Answered(Op, time.Duration) {}

// Engine holds the sessions connected to this server. It is the FSM's
// observer (see Applied): it routes each applied entry's reply and watch
// events to the sessions connected here.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	watches *watch.Manager

	mu       sync.Mutex
	sessions map[int64]*Session
	openWait map[string]chan session.Info // keyed by password
	// resumeWait are the connects waiting for their ResumeSession to be
	// applied, by session.
	resumeWait map[int64]*resumeWaiter
	// connecting holds the sessions a connect is resuming here, each with
	// a channel closed when it is done: one connect of a session at a time
	// per server, so that each picks its epoch above the last one's.
	connecting map[int64]chan struct{}
	// touched maps each session heard from since the last touch batch to
	// the highest xid it sent meanwhile (0: none, only a connect).
	touched map[int64]int64
	// refusals are the reasons for which a request of each session was
	// refused and logged (see logRefusal), so that each is logged once.
	refusals map[int64]map[string]bool

	// outstanding counts the requests queued on the connected sessions and
	// not yet answered (ZooKeeper's outstanding requests).
	outstanding atomic.Int64
}

// New returns an engine with no sessions.
func New(cfg Config) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Meter == nil {
		cfg.Meter = noMeter{}
	}
	return &Engine{
		cfg:        cfg,
		log:        cfg.Logger,
		watches:    watch.NewManager(),
		sessions:   make(map[int64]*Session),
		openWait:   make(map[string]chan session.Info),
		resumeWait: make(map[int64]*resumeWaiter),
		connecting: make(map[int64]chan struct{}),
		touched:    make(map[int64]int64),
		refusals:   make(map[int64]map[string]bool),
	}
}

// Watches returns the server's watch table (for status and tests).
func (e *Engine) Watches() *watch.Manager { return e.watches }

// Outstanding returns the number of requests of the sessions connected here
// that have arrived and are not yet answered.
func (e *Engine) Outstanding() int64 { return e.outstanding.Load() }

func (e *Engine) get(id int64) *Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sessions[id]
}

// Applied routes what one log entry did to the sessions connected here:
// watch events first, then the write's reply, then the end of closed
// sessions. The FSM calls it with its write lock held, so an event is
// queued before any reply that reflects its change, and everything a
// session receives is in zxid order.
func (e *Engine) Applied(a *fsm.Applied) {
	if a.Opened != nil {
		e.mu.Lock()
		if ch, ok := e.openWait[string(a.Opened.Password)]; ok {
			delete(e.openWait, string(a.Opened.Password))
			ch <- *a.Opened
		}
		e.mu.Unlock()
	}
	if a.Resumed != nil {
		e.resumed(a.Resumed)
	}
	if len(a.Events) > 0 {
		for _, nt := range e.watches.Trigger(a.Events) {
			if s := e.get(nt.Session); s != nil && s.mayRead(nt.Event.ACL, a) {
				s.pushEvent(Event{Type: nt.Event.Type, Path: nt.Event.Path, Zxid: nt.Event.Zxid, Kinds: nt.Kinds})
			}
		}
	}
	// A closed session's watches go once the entry's events have fired: as
	// in ZooKeeper, a session closed while connected here (by its close or
	// by expiry) is sent the events its own watches match, its own
	// ephemerals' deletion included, before the reply to its close (or the
	// end of its connection); then it holds no watch.
	for _, id := range a.Closed {
		e.watches.RemoveSession(id)
		e.mu.Lock()
		delete(e.refusals, id)
		if w, ok := e.resumeWait[id]; ok {
			// A session closed while it was moving here: the connect finds
			// it gone.
			delete(e.resumeWait, id)
			w.done <- resumeClosed
		}
		e.mu.Unlock()
	}
	if a.Session != 0 && a.Result != nil && e.mine(a.Cmd) {
		clientXid, answered := int64(0), false
		if s := e.get(a.Session); s != nil {
			clientXid, answered = s.completeWrite(a.Epoch, a.Xid, a.Result, fsm.View{Tree: a.Tree, Sessions: a.Sessions, Applied: a.Index})
		}
		if a.Refused {
			e.logRefusal(a, clientXid, answered)
		}
	}
	for _, id := range a.Closed {
		s := e.get(id)
		switch {
		case s == nil:
		case a.Session == id && a.Xid != 0:
			s.End(nil) // closed at its client's request: the reply said so
		default:
			s.End(&Response{Code: SessionExpired, Message: "session expired"})
		}
	}
}

// logRefusal logs, at info and once per session and code, that the state
// machine refused a request this server submitted without applying it (a
// stale retry, an xid used for another request, a connection the session
// replaced, a session that moved): the client is told, and an operator
// looking for why a client's writes fail finds it here.
//
// The xid logged is the client's when the refusal answered a request of a
// connection here (answered); otherwise the request's number in the log
// (a connection that is gone).
func (e *Engine) logRefusal(a *fsm.Applied, clientXid int64, answered bool) {
	reason := a.Result.Code.String()
	e.mu.Lock()
	seen := e.refusals[a.Session]
	if seen == nil {
		seen = map[string]bool{}
		e.refusals[a.Session] = seen
	}
	first := !seen[reason]
	seen[reason] = true
	e.mu.Unlock()
	if !first {
		return
	}
	attrs := []any{"session", fmt.Sprintf("0x%x", a.Session)}
	if answered {
		attrs = append(attrs, "xid", clientXid)
	} else {
		attrs = append(attrs, "request", a.Xid, "connection", a.Epoch, "answered", "no one (the connection is gone)")
	}
	attrs = append(attrs, "code", reason, "reason", a.Result.Message, "note", "logged once per session and code")
	e.log.Info("a request was refused", attrs...)
}

// mine reports whether this server submitted the client request cmd (a
// write or a close): only then does its result answer the session connected
// here. A session that moved here may have requests with the same xids
// still pending, re-sent by its client; the old server's refused copies
// must not answer them. A command logged before coordd recorded servers
// counts as anyone's.
func (e *Engine) mine(cmd *cmdpb.Command) bool {
	var server string
	switch c := cmd.GetCmd().(type) {
	case *cmdpb.Command_Write:
		server = c.Write.Server
	case *cmdpb.Command_CloseSession:
		server = c.CloseSession.Server
	case *cmdpb.Command_AddAuth:
		server = c.AddAuth.Server
	}
	return server == "" || server == e.cfg.ServerID
}

// resumed learns that a session's owner is now r.Server: a connect waiting
// for it here goes on; a connection of the session here, if another server
// owns it now, is closed with SessionMoved (its writes would fail anyway;
// the client is connected elsewhere, and ZooKeeper closes such a
// connection too). A stale resume (see fsm.Resumed) changed nothing: the
// connect that proposed it, if it waits here, proposes again above the
// session's epoch. The FSM's write lock is held.
func (e *Engine) resumed(r *fsm.Resumed) {
	e.mu.Lock()
	if r.Server == e.cfg.ServerID {
		if w, ok := e.resumeWait[r.Session]; ok && (w.epoch == 0 || w.epoch == r.Epoch) {
			delete(e.resumeWait, r.Session)
			out := resumeApplied
			if r.Stale {
				out = resumeStale
			}
			w.done <- out
		}
	}
	s := e.sessions[r.Session]
	e.mu.Unlock()
	if s != nil && !r.Stale && r.Server != e.cfg.ServerID {
		e.log.Info("session moved to another server", "session", r.Session, "server", r.Server)
		s.End(&Response{Code: SessionMoved, Message: fmt.Sprintf("session moved to server %s", r.Server)})
	}
}

// resumeWaiter is a connect waiting for its ResumeSession: epoch is the
// one it proposed (0 below level 2); done gets what became of it.
type resumeWaiter struct {
	epoch int64
	done  chan resumeOutcome
}

// resumeOutcome is what became of a ResumeSession.
type resumeOutcome int

const (
	resumeApplied resumeOutcome = iota
	resumeStale                 // another resume gave the session a higher epoch first
	resumeClosed                // the session was closed
)

// lockSession waits until no other connect of session id is resuming it
// here, and returns the function that lets the next one go.
func (e *Engine) lockSession(ctx context.Context, id int64) (func(), error) {
	for {
		e.mu.Lock()
		busy, ok := e.connecting[id]
		if !ok {
			mine := make(chan struct{})
			e.connecting[id] = mine
			e.mu.Unlock()
			return func() {
				e.mu.Lock()
				delete(e.connecting, id)
				e.mu.Unlock()
				close(mine)
			}, nil
		}
		e.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// resume makes this server the owner of a session (a ResumeSession entry)
// and waits until it has applied it: from then on, writes of the session
// from any other server fail with SessionMoved. From command level 2 on,
// the entry also gives the session a new connection epoch, one above the
// latest this server has applied, and it applies only if no other
// connection's resume got there first: if one did, resume proposes again
// above it, until the session's timeout (the client may have left earlier
// attempts on other servers behind, whose resumes apply later). It returns
// the epoch (0 below level 2). The caller holds lockSession.
func (e *Engine) resume(ctx context.Context, id int64, timeout time.Duration) (int64, error) {
	wait := time.NewTimer(max(5*time.Second, timeout))
	defer wait.Stop()
	for {
		var epoch int64
		e.cfg.FSM.Read(func(v fsm.View) {
			if v.Level >= 2 {
				// Above every epoch applied here.
				cur, _ := v.Sessions.Epoch(id)
				epoch = cur + 1
			}
		})
		w := &resumeWaiter{epoch: epoch, done: make(chan resumeOutcome, 1)}
		e.mu.Lock()
		e.resumeWait[id] = w
		e.mu.Unlock()
		e.cfg.Cluster.Submit(&cmdpb.Command{Cmd: &cmdpb.Command_ResumeSession{ResumeSession: &cmdpb.ResumeSession{SessionId: id, Server: e.cfg.ServerID, Epoch: epoch}}})
		select {
		case out := <-w.done:
			switch out {
			case resumeApplied:
				return epoch, nil
			case resumeClosed:
				return 0, errors.New("the session was closed meanwhile")
			}
			// Stale: another connection's resume (an earlier attempt of
			// the same client, on another server, that applied after the
			// client gave up on it) gave the session a higher epoch, which
			// this server has now applied: propose above it.
			continue
		case <-wait.C:
		case <-ctx.Done():
		}
		e.mu.Lock()
		if e.resumeWait[id] == w {
			delete(e.resumeWait, id)
		}
		e.mu.Unlock()
		return 0, errors.New("timed out moving the session here")
	}
}

// Restored is told that a snapshot replaced the whole state: the watch
// table is dropped and every connected client must reconnect and
// re-register its watches. The FSM's write lock is held.
func (e *Engine) Restored() {
	e.watches.Reset()
	for _, s := range e.all() {
		s.End(nil)
	}
}

func (e *Engine) all() []*Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*Session, 0, len(e.sessions))
	for _, s := range e.sessions {
		out = append(out, s)
	}
	return out
}

// Local returns the ids of the sessions connected here.
func (e *Engine) Local() []int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]int64, 0, len(e.sessions))
	for id := range e.sessions {
		out = append(out, id)
	}
	return out
}

// Connected returns the number of sessions connected here.
func (e *Engine) Connected() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

// EndAll ends every session's connection (the clients move elsewhere).
func (e *Engine) EndAll() {
	for _, s := range e.all() {
		s.End(nil)
	}
}

// touch records that the session was heard from, with the xid of the
// request that arrived (0 for a connect).
func (e *Engine) touch(id, xid int64) {
	e.mu.Lock()
	e.touched[id] = max(e.touched[id], xid)
	e.mu.Unlock()
}

// VouchInterval is how often the sessions heard from are passed to the
// leader, and vouched for once it confirms them.
func (e *Engine) VouchInterval() time.Duration { return e.cfg.Tick / 2 }

// RunTouches passes the sessions heard from to the leader every vouch
// interval and, once the leader confirms it refreshed their deadlines in a
// term a majority confirmed after that, vouches for them to their clients.
// It returns when ctx ends.
//
// A batch is taken only after the previous one was answered, so a slow
// leader delays the vouches (the clients then suspend early: safe) rather
// than piling up batches. A server cut off from the leader vouches for
// nothing: its touches fail, and are kept for the next round, as are those
// the leader recorded but could not have confirmed.
func (e *Engine) RunTouches(ctx context.Context) {
	tk := time.NewTicker(e.VouchInterval())
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		e.mu.Lock()
		if len(e.touched) == 0 {
			e.mu.Unlock()
			continue
		}
		batch := e.touched
		e.touched = make(map[int64]int64, len(batch))
		e.mu.Unlock()
		ids := make([]int64, 0, len(batch))
		for id := range batch {
			ids = append(ids, id)
		}
		tctx, cancel := context.WithTimeout(ctx, e.cfg.Tick)
		confirmed, err := e.cfg.Cluster.PassTouches(tctx, ids)
		cancel()
		if err != nil || !confirmed {
			// Keep them for the next round: the leader may be changing,
			// or could not have its term confirmed in time (a slow
			// majority). Passed again later, they are refreshed again and
			// vouched for once a round is confirmed: a client that sends
			// nothing more meanwhile must not lose the vouch for its last
			// request (it would suspend while the leader has its session).
			e.mu.Lock()
			for id, xid := range batch {
				e.touched[id] = max(e.touched[id], xid)
			}
			e.mu.Unlock()
			continue
		}
		e.vouch(batch)
	}
}

// vouch tells each session of batch connected here, that asked for it, that
// the leader has confirmed hearing from it as of the xid recorded.
func (e *Engine) vouch(batch map[int64]int64) {
	for id, xid := range batch {
		if xid <= 0 {
			continue
		}
		if s := e.get(id); s != nil && s.vouches {
			s.mu.Lock()
			s.pushLocked(Message{Vouch: xid})
			s.mu.Unlock()
		}
	}
}

// open proposes a new session and waits for it to be applied here.
func (e *Engine) open(ctx context.Context, timeout time.Duration) (session.Info, error) {
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return session.Info{}, err
	}
	ch := make(chan session.Info, 1)
	e.mu.Lock()
	e.openWait[string(pw)] = ch
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.openWait, string(pw))
		e.mu.Unlock()
	}()
	e.cfg.Cluster.Submit(&cmdpb.Command{Cmd: &cmdpb.Command_OpenSession{OpenSession: &cmdpb.OpenSession{TimeoutMs: timeout.Milliseconds(), Password: pw, Server: e.cfg.ServerID}}})
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

// ConnectRequest opens a session (SessionID 0) or resumes one.
type ConnectRequest struct {
	SessionID int64
	Password  []byte
	TimeoutMs int64
	// LastZxid is the last zxid the client saw: a server behind it refuses
	// the session, so that the client never sees time go backwards.
	LastZxid int64
	// Watches are re-registered on resume; those whose node changed after
	// Watches.RelZxid fire at once.
	Watches Watches
	// Vouches asks for Vouch messages.
	Vouches bool
	// Conn is what the front-end knows of the connection: the identities
	// ZooKeeper gives a connection itself (its ip, its verified client
	// certificate's subject).
	Conn auth.Conn
	// ClientRetries says the client keys its writes by xids unique to the
	// session and sends an unanswered write again, with its xid, after a
	// reconnect (coordd's own client): the state machine then answers a
	// retry with the first outcome. Otherwise (ZooKeeper's protocol) an xid
	// only tags a reply on this connection (a client may number its
	// requests afresh on every connection, and never sends one again), and
	// the engine keys the connection's requests itself: once the cluster
	// is at command level 2, every connect logs a new epoch for the
	// session, and the connection's commands are numbered from 1 in it.
	ClientRetries bool
}

// ConnectError is why a connect failed: Unavailable (no leader, behind the
// client, shutting down: try another server), SessionExpired (the session
// is gone) or AuthFailed (a wrong password).
type ConnectError struct {
	Code    Code
	Message string
}

// Error returns the reason.
func (e *ConnectError) Error() string { return "engine: " + e.Message }

// ConnectWait bounds how long a server waits to catch up with a resuming
// client's last zxid before it sends the client elsewhere.
const ConnectWait = 2 * time.Second

// Connect opens or resumes a session on this server and returns it, with
// its Connected message (and any re-registered watch that fired at once)
// queued first. Another connection of the same session here is ended. The
// caller feeds the session's requests to Submit, sends what Next returns,
// and calls Detach when its connection ends. A failure is a *ConnectError.
func (e *Engine) Connect(ctx context.Context, req ConnectRequest) (*Session, error) {
	e.cfg.Meter.Received()
	if ok, why := e.cfg.Cluster.Serving(); !ok {
		return nil, &ConnectError{Unavailable, "server " + e.cfg.ServerID + " " + why}
	}
	f := e.cfg.FSM
	// A server behind the client's last zxid refuses the connect, new
	// session or not, as ZooKeeper does (processConnectRequest checks it
	// before it looks at the session id): a client that opens a new
	// session after its old one expired must not see time go backwards
	// either.
	if req.LastZxid > f.AppliedIndex() {
		wctx, cancel := context.WithTimeout(ctx, ConnectWait)
		caughtUp := f.WaitApplied(wctx.Done(), req.LastZxid)
		cancel()
		if !caughtUp {
			return nil, &ConnectError{Unavailable, fmt.Sprintf("server %s is behind the client (applied %d < last seen %d)", e.cfg.ServerID, f.AppliedIndex(), req.LastZxid)}
		}
	}
	// Requests keyed by the connection need an epoch of their own, logged
	// at every connect (a new session's is its opening entry).
	epochs := !req.ClientRetries && f.ClusterLevel() >= 2
	var epoch int64 // the epoch this connect's resume gave the session
	var info session.Info
	if req.SessionID == 0 {
		timeout := session.Negotiate(time.Duration(req.TimeoutMs)*time.Millisecond, e.cfg.Tick, e.cfg.MinSessionTimeout, e.cfg.MaxSessionTimeout)
		var err error
		info, err = e.open(ctx, timeout)
		if err != nil {
			return nil, &ConnectError{Unavailable, "opening session: " + err.Error()}
		}
		e.logClamped(info.ID, req.TimeoutMs, timeout)
	} else {
		var perr error
		check := func() {
			f.Read(func(v fsm.View) {
				perr = v.Sessions.CheckPassword(req.SessionID, req.Password)
				info, _ = v.Sessions.Get(req.SessionID)
			})
		}
		check()
		if perr != nil && !errors.Is(perr, session.ErrBadPassword) {
			// Unknown here may only mean not applied here yet: a client
			// that moves before it has seen a zxid (ZooKeeper's clients
			// learn none from the handshake) reports no lastZxid. Only the
			// leader's commit index can say the session is gone, as only
			// ZooKeeper's leader can when a follower revalidates one.
			wctx, cancel := context.WithTimeout(ctx, ConnectWait)
			idx, err := e.cfg.Cluster.ReadIndex(wctx.Done())
			caughtUp := err == nil && f.WaitApplied(wctx.Done(), idx)
			cancel()
			if !caughtUp {
				return nil, &ConnectError{Unavailable, fmt.Sprintf("server %s could not check session 0x%x against the leader's state", e.cfg.ServerID, req.SessionID)}
			}
			check()
		}
		switch {
		case errors.Is(perr, session.ErrBadPassword):
			return nil, &ConnectError{AuthFailed, "wrong session password"}
		case perr != nil:
			return nil, &ConnectError{SessionExpired, fmt.Sprintf("session 0x%x expired or unknown", req.SessionID)}
		}
		if info.Owner != e.cfg.ServerID || epochs {
			unlock, err := e.lockSession(ctx, info.ID)
			if err != nil {
				return nil, &ConnectError{Unavailable, "resuming session: " + err.Error()}
			}
			defer unlock()
			// A client resuming is alive: its session must not expire
			// while it moves.
			e.touch(info.ID, 0)
			// The session moves here, or starts a new epoch: logged, so
			// that every server agrees which one may write for it
			// (ZooKeeper's leader records the owner when a server
			// revalidates a session), and which connection's requests
			// still count.
			if epoch, err = e.resume(ctx, info.ID, time.Duration(info.TimeoutMs)*time.Millisecond); err != nil {
				return nil, &ConnectError{Unavailable, "resuming session: " + err.Error()}
			}
		}
	}

	s := newSession(e, info.ID, req.Vouches)
	s.conn = req.Conn
	var old *Session
	var gone, replaced bool
	f.Read(func(v fsm.View) {
		if _, ok := v.Sessions.Get(info.ID); !ok {
			gone = true // closed between open/check and now
			return
		}
		cur, _ := v.Sessions.Epoch(info.ID)
		if epoch != 0 && cur != epoch {
			replaced = true // another connection of the session came since
			return
		}
		if !req.ClientRetries {
			// Keyed by the connection: the epoch its resume (or the
			// session's opening) set (0: none, below level 2).
			s.epoch = cur
		}
		e.mu.Lock()
		old = e.sessions[info.ID]
		e.sessions[info.ID] = s
		e.mu.Unlock()
		s.mu.Lock()
		s.pushLocked(Message{Connected: &Connected{SessionID: info.ID, Password: info.Password, TimeoutMs: info.TimeoutMs, Zxid: v.Applied, Vouches: req.Vouches}})
		if req.Watches.Len() > 0 {
			s.reregisterLocked(&req.Watches, v)
		}
		s.mu.Unlock()
	})
	switch {
	case gone:
		return nil, &ConnectError{SessionExpired, "session expired"}
	case replaced:
		return nil, &ConnectError{Unavailable, fmt.Sprintf("session 0x%x connected again elsewhere meanwhile", info.ID)}
	}
	if old != nil {
		old.End(nil)
	}
	e.touch(info.ID, 0)
	e.log.Debug("session connected", "session", info.ID, "resumed", req.SessionID != 0)
	return s, nil
}

// reregisterLocked registers a client's watches again and queues those that
// fire at once: in zxid order like live events (a NodeDeleted whose zxid is
// unknown carries 0 and goes first), or, with w.ListOrder, in ZooKeeper's
// order. As a live event, one about a node the session may not READ is not
// sent (its watch is consumed all the same): it would tell the node exists
// and when it changed. (ZooKeeper's setWatches does not check; its live
// events do, since CVE-2024-23944.) s.mu is held, and the FSM's lock.
func (s *Session) reregisterLocked(w *Watches, v fsm.View) {
	fired := s.e.watches.ReregisterAll(s.id, watch.SetWatches{
		RelZxid: w.RelZxid, Data: w.Data, Exist: w.Exist, Child: w.Child,
		Persistent: w.Persistent, PersistentRecursive: w.PersistentRecursive,
	}, stats{s, v.Tree})
	if !w.ListOrder {
		sort.SliceStable(fired, func(i, j int) bool { return fired[i].Event.Zxid < fired[j].Event.Zxid })
	}
	for _, nt := range fired {
		if nt.Event.Type != tree.EventNodeDeleted && s.permitted(v, nt.Event.Path, tree.PermRead) != nil {
			continue
		}
		s.pushLocked(Message{Event: &Event{Type: nt.Event.Type, Path: nt.Event.Path, Zxid: nt.Event.Zxid, Kinds: nt.Kinds}})
	}
}

// stats reads stats as the session's reads see them, ZooKeeper's system
// nodes included (a getConfig watch is re-registered like any other).
type stats struct {
	s *Session
	t *tree.Tree
}

func (st stats) Exists(p string) (tree.Stat, error) { return st.s.exists(st.t, p) }

// Detach unregisters a session whose connection ended, and drops its
// watches here: the client re-registers them wherever it reconnects. It is
// safe to call more than once.
func (s *Session) Detach() {
	s.End(nil) // a request still being received now registers no watch
	s.e.cfg.FSM.Read(func(fsm.View) {
		s.e.mu.Lock()
		if s.e.sessions[s.id] == s {
			delete(s.e.sessions, s.id)
			s.e.watches.RemoveSession(s.id)
		}
		s.e.mu.Unlock()
	})
}
