package chaos

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/coordd/coordd/rpc/zk/jute"
)

// kazooConn is one TCP (or TLS) connection of a ZooKeeper-protocol session,
// made of the codec (rpc/zk/jute) and run the way kazoo runs its own
// (kazoo/protocol/connection.py): its xids start again from 1 on every
// connection (kazoo sets _xid to 0 in _connect_attempt), addAuth goes with
// xid -4 right after the handshake, a ping goes out when nothing was sent
// for half the read timeout (two thirds of the negotiated session
// timeout), and a connection that brings no frame for a whole read timeout
// while a reply is awaited is given up for lost. Requests are sent one at a
// time; a reply whose xid is not the awaited one is reported (kazoo raises
// "xids do not match"), never taken for the awaited reply.
type kazooConn struct {
	nc     net.Conn
	addr   string
	frames chan []byte
	done   chan struct{}
	once   sync.Once
	// rerr says why the reader stopped; it is read only after frames is
	// closed.
	rerr error

	xid         int32         // the last xid sent: 0 on a new connection
	readTimeout time.Duration // 2/3 of the negotiated timeout (the handshake's wait before it)
	lastSend    time.Time
}

// Why a request has no definite answer.
var (
	// errConnLost: the connection broke, was dropped, or brought nothing
	// for a read timeout; whatever was in flight may or may not apply.
	errConnLost = errors.New("zk-renumber: connection lost")
	// errRunOver: the run ended while a reply was awaited.
	errRunOver = errors.New("zk-renumber: run over")
)

// strayReply is a reply that came while another was awaited, on a
// connection that has one request in flight at a time: the answer of some
// other request.
type strayReply struct {
	want int32
	got  jute.ReplyHeader
}

func (s *strayReply) Error() string {
	return fmt.Sprintf("zk-renumber: reply with xid %d (zxid %d, %v) while the reply to xid %d was awaited", s.got.Xid, s.got.Zxid, s.got.Err, s.want)
}

// maxReplyFrame bounds a reply: the workload's are a few hundred bytes.
const maxReplyFrame = 1 << 20

// dialKazoo opens a connection to addr (with tlsCfg, if not nil) and
// starts reading its frames; timeout bounds the dial and the handshake's
// wait (kazoo's connect timeout).
func dialKazoo(ctx context.Context, addr string, tlsCfg *tls.Config, timeout time.Duration) (*kazooConn, error) {
	d := &net.Dialer{Timeout: timeout}
	var nc net.Conn
	var err error
	if tlsCfg != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: tlsCfg}).DialContext(ctx, "tcp", addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %v", errConnLost, addr, err)
	}
	k := &kazooConn{nc: nc, addr: addr, frames: make(chan []byte, 16), done: make(chan struct{}), readTimeout: timeout}
	go k.read()
	return k, nil
}

// read hands the connection's frames to frames until it ends.
func (k *kazooConn) read() {
	defer close(k.frames)
	br := bufio.NewReader(k.nc)
	for {
		f, err := jute.ReadFrame(br, maxReplyFrame)
		if err != nil {
			k.rerr = err
			return
		}
		select {
		case k.frames <- f:
		case <-k.done:
			k.rerr = net.ErrClosed
			return
		}
	}
}

// close drops the connection, as kazoo's socket shutdown does.
func (k *kazooConn) close() {
	k.once.Do(func() {
		close(k.done)
		k.nc.Close()
	})
}

// lost is errConnLost with its cause.
func lost(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errConnLost, fmt.Sprintf(format, args...))
}

// send writes one frame.
func (k *kazooConn) send(frame []byte) error {
	_ = k.nc.SetWriteDeadline(time.Now().Add(k.readTimeout))
	if _, err := k.nc.Write(frame); err != nil {
		return lost("write to %s: %v", k.addr, err)
	}
	k.lastSend = time.Now()
	return nil
}

// handshake sends the ConnectRequest and reads the ConnectResponse.
func (k *kazooConn) handshake(ctx context.Context, req *jute.ConnectRequest) (jute.ConnectResponse, error) {
	var resp jute.ConnectResponse
	if err := k.send(jute.AppendFrame(nil, req)); err != nil {
		return resp, err
	}
	t := time.NewTimer(k.readTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return resp, errRunOver
	case <-t.C:
		return resp, lost("no connect response from %s within %v", k.addr, k.readTimeout)
	case f, ok := <-k.frames:
		if !ok {
			// No leader, or behind the client's last zxid: the server
			// closes without answering, and the client tries another.
			return resp, lost("%s closed the connection before answering the connect request: %v", k.addr, k.rerr)
		}
		if err := jute.Unmarshal(f, &resp); err != nil {
			return resp, lost("connect response from %s: %v", k.addr, err)
		}
		return resp, nil
	}
}

// request sends a request with the given xid (the next one for an
// ordinary request: see next).
func (k *kazooConn) request(xid int32, op jute.OpCode, body jute.Encoder) error {
	return k.send(jute.AppendFrame(nil, &jute.RequestHeader{Xid: xid, Type: op}, body))
}

// next is the xid of the next ordinary request: 1 on a new connection.
func (k *kazooConn) next() int32 {
	k.xid++
	return k.xid
}

// await waits for the reply to xid, pinging while it waits as kazoo does,
// and returns its header and body. Pings' replies and notifications are
// skipped; any other reply is a strayReply.
func (k *kazooConn) await(ctx context.Context, xid int32) (jute.ReplyHeader, []byte, error) {
	lastRecv := time.Now()
	for {
		now := time.Now()
		dead := lastRecv.Add(k.readTimeout)
		ping := k.lastSend.Add(k.readTimeout / 2)
		if !now.Before(dead) {
			return jute.ReplyHeader{}, nil, lost("no frame from %s for %v while awaiting xid %d", k.addr, k.readTimeout, xid)
		}
		if !now.Before(ping) {
			if err := k.send(jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing})); err != nil {
				return jute.ReplyHeader{}, nil, err
			}
			continue
		}
		t := time.NewTimer(min(dead.Sub(now), ping.Sub(now)))
		select {
		case <-ctx.Done():
			t.Stop()
			return jute.ReplyHeader{}, nil, errRunOver
		case <-t.C:
			continue
		case f, ok := <-k.frames:
			t.Stop()
			if !ok {
				return jute.ReplyHeader{}, nil, lost("%s: %v", k.addr, k.rerr)
			}
			lastRecv = time.Now()
			var h jute.ReplyHeader
			if err := h.Decode(jute.NewReader(f)); err != nil {
				return h, nil, lost("reply header from %s: %v", k.addr, err)
			}
			switch h.Xid {
			case xid:
				return h, f[jute.ReplyHeaderSize:], nil
			case jute.XidPing, jute.XidNotification:
				continue
			}
			return h, nil, &strayReply{want: xid, got: h}
		}
	}
}

// decodeExact decodes a reply body that must be exactly rec: bytes left
// over mean the body is another request's reply.
func decodeExact(body []byte, rec jute.Record) error {
	r := jute.NewReader(body)
	if err := rec.Decode(r); err != nil {
		return err
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d bytes after the %T", r.Len(), rec)
	}
	return nil
}
