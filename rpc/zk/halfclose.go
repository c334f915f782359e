package zk

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// A four-letter word's answer ends with the server's end of the stream,
// and nothing the client sent may be left unread when the connection
// closes: Linux answers a close with unread input with a reset (RST)
// instead of FIN, and a client that reads to the end of the stream then
// sees ECONNRESET, or loses the answer if the reset overtakes it. Clients
// send more than the four bytes: zktop sends "stat\n" and shuts its
// sending side, `echo ruok | nc` sends "ruok\n". So the answer is followed
// by a half-close (FIN; with TLS a close_notify alert first), and the input
// is read and dropped until the client closes its side or drainTimeout
// passes, as ZooKeeper shuts its output before it closes.

// drainTimeout bounds how long a connection whose answer was sent waits for
// the client to close its side: a client reads the answer and closes in a
// round trip or two; one that holds the connection open is closed then.
const drainTimeout = 3 * time.Second

// drainLimit bounds the bytes read and dropped while waiting (the largest
// frame a client may send; a client sending more is reset).
const drainLimit = 1 << 20

// errNoHalfClose is returned by halfClose for a connection that cannot shut
// only its sending side.
var errNoHalfClose = errors.New("zk: the connection cannot shut its sending side")

// endAnswer shuts the sending side of a connection whose answer is written,
// then reads and drops what the client sends until it closes its side (or
// drainTimeout, or drainLimit bytes), so that the caller's Close finds no
// unread input. A connection that cannot half-close is left as it is: the
// client would see no end of stream before the Close anyway.
func endAnswer(nc net.Conn) {
	if err := halfClose(nc); err != nil {
		return
	}
	_ = nc.SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = io.Copy(io.Discard, io.LimitReader(nc, drainLimit))
}

// halfClose shuts the sending side of nc: TCP's FIN, preceded over TLS by
// the close_notify alert (tls.Conn's CloseWrite sends only the alert and
// leaves the connection under it open). A connection that wraps another
// (the client port hands on connections whose first bytes were read
// already) gives it by NetConn, as tls.Conn does.
func halfClose(nc net.Conn) error {
	for {
		switch c := nc.(type) {
		case *tls.Conn:
			if err := c.CloseWrite(); err != nil {
				return err
			}
			nc = c.NetConn()
		case interface{ CloseWrite() error }: // *net.TCPConn, *net.UnixConn
			return c.CloseWrite()
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return errNoHalfClose
		}
	}
}
