package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/rpc/apipb"
)

// conn is one Session stream to one server. It has exactly one sender and
// one receiver goroutine; the Client's run goroutine waits for both to end
// before it reconnects, so two streams of a session never send at once.
type conn struct {
	c       *Client
	addr    string
	release func() // gives the gRPC connection back (closes it unless pooled)
	stream  grpc.BidiStreamingClient[apipb.ClientMessage, apipb.ServerMessage]
	ctx     context.Context
	cancel  context.CancelFunc
	kick    chan struct{}

	sentXid int64 // highest xid sent on this stream; guarded by Client.mu

	vouchInterval time.Duration // the server's (0: it does not vouch)
	pingInterval  time.Duration // send a ping after this long without sending
	readTimeout   time.Duration // give up on the server after this long without a message
	tick          time.Duration

	lastSend atomic.Int64 // since Client.epoch
	lastRecv atomic.Int64

	failOnce sync.Once
	err      error // why the stream ended; read after done is closed
	done     chan struct{}
	wg       sync.WaitGroup
}

// dial opens a Session stream to addr and performs the handshake, bounded
// by timeout and hctx. The stream itself lives until the Client's context
// ends or the conn is closed.
func (c *Client) dial(hctx context.Context, addr string, timeout time.Duration, req *apipb.ConnectRequest) (*conn, *apipb.ConnectResponse, error) {
	cc, release, err := c.connTo(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("client: dial %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	hctx, hcancel := context.WithTimeout(hctx, timeout)
	defer hcancel()
	stop := context.AfterFunc(hctx, cancel)
	fail := func(err error) (*conn, *apipb.ConnectResponse, error) {
		stop()
		cancel()
		release()
		if hctx.Err() != nil && c.ctx.Err() == nil {
			err = fmt.Errorf("client: connect to %s: %w (%v)", addr, hctx.Err(), err)
		}
		return nil, nil, err
	}
	stream, err := apipb.NewCoordClient(cc).Session(ctx)
	if err != nil {
		return fail(fmt.Errorf("client: open session stream to %s: %w", addr, err))
	}
	// On io.EOF the server ended the stream: Recv reports why.
	if err := stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Connect{Connect: req}}); err != nil && !errors.Is(err, io.EOF) {
		return fail(fmt.Errorf("client: send connect to %s: %w", addr, err))
	}
	msg, err := stream.Recv()
	if err != nil {
		return fail(fmt.Errorf("client: connect to %s: %w", addr, err))
	}
	if !stop() {
		return fail(fmt.Errorf("client: connect to %s: handshake aborted", addr))
	}
	switch k := msg.Kind.(type) {
	case *apipb.ServerMessage_Connected:
		cn := &conn{c: c, addr: addr, release: release, stream: stream, ctx: ctx, cancel: cancel,
			kick: make(chan struct{}, 1), done: make(chan struct{}),
			vouchInterval: time.Duration(max(k.Connected.VouchIntervalMs, 0)) * time.Millisecond}
		return cn, k.Connected, nil
	case *apipb.ServerMessage_Response:
		err := codeError(k.Response.Error, k.Response.Message)
		if err == nil {
			err = fmt.Errorf("%w: server %s answered connect with an OK response", ErrSystemError, addr)
		}
		return fail(fmt.Errorf("client: connect to %s: %w", addr, err))
	default:
		return fail(fmt.Errorf("%w: server %s answered connect with %T", ErrSystemError, addr, msg.Kind))
	}
}

// connTo returns a gRPC connection to addr, from the pool when the Client
// has one, and the function that gives it back.
func (c *Client) connTo(addr string) (*grpc.ClientConn, func(), error) {
	if c.opts.pool != nil {
		return c.opts.pool.get(addr, c.opts.dialOptions)
	}
	cc, err := grpc.NewClient(addr, c.opts.dialOptions...)
	if err != nil {
		return nil, nil, err
	}
	return cc, func() { cc.Close() }, nil
}

// setTimeout sets the conn's timing for session timeout d. The server is
// given up after 2/3 of d without a message, and pinged after d/3 without
// a send. A server that vouches is pinged often enough for a vouch to
// arrive well before the suspension (vouch.go): after at most
// (d - V - margin)/2 - V without a send, V being its vouch interval, but
// never more often than every V.
func (cn *conn) setTimeout(d, margin time.Duration) {
	cn.pingInterval = d / 3
	if v := cn.vouchInterval; v > 0 {
		cn.pingInterval = min(cn.pingInterval, max(v, (d-v-margin)/2-v))
	}
	cn.readTimeout = d * 2 / 3
	cn.tick = max(min(d/12, cn.pingInterval/4), time.Millisecond)
	now := int64(cn.c.since())
	cn.lastSend.Store(now)
	cn.lastRecv.Store(now)
}

func (cn *conn) start() {
	cn.wg.Add(2)
	go cn.sendLoop()
	go cn.recvLoop()
}

// wake tells the sender there is something to send.
func (cn *conn) wake() {
	select {
	case cn.kick <- struct{}{}:
	default:
	}
}

// fail ends the stream (once) with err.
func (cn *conn) fail(err error) {
	cn.failOnce.Do(func() {
		cn.err = err
		cn.cancel()
		close(cn.done)
	})
}

// wait waits for the conn's goroutines and releases the gRPC connection.
func (cn *conn) wait() {
	cn.wg.Wait()
	cn.release()
}

// close ends a conn whose goroutines never started (or waits for them).
func (cn *conn) close() {
	cn.fail(ErrClosed)
	cn.wait()
}

func (cn *conn) sendLoop() {
	defer cn.wg.Done()
	t := time.NewTicker(cn.tick)
	defer t.Stop()
	for {
		for _, m := range cn.c.takeUnsent(cn) {
			if err := cn.stream.Send(m); err != nil {
				cn.fail(fmt.Errorf("client: send to %s: %w", cn.addr, err))
				return
			}
			now := int64(cn.c.since())
			cn.lastSend.Store(now)
			cn.c.lastHeard.Store(now)
		}
		select {
		case <-cn.ctx.Done():
			cn.fail(fmt.Errorf("client: stream to %s: %w", cn.addr, cn.ctx.Err()))
			return
		case <-cn.kick:
		case <-t.C:
			now := cn.c.since()
			if silent := now - time.Duration(cn.lastRecv.Load()); silent >= cn.readTimeout {
				cn.fail(fmt.Errorf("client: no message from %s for %v", cn.addr, silent.Round(time.Millisecond)))
				return
			}
			if now-time.Duration(cn.lastSend.Load()) >= cn.pingInterval {
				cn.c.ping()
			}
		}
	}
}

func (cn *conn) recvLoop() {
	defer cn.wg.Done()
	for {
		msg, err := cn.stream.Recv()
		if err != nil {
			cn.fail(fmt.Errorf("client: stream from %s: %w", cn.addr, err))
			return
		}
		cn.lastRecv.Store(int64(cn.c.since()))
		switch k := msg.Kind.(type) {
		case *apipb.ServerMessage_Response:
			err = cn.c.handleResponse(k.Response)
		case *apipb.ServerMessage_Event:
			cn.c.handleEvent(k.Event)
		case *apipb.ServerMessage_Vouch:
			cn.c.handleVouch(cn, k.Vouch.Xid)
		default:
			err = fmt.Errorf("%w: unexpected %T from %s", ErrSystemError, msg.Kind, cn.addr)
		}
		if err != nil {
			cn.fail(err)
			return
		}
	}
}
