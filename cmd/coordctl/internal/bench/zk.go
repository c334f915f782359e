package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeper's protocol (--protocol zk): sessions of go-zookeeper
// (github.com/go-zookeeper/zk), the Go client that programs written for
// ZooKeeper use. Every session is a zk.Conn with a TCP connection of its
// own to one server, as a ZooKeeper session must be; the lock is
// go-zookeeper's own recipe (zk.NewLock). Nothing here needs coordd:
// pointed at a ZooKeeper ensemble it measures that.

// zkACL is the ACL of every node the benchmark creates.
var zkACL = zk.WorldACL(zk.PermAll)

// zkProtocol opens go-zookeeper sessions.
type zkProtocol struct {
	sessionTimeout, timeout time.Duration
	tls                     *tls.Config
	// buffer is the size of each connection's encode and decode buffers:
	// room for the largest request and reply of the benchmark.
	// go-zookeeper's default (1.5 MiB each) would make 10 000 sessions
	// cost 30 GB of client memory.
	buffer int
}

func newZK(cfg *Config) *zkProtocol {
	return &zkProtocol{sessionTimeout: cfg.SessionTimeout, timeout: cfg.Timeout, tls: cfg.TLS,
		buffer: max(256<<10, cfg.ValueSize+64<<10)}
}

// open opens a session on servers[0] only: a ZooKeeper session is bound
// to its connection, so each measured session stays where it was put.
func (p *zkProtocol) open(ctx context.Context, servers []string) (session, error) {
	return p.connect(ctx, servers[:1])
}

func (p *zkProtocol) admin(ctx context.Context, servers []string) (session, error) {
	return p.connect(ctx, servers)
}

func (p *zkProtocol) close() {}

// connect opens a go-zookeeper session on one of servers and waits, at
// most Config.Timeout, until it is established.
func (p *zkProtocol) connect(ctx context.Context, servers []string) (*zkSession, error) {
	s := &zkSession{addr: servers[0]}
	established := make(chan struct{})
	var once sync.Once
	onEvent := func(ev zk.Event) {
		if ev.Type != zk.EventSession {
			return
		}
		switch ev.State {
		case zk.StateHasSession:
			once.Do(func() { close(established) })
		case zk.StateExpired:
			s.expired.Add(1)
		case zk.StateDisconnected:
			s.disconnected.Add(1)
		}
	}
	var dial zk.Dialer = net.DialTimeout
	if p.tls != nil {
		dial = tlsDialer(p.tls)
	}
	conn, _, err := zk.Connect(servers, p.sessionTimeout, zk.WithLogger(log.New(io.Discard, "", 0)), zk.WithLogInfo(false),
		zk.WithEventCallback(onEvent), zk.WithMaxConnBufferSize(p.buffer), zk.WithMaxBufferSize(p.buffer), zk.WithDialer(dial))
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(p.timeout)
	defer t.Stop()
	select {
	case <-established:
		s.conn = conn
		return s, nil
	case <-t.C:
		err = fmt.Errorf("no session within %s", p.timeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	conn.Close()
	return nil, fmt.Errorf("cannot connect to %s: %w", strings.Join(servers, ","), err)
}

// tlsDialer dials a TLS connection for go-zookeeper (ZooKeeper's clients
// offer no ALPN protocol; coordd's client port tells them from gRPC by the
// first bytes inside TLS).
func tlsDialer(cfg *tls.Config) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c := cfg.Clone()
		if c.ServerName == "" {
			if host, _, err := net.SplitHostPort(address); err == nil {
				c.ServerName = host
			}
		}
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, c)
	}
}

// zkSession is a go-zookeeper session. Its calls ignore their context.
type zkSession struct {
	conn *zk.Conn
	addr string // the server it was opened on (the admin session: the first offered)
	// expired and disconnected count the session's events of those states
	// since losses last read them.
	expired, disconnected atomic.Int64
}

func (s *zkSession) server() string { return s.addr }

func (s *zkSession) set(_ context.Context, path string, data []byte) (int64, error) {
	st, err := s.conn.Set(path, data, -1)
	if err != nil {
		return 0, err
	}
	return st.Mzxid, nil
}

func (s *zkSession) get(_ context.Context, path string) ([]byte, error) {
	data, _, err := s.conn.Get(path)
	return data, err
}

func (s *zkSession) syncGet(_ context.Context, path string) error {
	if _, err := s.conn.Sync(path); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if _, _, err := s.conn.Get(path); err != nil {
		return fmt.Errorf("get %s: %w", path, err)
	}
	return nil
}

func (s *zkSession) sync(_ context.Context, path string) error {
	_, err := s.conn.Sync(path)
	return err
}

func (s *zkSession) exists(_ context.Context, path string) error {
	_, _, err := s.conn.Exists(path)
	return err
}

func (s *zkSession) create(_ context.Context, path string, data []byte, ephemeralSequential bool) (string, error) {
	var flags int32
	if ephemeralSequential {
		flags = zk.FlagEphemeral | zk.FlagSequence
	}
	return s.conn.Create(path, data, flags, zkACL)
}

func (s *zkSession) delete(_ context.Context, path string) error { return s.conn.Delete(path, -1) }

func (s *zkSession) children(_ context.Context, path string) ([]string, error) {
	kids, _, err := s.conn.Children(path)
	return kids, err
}

func (s *zkSession) watchData(_ context.Context, path string) (func(context.Context) error, error) {
	_, _, ch, err := s.conn.GetW(path)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		select {
		case ev := <-ch:
			if ev.Type != zk.EventNodeDataChanged {
				return fmt.Errorf("watch on %s: unexpected %s event (%v)", path, ev.Type, ev.Err)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil
}

// mutex is go-zookeeper's Lock: a protected ephemeral sequential child,
// each waiter watching its predecessor, as ZooKeeper's recipes page has it.
func (s *zkSession) mutex(path string) mutex { return zkMutex{zk.NewLock(s.conn, path, zkACL)} }

func (s *zkSession) losses() []sessionLoss {
	var out []sessionLoss
	for range s.expired.Swap(0) {
		out = append(out, sessionLoss{state: "Expired"})
	}
	for range s.disconnected.Swap(0) {
		out = append(out, sessionLoss{state: "Disconnected"})
	}
	return out
}

// close waits for the server's answer (at most a second).
func (s *zkSession) close(context.Context) error {
	s.conn.Close()
	return nil
}

// zkMutex is go-zookeeper's Lock.
type zkMutex struct{ l *zk.Lock }

func (m zkMutex) lock(context.Context) error   { return m.l.Lock() }
func (m zkMutex) unlock(context.Context) error { return m.l.Unlock() }
