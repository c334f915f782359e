package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/rpc/apipb"
)

const (
	// statesBuffer is the capacity of the States channel.
	statesBuffer = 64
	minBackoff   = 20 * time.Millisecond
	maxBackoff   = time.Second
)

// Client is one session with a coordd cluster. It is safe for concurrent use.
type Client struct {
	opts    options
	log     *slog.Logger
	servers []string
	epoch   time.Time // monotonic base of the atomic times below

	// ctx lives until the session ends; every stream and dial derives from it.
	ctx    context.Context
	cancel context.CancelFunc

	runDone   chan struct{} // closed when the run goroutine returns
	closeDone chan struct{} // closed when Close has finished

	// lastHeard is when (since epoch) the server may last have heard from
	// us: the last successful send or accepted handshake.
	lastHeard atomic.Int64

	mu         sync.Mutex
	sessionID  int64
	password   []byte
	timeout    time.Duration // negotiated
	server     string
	state      State
	lastZxid   int64
	nextXid    int64
	pending    []*call // sent or queued, unanswered, in xid order
	conn       *conn   // current connection, nil while disconnected
	watches    map[string][]*watcher
	terminal   error      // why the session ended; nil while it lives
	closing    bool       // Close was called
	closeAcked bool       // the server answered the CloseRequest
	flaps      int        // disconnects since the last good reply (for backoff)
	maxRequest int64      // the server's limit on one request, encoded (0: unknown)
	vc         vouchClock // what the leader confirmed; the suspension (vouch.go)
	states     chan StateEvent
	stateSubs  map[chan StateEvent]struct{} // NotifyStates subscriptions
	statesDone bool                         // states and every subscription are closed
}

// call is one request awaiting its reply.
type call struct {
	xid       int64
	req       *apipb.Request
	write     bool // its outcome matters if the session ends in flight
	sent      bool // sent on some stream at least once
	abandoned bool // the caller stopped waiting
	internal  bool // ping, close, a watch's removal: no caller waiting on done
	watch     *watcher
	done      chan result
}

type result struct {
	resp *apipb.Response
	err  error
}

// Connect opens a new session on one of servers ("host:port"), trying them
// in random order (and again, with a small backoff, until ctx ends) until one
// accepts. It blocks until the session is established or ctx ends; the
// returned error then wraps ctx.Err() and the last server's error.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: no servers", ErrBadArguments)
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	c := &Client{
		opts:      o,
		log:       o.logger,
		servers:   append([]string(nil), servers...),
		epoch:     time.Now(),
		runDone:   make(chan struct{}),
		closeDone: make(chan struct{}),
		nextXid:   1,
		watches:   make(map[string][]*watcher),
		states:    make(chan StateEvent, statesBuffer),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())

	var lastErr error
	backoff := minBackoff
	for {
		for _, addr := range shuffled(c.servers, "") {
			if ctx.Err() != nil {
				break
			}
			req := &apipb.ConnectRequest{TimeoutMs: o.sessionTimeout.Milliseconds(), Vouches: true}
			// A new session is opened through the log, so the leader knew
			// of it after this moment: its first confirmation.
			sent := c.since()
			cn, resp, err := c.dial(ctx, addr, o.dialTimeout, req)
			if err == nil && resp.SessionId == 0 {
				cn.close()
				err = fmt.Errorf("%w: server %s returned session id 0", ErrSystemError, addr)
			}
			if err == nil {
				c.mu.Lock()
				c.sessionID = resp.SessionId
				c.password = resp.Password
				c.timeout = o.sessionTimeout
				c.vc.confirmed = sent
				c.mu.Unlock()
				c.attach(cn, resp, true)
				go c.run(cn)
				return c, nil
			}
			lastErr = err
			c.log.Debug("client: connect failed", "server", addr, "err", err)
			if errors.Is(err, ErrAuthFailed) || errors.Is(err, ErrSessionExpired) || errors.Is(err, errPoolClosed) {
				c.cancel()
				return nil, err
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			c.cancel()
			if lastErr == nil {
				return nil, fmt.Errorf("client: connect: %w", ctx.Err())
			}
			return nil, fmt.Errorf("client: connect: %w: %w", ctx.Err(), lastErr)
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// States returns the channel on which every state change is reported, in
// order, from the first StateConnected on. It is buffered (64 events); when
// the consumer falls that far behind, the oldest event is dropped so the
// client never blocks. It is closed after StateClosed. It is one channel: each
// event goes to one reader. A part of the program that follows the state on
// its own (as the lockrecipe package does) uses NotifyStates instead.
func (c *Client) States() <-chan StateEvent { return c.states }

// NotifyStates subscribes to the state changes from now on, independently of
// States and of every other subscription: each subscription receives every
// event, in order. It returns the state at the moment of the call (the
// events then report the changes from it), the subscription's channel,
// buffered and dropping its oldest event when full as States does, and stop,
// which ends the subscription and closes the channel. The channel is also
// closed after StateClosed; stop may be called at any time, more than once.
func (c *Client) NotifyStates() (current State, events <-chan StateEvent, stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sub := make(chan StateEvent, statesBuffer)
	if c.statesDone {
		close(sub)
		return c.state, sub, func() {}
	}
	if c.stateSubs == nil {
		c.stateSubs = make(map[chan StateEvent]struct{})
	}
	c.stateSubs[sub] = struct{}{}
	stop = func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.stateSubs[sub]; ok {
			delete(c.stateSubs, sub)
			close(sub)
		}
	}
	return c.state, sub, stop
}

// State returns the current state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// SessionID returns the session's id.
func (c *Client) SessionID() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// SessionTimeout returns the session timeout negotiated with the server.
func (c *Client) SessionTimeout() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timeout
}

// Server returns the address of the server of the current (or, while
// disconnected, the last) connection.
func (c *Client) Server() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server
}

