package zk

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/zk/jute"
	"github.com/coordd/coordd/rpc/zk/sasl"
)

// Config configures the front-end.
type Config struct {
	Engine *engine.Engine
	// MaxFrame is the largest request frame accepted (ZooKeeper's
	// jute.maxbuffer); a larger one closes the connection, as ZooKeeper
	// does.
	MaxFrame int
	// FourLetterWords are the words answered (the others get ZooKeeper's
	// "not in the whitelist" answer); nil answers none.
	FourLetterWords map[string]bool
	// Stats reports the figures of the four-letter words: the server's,
	// which also counts the requests of both protocols (the engine's
	// Meter), so that mntr and the server's metrics agree.
	Stats  func() Stats
	Logger *slog.Logger

	// SASL, when set, serves ZooKeeper's SASL authentication (DIGEST-MD5)
	// against its users (sasl.go); without it a SASL request fails with
	// AuthFailed.
	SASL *sasl.Source
	// SASLSuperUser is the SASL user who is also the super user
	// (ZooKeeper's zookeeper.superUser); "" for none.
	SASLSuperUser string
}

// connectTimeout bounds the wait for a connection's first frame.
const connectTimeout = 10 * time.Second

// recvBuffer is the read buffer of a connection: room for ordinary
// requests (a setData of 100 bytes is about 150), small enough for 10 000
// connections (a larger frame is read past it, straight into its own
// buffer).
const recvBuffer = 1 << 10

// connectFrameLimit bounds a ConnectRequest frame (48 bytes with a 16-byte
// password; ZooKeeper allows passwords of any length up to its buffer).
const connectFrameLimit = 1 << 10

// Server serves ZooKeeper connections on the client port. Its zero value is
// not usable; call New.
type Server struct {
	cfg     Config
	log     *slog.Logger
	started time.Time

	mu     sync.Mutex
	conns  map[*conn]struct{}    // connected sessions
	open   map[net.Conn]struct{} // every connection being served
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context // ends when the server closes
	cancel context.CancelFunc
}

