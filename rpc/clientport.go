package rpc

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"time"

	"github.com/coordd/coordd/rpc/zk/jute"
)

// The client port serves both protocols. Every connection is told apart by
// its first four bytes, as etcd tells gRPC from HTTP on one port: a gRPC
// client opens with HTTP/2's preface ("PRI "), a ZooKeeper client with the
// length of its ConnectRequest, a monitoring tool with a four-letter word.
// gRPC connections go to the gRPC server, the others to the ZooKeeper
// front-end; the four bytes are given back to whichever reads the
// connection. With TLS on (Config.ClientTLS) the handshake comes first and
// the decrypted bytes are told apart the same way; a connection that does
// not start with a TLS handshake is refused.

// sniffTimeout bounds the wait for a new connection's first bytes (and,
// with TLS, for its handshake).
const sniffTimeout = 10 * time.Second

// serveClientPort accepts connections on the client port until it closes.
func (n *Node) serveClientPort() {
	defer n.grpcClients.close()
	for {
		c, err := n.clientLn.Accept()
		if err != nil {
			return
		}
		go n.routeClient(c)
	}
}

// routeClient reads a connection's first bytes and hands it on.
func (n *Node) routeClient(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(sniffTimeout))
	conn := c
	var tc *tls.Conn
	if n.clientTLS != nil {
		var ok bool
		if tc, ok = acceptTLS(c, n.clientTLS, "client port", false, n.refusals); !ok {
			c.Close()
			return
		}
		conn = tc
	}
	var first [4]byte
	if _, err := io.ReadFull(conn, first[:]); err != nil {
		conn.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	var pc net.Conn = newPrefixConn(conn, first[:])
	if tc != nil {
		pc = &tlsPrefixConn{prefixConn: pc.(*prefixConn), tls: tc}
	}
	switch jute.Classify(first) {
	case jute.PrefaceHTTP2:
		n.grpcClients.push(pc)
	case jute.PrefaceJute, jute.PrefaceFourLetterWord:
		n.zk.ServeConn(pc)
	default: // a TLS handshake, on a plaintext port (or inside TLS)
		n.refusals.note("client port", c.RemoteAddr(), tlsOnPlainRefusal(false))
		conn.Close()
	}
}

// prefixConn is a connection whose first bytes, already read, are read
// again.
type prefixConn struct {
	net.Conn
	prefix *bytes.Reader
}

func newPrefixConn(c net.Conn, prefix []byte) *prefixConn {
	return &prefixConn{Conn: c, prefix: bytes.NewReader(prefix)}
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if c.prefix.Len() > 0 {
		return c.prefix.Read(p)
	}
	return c.Conn.Read(p)
}

// NetConn returns the connection under c, as tls.Conn's does: whoever
// serves c shuts only its sending side through it (a four-letter word's
// answer ends in FIN, not in a reset).
func (c *prefixConn) NetConn() net.Conn { return c.Conn }

// tlsPrefixConn is a prefixConn over TLS. It reports the handshake, as a
// *tls.Conn does, so that whoever serves the connection (the ZooKeeper
// front-end, gRPC through handshaken) can see the client's verified
// certificate.
type tlsPrefixConn struct {
	*prefixConn
	tls *tls.Conn
}

// ConnectionState returns the TLS handshake's outcome.
func (c *tlsPrefixConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }
