package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// ErrLinkCut is returned when dialing across a cut link.
var ErrLinkCut = errors.New("cluster: link cut")

// Network is the peer network of an in-process cluster: every server-to-server
// connection goes through it, so a test can cut and heal links. A cut link
// refuses new connections in both directions and closes the open ones, as a
// real partition would. A link may also be slowed, one direction at a time
// (SetDelay).
type Network struct {
	mu    sync.Mutex
	owner map[string]string // peer address -> server id
	cut   map[[2]string]bool
	conns map[[2]string]map[net.Conn]struct{}
	delay map[[2]string]time.Duration // {from, to} -> delay of what from sends to
}

// NewNetwork returns a network with every link up.
func NewNetwork() *Network {
	return &Network{owner: map[string]string{}, cut: map[[2]string]bool{}, conns: map[[2]string]map[net.Conn]struct{}{}}
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Register records which server owns a peer address.
func (n *Network) Register(id, peerAddr string) {
	n.mu.Lock()
	n.owner[peerAddr] = id
	n.mu.Unlock()
}

// Dialer returns the DialPeer function for server id.
func (n *Network) Dialer(id string) func(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, addr string) (net.Conn, error) {
		n.mu.Lock()
		to := n.owner[addr]
		p := pair(id, to)
		blocked := n.cut[p]
		n.mu.Unlock()
		if blocked {
			return nil, ErrLinkCut
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		if w, r := n.delays(id, to); w > 0 || r > 0 {
			c = newDelayedConn(c, w, r)
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cut[p] {
			c.Close()
			return nil, ErrLinkCut
		}
		if n.conns[p] == nil {
			n.conns[p] = map[net.Conn]struct{}{}
		}
		tc := &trackedConn{Conn: c, n: n, p: p}
		n.conns[p][tc] = struct{}{}
		return tc, nil
	}
}

// Cut severs the link between servers a and b.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	p := pair(a, b)
	n.cut[p] = true
	var open []net.Conn
	for c := range n.conns[p] {
		open = append(open, c)
	}
	n.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// Heal restores every link.
func (n *Network) Heal() {
	n.mu.Lock()
	n.cut = map[[2]string]bool{}
	n.mu.Unlock()
}

type trackedConn struct {
	net.Conn
	n    *Network
	p    [2]string
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.conns[c.p], c)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}