// New returns a front-end on cfg.Engine.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 1 << 20
	}
	if cfg.Stats == nil {
		cfg.Stats = func() Stats { return Stats{} }
	}
	s := &Server{cfg: cfg, log: cfg.Logger, started: time.Now(), conns: make(map[*conn]struct{}), open: make(map[net.Conn]struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Close closes every connection and waits until none is being served;
// connections handed to ServeConn afterwards are closed at once.
func (s *Server) Close() {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	for nc := range s.open {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// conn is one ZooKeeper connection and, once connected, its session.
type conn struct {
	srv    *Server
	nc     net.Conn
	remote string
	sess   *engine.Session

	// pending are the requests submitted and not yet answered, in order:
	// the engine answers in the same order, and the reply's encoding
	// depends on the opcode that asked.
	mu      sync.Mutex
	pending []pending

	arrived arrivals // the xids received (recvLoop only)

	// exchange is the connection's SASL exchange, once a client asked for
	// one (recvLoop only).
	exchange *sasl.DigestMD5

	recved, sent atomic.Int64
	timeoutMs    atomic.Int64 // negotiated, once connected
	lastOp       atomic.Value // string
	established  time.Time

	statsMu sync.Mutex
	stats   respStats // guarded by statsMu
}

// respStats are a connection's figures of its answered requests, as
// ZooKeeper's cons reports them (ServerCnxn.updateStatsForResponse):
// latencies in whole milliseconds.
type respStats struct {
	lastCxid int64 // the last answered xid other than a ping's (-1: none)
	lastZxid int64 // the zxid of the last reply
	lastResp int64 // when the last reply was sent, ms since the Unix epoch
	lastLat  int64
	minLat   int64 // valid when count > 0
	maxLat   int64
	count    int64
	totalLat int64
}

func (r *respStats) answered(xid int32, zxid int64, lat time.Duration, now time.Time) {
	ms := lat.Milliseconds()
	if xid >= 0 {
		r.lastCxid = int64(xid)
	}
	r.lastZxid, r.lastResp, r.lastLat = zxid, now.UnixMilli(), ms
	if r.count == 0 || ms < r.minLat {
		r.minLat = ms
	}
	r.maxLat = max(r.maxLat, ms)
	r.count++
	r.totalLat += ms
}

// minLat0 is the least latency, 0 before any.
func (r *respStats) minLat0() int64 {
	if r.count == 0 {
		return 0
	}
	return r.minLat
}

// avgLat is ZooKeeper's: the integer average.
func (r *respStats) avgLat() int64 {
	if r.count == 0 {
		return 0
	}
	return r.totalLat / r.count
}

// respStats returns a copy of the connection's figures.
func (c *conn) respStats() respStats {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	return c.stats
}

// queued returns the number of requests received and not yet answered.
func (c *conn) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// pending is what the encoding of a reply needs of its request.
type pending struct {
	xid      int32
	op       jute.OpCode
	ops      []jute.OpCode // a multi's ops
	badOp    int           // a multi's op the front-end refused (-1: none)
	received time.Time     // for the connection's latencies (cons)

	// saslToken is a SASL step's token for the client (sasl.go).
	saslToken []byte
}

// ServeConn serves one connection whose first bytes are not gRPC's: a
// four-letter word or a ZooKeeper client. It returns when the connection
// ends, and closes it.
func (s *Server) ServeConn(nc net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.open[nc] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		nc.Close()
		s.mu.Lock()
		delete(s.open, nc)
		s.mu.Unlock()
		s.wg.Done()
	}()
	_ = nc.SetReadDeadline(time.Now().Add(connectTimeout))
	var first [4]byte
	if _, err := io.ReadFull(nc, first[:]); err != nil {
		return
	}
	if word, ok := jute.FourLetterWord(first); ok {
		s.fourLetterWord(nc, word)
		return
	}
	frame, err := jute.ReadFrame(io.MultiReader(bytes.NewReader(first[:]), nc), connectFrameLimit)
	if err != nil {
		s.log.Debug("zk: no connect request", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	var creq jute.ConnectRequest
	if err := jute.Unmarshal(frame, &creq); err != nil {
		s.log.Debug("zk: bad connect request", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	s.serve(nc, &creq)
}

// serve runs a connection whose ConnectRequest arrived.
func (s *Server) serve(nc net.Conn, creq *jute.ConnectRequest) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	// Buffered, so that a request's length prefix and body, and often the
	// next requests of a pipelining client, come in one read: unbuffered,
	// every request cost two read calls.
	br := bufio.NewReaderSize(nc, recvBuffer)
	stopWatch := watchGone(nc, br, cancel)
	sess, err := s.cfg.Engine.Connect(ctx, engine.ConnectRequest{
		SessionID: creq.SessionID, Password: creq.Passwd, TimeoutMs: int64(creq.TimeOut), LastZxid: creq.LastZxidSeen,
		Conn: connOf(nc),
	})
	if !stopWatch() && err == nil {
		// The client left while its session was being opened or
		// resumed here: nobody reads the answer.
		sess.Detach()
		return
	}
	if err != nil {
		var ce *engine.ConnectError
		if errors.As(err, &ce) && (ce.Code == engine.SessionExpired || ce.Code == engine.AuthFailed) {
			// ZooKeeper's answer to a session it does not know, or a wrong
			// password: session id 0, timeout 0; the client reports its
			// session expired.
			resp := jute.ConnectResponse{Passwd: make([]byte, 16), HasReadOnly: creq.HasReadOnly}
			_ = nc.SetWriteDeadline(time.Now().Add(connectTimeout))
			_, _ = nc.Write(jute.AppendFrame(nil, &resp))
		}
		// Otherwise (no leader, behind the client's last zxid): close
		// without answering, so that the client tries another server.
		s.log.Debug("zk: connect refused", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	c := &conn{srv: s, nc: nc, remote: nc.RemoteAddr().String(), sess: sess, established: time.Now()}
	c.lastOp.Store("NA")
	c.stats.lastCxid = -1
	// ZooKeeper counts the ConnectRequest among the connection's packets
	// received (and the ConnectResponse among those sent). The server's
	// totals are the engine's (Stats).
	c.recved.Store(1)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		sess.Detach()
	}()

	sent := make(chan struct{})
	go func() {
		defer close(sent)
		c.sendLoop(ctx, creq.HasReadOnly)
		nc.Close() // ends the receive loop
	}()
	c.recvLoop(br)
	sess.End(nil)
	<-sent
}

// watchGone cancels a connect when its client closes the connection (or
// it breaks) before the connect is answered, so that the engine stops
// moving the session here for a client that went elsewhere. It only peeks:
// whatever the client sends meanwhile stays in br for the receive loop. The
// function it returns stops the watch, and reports whether the client was
// still there.
func watchGone(nc net.Conn, br *bufio.Reader, cancel context.CancelFunc) (stop func() bool) {
	done := make(chan bool, 1)
	go func() {
		_, err := br.Peek(1)
		gone := err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
		if gone {
			cancel()
		}
		done <- gone
	}()
	return func() bool {
		_ = nc.SetReadDeadline(time.Now()) // wakes the peek, if it still waits
		gone := <-done
		_ = nc.SetReadDeadline(time.Time{})
		return !gone
	}
}

// recvLoop reads requests from br (the connection's buffered reader) until
// the connection ends or breaks the protocol, and submits them in order.
func (c *conn) recvLoop(br *bufio.Reader) {
	limit := c.srv.cfg.MaxFrame
	for {
		if t := c.timeout(); t > 0 {
			// A client pings at least every third of its timeout; one
			// silent for twice the timeout is gone (its session expires
			// on the leader anyway).
			_ = c.nc.SetReadDeadline(time.Now().Add(2 * t))
		} else {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		frame, err := jute.ReadFrame(br, limit)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.srv.log.Debug("zk: closing connection", "remote", c.remote, "session", c.sess.ID(), "err", err)
			}
			return
		}
		c.recved.Add(1)
		r := jute.NewReader(frame)
		var h jute.RequestHeader
		if err := h.Decode(r); err != nil {
			c.srv.log.Debug("zk: bad request header", "remote", c.remote, "err", err)
			return
		}
		notYet := c.arrived.add(int64(h.Xid)) // the lowest xid not received yet
		body := frame[jute.RequestHeaderSize:]
		p := pending{xid: h.Xid, op: h.Type, badOp: -1, received: time.Now()}
		rec, err := jute.DecodeRequest(h.Type, body)
		var req engine.Request
		var b *badRequest
		var ids []engine.Identity // what a SASL exchange verified
		switch {
		case errors.Is(err, jute.ErrUnknownOp):
			b = bad(engine.Unimplemented, "unknown opcode %d", int32(h.Type))
		case err != nil:
			b = bad(engine.MarshallingError, "%v", err)
		case h.Type == jute.OpSASL:
			req, ids, p.saslToken, b = c.saslStep(h, rec)
		default:
			req, b = requestOf(h, rec)
			if req.Op.IsWrite() {
				// A ZooKeeper client never re-sends a request (it fails
				// what was in flight with ConnectionLoss and goes on with
				// new xids), so every xid that arrived counts as answered;
				// one still to arrive (sent out of order) does not.
				req.LowestPendingXid = min(notYet, req.Xid)
			}
			if m, ok := rec.(*jute.MultiRequest); ok {
				p.ops = make([]jute.OpCode, len(m.Ops))
				for i, o := range m.Ops {
					p.ops[i] = o.Type
				}
			}
		}
		if b != nil {
			p.badOp = b.op
		}
		c.lastOp.Store(opAbbrev(h.Type))
		c.mu.Lock()
		c.pending = append(c.pending, p)
		c.mu.Unlock()
		if b != nil {
			req.Xid = int64(h.Xid)
			c.sess.Reject(&req, b.code, b.msg)
			continue
		}
		if h.Type == jute.OpSASL {
			c.sess.Authenticate(&req, ids)
			continue
		}
		c.sess.Submit(&req)
	}
}

// sendLoop writes what the session queues, in order, until it ends.
func (c *conn) sendLoop(ctx context.Context, readOnlyFlag bool) {
	var buf []byte
	for {
		batch, ended := c.sess.Next(ctx)
		buf = buf[:0]
	encode:
		for i := range batch {
			m := &batch[i]
			switch {
			case m.Connected != nil:
				c.timeoutMs.Store(m.Connected.TimeoutMs)
				buf = jute.AppendFrame(buf, &jute.ConnectResponse{
					TimeOut: int32(m.Connected.TimeoutMs), SessionID: m.Connected.SessionID,
					Passwd: m.Connected.Password, HasReadOnly: readOnlyFlag,
				})
			case m.Response != nil:
				p, ok := c.popPending()
				if !ok {
					c.srv.log.Error("zk: a reply without a request", "session", c.sess.ID(), "xid", m.Response.Xid)
					return
				}
				buf = reply(buf, p, m.Response)
				now := time.Now()
				c.statsMu.Lock()
				c.stats.answered(p.xid, m.Response.Zxid, now.Sub(p.received), now)
				c.statsMu.Unlock()
				if (p.op == jute.OpAuth || p.op == jute.OpSASL) && m.Response.Code == engine.AuthFailed {
					// ZooKeeper answers a failed addAuth or SASL step and
					// closes the connection (the session lives on until it
					// expires or a client resumes it): nothing after it is
					// sent.
					ended, batch = true, batch[:i+1]
					break encode
				}
			case m.Event != nil:
				buf = notification(buf, m.Event)
			}
			// A Final message (expiry, a protocol error) is not sent:
			// ZooKeeper closes the connection, and a client learns of an
			// expiry when it reconnects. Vouches are never asked for here.
		}
		if len(buf) > 0 {
			_ = c.nc.SetWriteDeadline(time.Now().Add(max(c.timeout(), connectTimeout)))
			if _, err := c.nc.Write(buf); err != nil {
				return
			}
			c.sent.Add(int64(len(batch)))
		}
		if ended {
			return
		}
	}
}

// timeout is the negotiated session timeout (0 before the connect is
// answered).
func (c *conn) timeout() time.Duration {
	return time.Duration(c.timeoutMs.Load()) * time.Millisecond
}

func (c *conn) popPending() (pending, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return pending{}, false
	}
	p := c.pending[0]
	c.pending = c.pending[1:]
	return p, true
}

// connOf returns what the connection says of the client: its address, and
// the subject of its certificate when it is a TLS connection (or wraps one)
// whose client certificate the server verified.
func connOf(nc net.Conn) engine.Conn {
	var c engine.Conn
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		c.IP = ap.Addr().Unmap()
	}
	for x := nc; x != nil; {
		if tc, ok := x.(interface{ ConnectionState() tls.ConnectionState }); ok {
			c.X509 = engine.VerifiedSubject(tc.ConnectionState())
			break
		}
		u, ok := x.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		x = u.NetConn()
	}
	return c
}

// opAbbrev is an opcode's four-letter abbreviation, as cons reports a
// connection's last operation (PING, GETD, CREA...).
func opAbbrev(op jute.OpCode) string {
	s := strings.ToUpper(op.String())
	if len(s) > 4 {
		s = s[:4]
	}
	return s
}
