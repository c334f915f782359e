package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/rpc/tlsutil"
)

// Every connection to a peer port starts with one byte saying who it is for.
const (
	tagRaft = 'R'
	tagPeer = 'G'
)

// peerMux accepts connections on the peer port and hands them to Raft or to
// the peer gRPC server according to their first byte. With peer TLS on
// (tls set) every connection, both ways, is TLS first, and the tag is the
// first byte inside it; both sides verify each other (tlsutil's peer
// configurations), so Raft and forwarding are covered alike.
type peerMux struct {
	ln       net.Listener
	raft     *muxListener
	grpc     *muxListener
	dial     func(ctx context.Context, addr string) (net.Conn, error)
	tls      *tlsutil.Source // nil: plaintext
	serveTLS *tls.Config
	refusals *refusals
	wg       sync.WaitGroup
}

func newPeerMux(ln net.Listener, dial func(ctx context.Context, addr string) (net.Conn, error), src *tlsutil.Source, refusals *refusals) *peerMux {
	m := &peerMux{ln: ln, dial: dial, tls: src, refusals: refusals}
	if src != nil {
		m.serveTLS = tlsutil.PeerServerConfig(src)
	}
	m.raft = newMuxListener(ln.Addr())
	m.grpc = newMuxListener(ln.Addr())
	m.wg.Add(1)
	go m.serve()
	return m
}

func (m *peerMux) serve() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			m.raft.close()
			m.grpc.close()
			return
		}
		go m.route(c)
	}
}

func (m *peerMux) route(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	conn := c
	if m.tls != nil {
		tc, ok := acceptTLS(c, m.serveTLS, "peer port", true, m.refusals)
		if !ok {
			c.Close()
			return
		}
		conn = tc
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		conn.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	switch b[0] {
	case tagRaft:
		m.raft.push(conn)
	case tagPeer:
		m.grpc.push(conn)
	case tlsutil.RecordTypeHandshake:
		m.refusals.note("peer port", c.RemoteAddr(), tlsOnPlainRefusal(true))
		conn.Close()
	default:
		conn.Close()
	}
}

func (m *peerMux) close() {
	m.ln.Close()
	m.wg.Wait()
}

// dialTagged opens a connection to a peer and announces its purpose.
func (m *peerMux) dialTagged(ctx context.Context, addr string, tag byte) (net.Conn, error) {
	c, err := m.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if m.tls != nil {
		tc := tls.Client(c, tlsutil.PeerClientConfig(m.tls, addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, peerHandshakeError(addr, err)
		}
		c = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetWriteDeadline(dl)
	}
	if _, err := c.Write([]byte{tag}); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

// defaultDialer dials from the local peer address, so that a host firewall
// rule on the source address (and a multi-homed host) sees the right one.
func defaultDialer(localPeerAddr string) func(ctx context.Context, addr string) (net.Conn, error) {
	d := &net.Dialer{}
	if host, _, err := net.SplitHostPort(localPeerAddr); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			d.LocalAddr = &net.TCPAddr{IP: ip}
		}
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}
}

// muxListener is a net.Listener fed by peerMux.
type muxListener struct {
	addr   net.Addr
	ch     chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func newMuxListener(addr net.Addr) *muxListener {
	return &muxListener{addr: addr, ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *muxListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *muxListener) close() { l.once.Do(func() { close(l.closed) }) }

func (l *muxListener) Close() error { l.close(); return nil }

func (l *muxListener) Addr() net.Addr { return l.addr }

// raftStream is Raft's StreamLayer over the peer mux.
type raftStream struct {
	*muxListener
	mux       *peerMux
	advertise net.Addr
}

func (s *raftStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.mux.dialTagged(ctx, string(addr), tagRaft)
}

func (s *raftStream) Addr() net.Addr { return s.advertise }

var errNoLeader = errors.New("rpc: no leader")
