package rpc

import (
	"bytes"
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
// connection.

// sniffTimeout bounds the wait for a new connection's first bytes.
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
	var first [4]byte
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	if _, err := io.ReadFull(c, first[:]); err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, prefix: bytes.NewReader(first[:])}
	switch jute.Classify(first) {
	case jute.PrefaceHTTP2:
		n.grpcClients.push(pc)
	case jute.PrefaceJute, jute.PrefaceFourLetterWord:
		n.zk.ServeConn(pc)
	default:
		n.log.Info("client port: refusing a TLS connection: TLS is not configured", "remote", c.RemoteAddr().String())
		c.Close()
	}
}

// prefixConn is a connection whose first bytes, already read, are read
// again.
type prefixConn struct {
	net.Conn
	prefix *bytes.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if c.prefix.Len() > 0 {
		return c.prefix.Read(p)
	}
	return c.Conn.Read(p)
}