// LastZxid returns the highest zxid seen in any reply or watch event.
func (c *Client) LastZxid() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastZxid
}

// Close closes the session: it sends a CloseRequest (the server deletes the
// session's ephemeral nodes), waits for its reply (bounded by ctx), then tears
// the connection down. Pending watches receive EventNotWatching with
// ErrClosed; later calls return ErrClosed. Close is idempotent; it returns
// nil when the server confirmed the close or the session had already
// expired, and an error wrapping ctx.Err() when ctx ended first (the session
// then expires on its own after its timeout).
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		select {
		case <-c.closeDone:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("client: close not finished: %w", ctx.Err())
		}
	}
	c.closing = true
	var cl *call
	if c.terminal == nil {
		cl = &call{req: &apipb.Request{Op: &apipb.Request_Close{Close: &apipb.CloseRequest{}}}, internal: true, done: make(chan result, 1)}
		c.enqueueLocked(cl)
	}
	c.mu.Unlock()

	var err error
	if cl != nil {
		select {
		case r := <-cl.done:
			if r.err != nil && !errors.Is(r.err, ErrSessionExpired) {
				err = r.err
			}
		case <-ctx.Done():
			err = fmt.Errorf("client: close not confirmed: %w", ctx.Err())
		}
	}
	c.terminate(ErrClosed, StateClosed)
	<-c.runDone
	c.mu.Lock()
	if c.state != StateClosed {
		c.setStateLocked(StateClosed, c.server, nil)
	}
	c.statesDone = true
	close(c.states)
	for sub := range c.stateSubs {
		close(sub)
	}
	c.stateSubs = nil
	c.mu.Unlock()
	close(c.closeDone)
	return err
}

// do sends req and waits for its reply. A reply carrying an error returns
// both the response and the error.
func (c *Client) do(ctx context.Context, req *apipb.Request, write bool, w *watcher) (*apipb.Response, error) {
	r := c.doAll(ctx, &call{req: req, write: write, watch: w})
	return r[0].resp, r[0].err
}

// doAll queues calls back to back, so that they leave together without
// waiting for one another's replies (the session's order still applies them
// one after the other), and waits for every reply.
func (c *Client) doAll(ctx context.Context, calls ...*call) []result {
	out := make([]result, len(calls))
	fail := func(err error) []result {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return fail(ErrClosed)
	}
	if c.terminal != nil {
		err := c.terminal
		c.mu.Unlock()
		return fail(err)
	}
	for _, cl := range calls {
		cl.done = make(chan result, 1)
		if err := c.tooLargeLocked(cl.req); err != nil {
			cl.done <- result{err: err}
			continue
		}
		if w := cl.watch; w != nil {
			w.pending = true
			c.watches[w.path] = append(c.watches[w.path], w)
		}
		c.enqueueLocked(cl)
	}
	c.mu.Unlock()

	for i, cl := range calls {
		select {
		case out[i] = <-cl.done:
		case <-ctx.Done():
			if !c.abandon(cl) {
				out[i] = <-cl.done // the reply (or the session's end) won the race
			} else {
				out[i].err = ctx.Err()
			}
		}
	}
	return out
}

