package rpc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/session"
)

// clientService implements the public API.
type clientService struct {
	apipb.UnimplementedCoordServer
	n *Node
}

// connectWait bounds how long a server waits to catch up with a resuming
// client's last zxid before it sends the client elsewhere.
const connectWait = 2 * time.Second

// Session serves one client session stream.
func (s *clientService) Session(stream apipb.Coord_SessionServer) error {
	n := s.n
	ctx := stream.Context()
	first, err := recvWithin(stream, 10*time.Second)
	if err != nil {
		return err
	}
	creq := first.GetConnect()
	if creq == nil {
		return sendFinal(stream, apipb.ErrorCode_MARSHALLING_ERROR, "the first message of a session must be a connect request")
	}
	if !n.serving() {
		return sendFinal(stream, apipb.ErrorCode_UNAVAILABLE, "server "+n.cfg.ID+" has no leader")
	}

	var info session.Info
	if creq.SessionId == 0 {
		timeout := session.Negotiate(time.Duration(creq.TimeoutMs)*time.Millisecond, n.cfg.Tick, n.cfg.MinSessionTimeout, n.cfg.MaxSessionTimeout)
		info, err = n.sessions.open(ctx, timeout)
		if err != nil {
			return sendFinal(stream, apipb.ErrorCode_UNAVAILABLE, "opening session: "+err.Error())
		}
	} else {
		wctx, cancel := context.WithTimeout(ctx, connectWait)
		caughtUp := n.fsm.WaitApplied(wctx.Done(), creq.LastZxid)
		cancel()
		if !caughtUp {
			return sendFinal(stream, apipb.ErrorCode_UNAVAILABLE,
				fmt.Sprintf("server %s is behind the client (applied %d < last seen %d)", n.cfg.ID, n.fsm.AppliedIndex(), creq.LastZxid))
		}
		var perr error
		n.fsm.Read(func(v fsm.View) {
			perr = v.Sessions.CheckPassword(creq.SessionId, creq.Password)
			info, _ = v.Sessions.Get(creq.SessionId)
		})
		switch {
		case errors.Is(perr, session.ErrBadPassword):
			return sendFinal(stream, apipb.ErrorCode_AUTH_FAILED, "wrong session password")
		case perr != nil:
			return sendFinal(stream, apipb.ErrorCode_SESSION_EXPIRED, fmt.Sprintf("session 0x%x expired or unknown", creq.SessionId))
		}
	}

	c := newConn(n.sessions, info.ID)
	c.vouches = creq.Vouches
	var old *conn
	var gone bool
	n.fsm.Read(func(v fsm.View) {
		if _, ok := v.Sessions.Get(info.ID); !ok {
			gone = true // closed between open/check and now
			return
		}
		n.sessions.mu.Lock()
		old = n.sessions.conns[info.ID]
		n.sessions.conns[info.ID] = c
		n.sessions.mu.Unlock()
		c.mu.Lock()
		cresp := &apipb.ConnectResponse{
			SessionId: info.ID, Password: info.Password, TimeoutMs: info.TimeoutMs, ServerId: n.cfg.ID, Zxid: v.Applied,
			MaxRequestBytes: int64(n.cfg.maxMessageSize()),
		}
		if c.vouches {
			cresp.VouchIntervalMs = n.sessions.vouchInterval().Milliseconds()
		}
		c.pushLocked(&apipb.ServerMessage{Kind: &apipb.ServerMessage_Connected{Connected: cresp}})
		if len(creq.DataWatches)+len(creq.ExistWatches)+len(creq.ChildWatches) > 0 {
			fired := v.Watches.Reregister(info.ID, creq.LastZxid, creq.DataWatches, creq.ExistWatches, creq.ChildWatches, v.Tree)
			// Deliver in zxid order, like live events (a NodeDeleted whose
			// zxid is unknown carries 0 and goes first).
			sort.SliceStable(fired, func(i, j int) bool { return fired[i].Event.Zxid < fired[j].Event.Zxid })
			for _, nt := range fired {
				c.pushLocked(&apipb.ServerMessage{Kind: &apipb.ServerMessage_Event{Event: &apipb.WatchEvent{
					Type: apipb.EventType(nt.Event.Type), Path: nt.Event.Path, Zxid: nt.Event.Zxid,
				}}})
			}
		}
		c.mu.Unlock()
	})
	if gone {
		return sendFinal(stream, apipb.ErrorCode_SESSION_EXPIRED, "session expired")
	}
	if old != nil {
		old.end(nil)
	}
	n.sessions.touch(info.ID, 0)
	n.log.Debug("session connected", "session", info.ID, "resumed", creq.SessionId != 0)

	recvErr := make(chan error, 1)
	go func() { recvErr <- s.recvLoop(stream, c) }()
	err = c.sendLoop(stream, ctx)
	// Ended first: a request still being received now registers no watch.
	c.end(nil)

	// Unregister, and drop this session's watches here: the client will
	// re-register them wherever it reconnects.
	n.fsm.Read(func(v fsm.View) {
		n.sessions.mu.Lock()
		if n.sessions.conns[info.ID] == c {
			delete(n.sessions.conns, info.ID)
			v.Watches.RemoveSession(info.ID)
		}
		n.sessions.mu.Unlock()
	})
	select {
	case rerr := <-recvErr:
		if err == nil && rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = rerr
		}
	default:
	}
	return err
}

// recvLoop reads requests until the stream ends.
func (s *clientService) recvLoop(stream apipb.Coord_SessionServer, c *conn) error {
	for {
		msg, err := stream.Recv()
		if err != nil {
			c.end(nil)
			return err
		}
		req := msg.GetRequest()
		if req == nil {
			c.end(errResponse(0, apipb.ErrorCode_MARSHALLING_ERROR, "expected a request after connect"))
			return nil
		}
		if req.Xid <= c.lastXid {
			c.end(errResponse(req.Xid, apipb.ErrorCode_MARSHALLING_ERROR,
				fmt.Sprintf("xid %d does not follow %d: xids must increase", req.Xid, c.lastXid)))
			return nil
		}
		c.lastXid = req.Xid
		s.n.sessions.touch(c.id, req.Xid)
		c.enqueue(req)
	}
}

// sendLoop writes queued messages until the connection ends, then flushes.
func (c *conn) sendLoop(stream apipb.Coord_SessionServer, ctx context.Context) error {
	for {
		select {
		case <-c.wake:
		case <-c.done:
		case <-ctx.Done():
			return nil
		}
		c.mu.Lock()
		batch := c.out
		c.out = nil
		ended := c.ended
		c.mu.Unlock()
		for _, m := range batch {
			if err := stream.Send(m); err != nil {
				return err
			}
		}
		if ended {
			// Whatever was queued before the end is out; stop.
			c.mu.Lock()
			rest := c.out
			c.out = nil
			c.mu.Unlock()
			for _, m := range rest {
				if err := stream.Send(m); err != nil {
					return err
				}
			}
			return nil
		}
	}
}

func recvWithin(stream apipb.Coord_SessionServer, d time.Duration) (*apipb.ClientMessage, error) {
	type res struct {
		m   *apipb.ClientMessage
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := stream.Recv()
		ch <- res{m, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-t.C:
		return nil, status.Error(codes.DeadlineExceeded, "no connect request received")
	}
}

func sendFinal(stream apipb.Coord_SessionServer, code apipb.ErrorCode, msg string) error {
	_ = stream.Send(&apipb.ServerMessage{Kind: &apipb.ServerMessage_Response{Response: errResponse(0, code, msg)}})
	return nil
}
