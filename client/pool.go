package client

import (
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// Pool shares gRPC connections among the Clients of one process: one
// connection per server address, carrying the session streams of every
// Client given WithPool(p) that talks to that server. Sessions stay
// independent (each has its own stream, timeout, watches and order); only
// the TCP connection is shared, as etcd's clients share theirs.
//
// A process that runs many sessions (a benchmark, a test harness, a proxy
// for many tenants) saves a socket per session, and under load gRPC writes
// the messages of many streams with one system call instead of one each.
// A process with one session gains nothing from it.
//
// The dial options of the first Client that reaches an address are the
// ones its connection uses. Connections stay open, across sessions coming
// and going (gRPC reconnects them when a server restarts), until Close.
type Pool struct {
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{conns: make(map[string]*grpc.ClientConn)} }

// WithPool makes the Client open its session streams over p's shared
// connections instead of a connection of its own.
func WithPool(p *Pool) Option {
	return func(o *options) { o.pool = p }
}

var errPoolClosed = errors.New("client: pool closed")

// get returns the shared connection to addr (creating it with opts), and
// the function that gives it back (nothing to do: it stays for others).
func (p *Pool) get(addr string, opts []grpc.DialOption) (*grpc.ClientConn, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, errPoolClosed
	}
	cc, ok := p.conns[addr]
	if !ok {
		var err error
		if cc, err = grpc.NewClient(addr, opts...); err != nil {
			return nil, nil, err
		}
		p.conns[addr] = cc
	} else if cc.GetState() == connectivity.TransientFailure {
		// A Client coming (back) to this server wants to know now whether
		// it is up, not after gRPC's reconnect backoff runs out.
		cc.ResetConnectBackoff()
	}
	return cc, func() {}, nil
}

// Close closes every connection of the pool; Clients still using one see
// their stream fail. Later connects through the pool fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.closed = true
	p.mu.Unlock()
	for _, cc := range conns {
		cc.Close()
	}
	return nil
}