// enqueueLocked gives cl the next xid and queues it for the sender.
func (c *Client) enqueueLocked(cl *call) {
	cl.xid = c.nextXid
	c.nextXid++
	cl.req.Xid = cl.xid
	c.pending = append(c.pending, cl)
	if c.conn != nil {
		c.conn.wake()
	}
}

// abandon is called when cl's caller stopped waiting. A call not sent yet is
// dropped; one already sent stays pending (its reply keeps the xids in step).
// It reports false when cl is no longer pending: its result is then on the
// way to cl.done.
func (c *Client) abandon(cl *call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.pendingIndexLocked(cl.xid)
	if i < 0 || c.pending[i] != cl {
		return false
	}
	cl.abandoned = true
	if cl.watch != nil {
		c.removeWatcherLocked(cl.watch)
	}
	if !cl.sent {
		c.pending = append(c.pending[:i], c.pending[i+1:]...)
	}
	return true
}

func (c *Client) pendingIndexLocked(xid int64) int {
	for i, cl := range c.pending {
		if cl.xid == xid {
			return i
		}
		if cl.xid > xid {
			break
		}
	}
	return -1
}

// requestFraming is more than the xids sent with a request add to it.
const requestFraming = 32

// tooLargeLocked refuses a request larger than the server accepts, before
// it is sent. The server would answer one a little too large with
// ErrBadArguments, but gRPC ends the stream on one over its own limit, and
// the request would then be resent on every new stream.
func (c *Client) tooLargeLocked(req *apipb.Request) error {
	if c.maxRequest <= 0 {
		return nil
	}
	if n := int64(proto.Size(req)) + requestFraming; n > c.maxRequest {
		return &serverError{sentinel: ErrBadArguments, msg: fmt.Sprintf("request of %d bytes exceeds the server's limit of %d bytes", n, c.maxRequest)}
	}
	return nil
}

// ping queues a PingRequest.
func (c *Client) ping() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.terminal != nil {
		return
	}
	c.enqueueLocked(&call{req: &apipb.Request{Op: &apipb.Request_Ping{Ping: &apipb.PingRequest{}}}, internal: true, done: make(chan result, 1)})
}

// takeUnsent returns the messages cn has still to send: every pending call
// with an xid above the last one cn sent, in order.
func (c *Client) takeUnsent(cn *conn) []*apipb.ClientMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != cn || len(c.pending) == 0 {
		return nil
	}
	low := c.pending[0].xid
	now := c.since()
	var out []*apipb.ClientMessage
	for _, cl := range c.pending {
		if cl.xid <= cn.sentXid {
			continue
		}
		c.recordSendLocked(cn, cl, now)
		cl.sent = true
		cn.sentXid = cl.xid
		// A fresh Request per send: the stored one is never mutated after
		// being handed to gRPC.
		r := &apipb.Request{Xid: cl.xid, LowestPendingXid: low, Op: cl.req.Op}
		out = append(out, &apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: r}})
	}
	return out
}

func (c *Client) noteZxidLocked(z int64) {
	if z > c.lastZxid {
		c.lastZxid = z
	} else if z < c.lastZxid && z != 0 {
		c.log.Warn("client: zxid went backwards", "zxid", z, "last", c.lastZxid)
	}
}

// handleResponse matches r with its call. A non-nil error ends the connection.
func (c *Client) handleResponse(r *apipb.Response) error {
	c.mu.Lock()
	if r.Xid == 0 {
		closing := c.closing || c.closeAcked
		c.mu.Unlock()
		err := codeError(r.Error, r.Message)
		if closing && errors.Is(err, ErrSessionExpired) {
			// The end of a session this client asked to close.
			return err
		}
		if err == nil {
			err = fmt.Errorf("%w: reply with xid 0", ErrSystemError)
		}
		if errors.Is(err, ErrSessionExpired) {
			c.terminate(err, StateExpired)
		}
		return err
	}
	c.noteZxidLocked(r.Zxid)
	i := c.pendingIndexLocked(r.Xid)
	if i < 0 {
		c.mu.Unlock()
		c.log.Warn("client: reply for unknown xid", "xid", r.Xid)
		return nil
	}
	if i > 0 {
		c.log.Warn("client: reply out of order", "xid", r.Xid, "expected", c.pending[0].xid)
	}
	cl := c.pending[i]
	if r.Error == apipb.ErrorCode_UNAVAILABLE && !cl.abandoned {
		// The server could not serve it: keep it pending, so it is re-sent
		// with its xid on another server. (An abandoned call is just
		// dropped: nobody wants it retried.)
		c.mu.Unlock()
		return fmt.Errorf("client: xid %d: %w", r.Xid, codeError(r.Error, r.Message))
	}
	c.flaps = 0
	c.pending = append(c.pending[:i], c.pending[i+1:]...)
	err := codeError(r.Error, r.Message)
	if w := cl.watch; w != nil {
		w.pending = false
		switch {
		case cl.abandoned:
			c.removeWatcherLocked(w)
			if err == nil {
				c.dropAbandonedLocked(w)
			}
		case err == nil:
			if w.kind == kindExist && r.GetExists().GetStat() != nil {
				w.kind = kindData // the node exists: it is a data watch now
			}
		case w.kind == kindExist && r.Error == apipb.ErrorCode_NO_NODE:
			// exists on an absent node leaves a watch
		default:
			c.removeWatcherLocked(w)
		}
	}
	if _, ok := cl.req.Op.(*apipb.Request_Close); ok {
		c.closeAcked = true
	}
	c.mu.Unlock()
	cl.done <- result{resp: r, err: err}
	if errors.Is(err, ErrSessionExpired) {
		c.terminate(err, StateExpired)
		return err
	}
	return nil
}

// terminate ends the session for good: it fails every pending call and
// watch with cause, reports st and stops every connection. It does nothing
// if the session has already ended.
func (c *Client) terminate(cause error, st State) {
	c.mu.Lock()
	if c.terminal != nil {
		c.mu.Unlock()
		return
	}
	c.terminal = cause
	calls := c.pending
	c.pending = nil
	for _, l := range c.watches {
		for _, w := range l {
			w.fire(Event{Type: EventNotWatching, Path: w.path, Err: cause})
		}
	}
	c.watches = make(map[string][]*watcher)
	c.conn = nil
	c.setStateLocked(st, c.server, cause)
	c.armSuspendLocked() // stops the suspension timer
	c.mu.Unlock()

	c.cancel()
	for _, cl := range calls {
		err := cause
		if cl.write && cl.sent {
			err = outcomeUnknown(cause)
		}
		cl.done <- result{err: err} // buffered; nobody may be waiting
	}
	c.log.Info("client: session ended", "session", c.sessionID, "state", st, "cause", cause)
}

// setStateLocked records and reports a state change without ever blocking:
// when the buffer is full the oldest event is dropped.
func (c *Client) setStateLocked(st State, server string, err error) {
	c.state = st
	if c.statesDone {
		return
	}
	ev := StateEvent{State: st, Server: server, Err: err}
	offerState(c.states, ev)
	for sub := range c.stateSubs {
		offerState(sub, ev)
	}
}

// offerState puts ev on ch, dropping the oldest event when ch is full. Only
// the client sends on ch, under its mutex, so the loop ends.
func offerState(ch chan StateEvent, ev StateEvent) {
	for {
		select {
		case ch <- ev:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// attach makes cn the session's connection and starts its goroutines. It
// reports false (and closes cn) if the session ended meanwhile.
func (c *Client) attach(cn *conn, resp *apipb.ConnectResponse, first bool) bool {
	c.mu.Lock()
	if c.terminal != nil || c.closeAcked {
		c.mu.Unlock()
		cn.close()
		return false
	}
	if resp.TimeoutMs > 0 {
		c.timeout = time.Duration(resp.TimeoutMs) * time.Millisecond
	}
	c.maxRequest = resp.MaxRequestBytes
	c.conn = cn
	c.server = cn.addr
	cn.setTimeout(c.timeout, c.opts.suspendMargin(c.timeout))
	c.lastHeard.Store(int64(c.since()))
	if !first {
		c.resyncLocked(resp.Zxid)
	}
	c.setStateLocked(c.attachStateLocked(cn, first), cn.addr, nil)
	c.mu.Unlock()
	c.log.Info("client: connected", "server", cn.addr, "server_id", resp.ServerId, "session", resp.SessionId, "timeout", c.timeout)
	cn.start()
	return true
}

func (c *Client) since() time.Duration { return time.Since(c.epoch) }

// run supervises the session's connections: when one breaks, it reports
// StateDisconnected and reconnects, until the session ends.
func (c *Client) run(cn *conn) {
	defer close(c.runDone)
	for {
		<-cn.done
		cn.wait()
		c.mu.Lock()
		if c.conn == cn {
			c.conn = nil
		}
		if c.terminal != nil || c.closeAcked {
			c.mu.Unlock()
			return
		}
		c.setStateLocked(StateDisconnected, cn.addr, cn.err)
		c.disconnectedLocked(cn.err)
		c.flaps++
		c.mu.Unlock()
		c.log.Info("client: disconnected", "server", cn.addr, "err", cn.err)
		if cn = c.reconnect(cn.addr); cn == nil {
			return
		}
	}
}

// reconnect tries the servers (others first, in random order, then last)
// until one resumes the session. It gives up, expiring the session, when the
// session timeout has passed since the server last heard from us, or when a
// server says the session expired. It returns nil when the session ended.
func (c *Client) reconnect(last string) *conn {
	// The first failover is immediate; a server that keeps accepting the
	// session and dropping it (or answering UNAVAILABLE) without a good reply
	// in between is retried with a growing delay.
	c.mu.Lock()
	flaps := c.flaps
	c.mu.Unlock()
	if flaps > 1 && !c.sleep(min(time.Duration(flaps-1)*minBackoff, maxBackoff, max(c.remaining(), 0))) {
		return nil
	}
	backoff := minBackoff
	for {
		for _, addr := range shuffled(c.servers, last) {
			remaining := c.remaining()
			if remaining <= 0 {
				c.terminate(fmt.Errorf("%w: no server accepted the session within its timeout", ErrSessionExpired), StateExpired)
				return nil
			}
			if c.ctx.Err() != nil {
				return nil
			}
			cn, resp, err := c.dial(c.ctx, addr, min(c.opts.dialTimeout, remaining), c.resumeRequest())
			if err == nil {
				if resp.SessionId != c.SessionID() {
					cn.close()
					c.terminate(fmt.Errorf("%w: server %s resumed session %d as %d", ErrSessionExpired, addr, c.SessionID(), resp.SessionId), StateExpired)
					return nil
				}
				if c.attach(cn, resp, false) {
					return cn
				}
				return nil
			}
			switch {
			case errors.Is(err, ErrSessionExpired):
				c.terminate(err, StateExpired)
				return nil
			case errors.Is(err, errPoolClosed):
				c.terminate(fmt.Errorf("%w: %w", ErrClosed, err), StateClosed)
				return nil
			case errors.Is(err, ErrAuthFailed):
				c.terminate(fmt.Errorf("%w: %w", ErrSessionExpired, err), StateExpired)
				return nil
			}
			c.log.Debug("client: reconnect failed", "server", addr, "err", err)
		}
		if !c.sleep(min(backoff, max(c.remaining(), 0))) {
			return nil
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// remaining is how long the session may still be alive on the servers.
func (c *Client) remaining() time.Duration {
	c.mu.Lock()
	timeout := c.timeout
	c.mu.Unlock()
	return time.Duration(c.lastHeard.Load()) + timeout - c.since()
}

// sleep waits d; false if the session ended meanwhile.
func (c *Client) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// resumeRequest is the ConnectRequest that resumes the session.
func (c *Client) resumeRequest() *apipb.ConnectRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.watchPathsLocked()
	return &apipb.ConnectRequest{
		SessionId:                  c.sessionID,
		Password:                   c.password,
		TimeoutMs:                  c.timeout.Milliseconds(),
		LastZxid:                   c.lastZxid,
		DataWatches:                w.data,
		ExistWatches:               w.exist,
		ChildWatches:               w.child,
		Vouches:                    true,
		PersistentWatches:          w.persistent,
		PersistentRecursiveWatches: w.recursive,
	}
}

// shuffled returns servers in random order, with last (if present) moved to
// the end.
func shuffled(servers []string, last string) []string {
	out := make([]string, 0, len(servers))
	seenLast := false
	for _, s := range servers {
		if s == last {
			seenLast = true
			continue
		}
		out = append(out, s)
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if seenLast {
		out = append(out, last)
	}
	return out
}
