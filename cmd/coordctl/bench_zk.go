package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// The bench verb's ZooKeeper-protocol mode (--protocol zk): the same
// workloads, driven by go-zookeeper (github.com/go-zookeeper/zk), the Go
// client that programs written for ZooKeeper use. Every session is a
// zk.Conn with a TCP connection of its own to one server (session i on
// server i modulo their number), as a ZooKeeper session must be; the lock
// workload is go-zookeeper's own recipe (zk.NewLock). Nothing in this mode
// needs coordd: pointed at a ZooKeeper ensemble it measures that, except for
// the servers' memory and CPU, which only coordd reports.

// zkACL is the ACL of every node the benchmark creates.
var zkACL = zk.WorldACL(zk.PermAll)

// zkBuffer is the size of each go-zookeeper connection's encode and
// decode buffers: room for the largest request and reply of the benchmark.
// go-zookeeper's default (1.5 MiB each) would make 10 000 sessions cost
// 30 GB of client memory.
func (b *bench) zkBuffer() int { return max(256<<10, b.o.valueSize+64<<10) }

// zkConnect opens a go-zookeeper session on server and waits until it is
// established. onEvent, if set, sees every event of the connection.
func (b *bench) zkConnect(ctx context.Context, servers []string, onEvent func(zk.Event)) (*zk.Conn, error) {
	established := make(chan struct{})
	var once sync.Once
	cb := func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
			once.Do(func() { close(established) })
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	var dial zk.Dialer = net.DialTimeout
	if cfg := b.x.tls; cfg != nil {
		dial = tlsDialer(cfg)
	}
	conn, _, err := zk.Connect(servers, b.x.sessionTimeout, zk.WithLogger(quietZK{}), zk.WithLogInfo(false),
		zk.WithEventCallback(cb), zk.WithMaxConnBufferSize(b.zkBuffer()), zk.WithMaxBufferSize(b.zkBuffer()), zk.WithDialer(dial))
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(b.x.timeout)
	defer t.Stop()
	select {
	case <-established:
		return conn, nil
	case <-t.C:
		err = fmt.Errorf("no session within %s", b.x.timeout)
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

// zkConnectAll opens n sessions, session i on server i modulo their number,
// many at a time. onEvent, if set, sees every event of session i; record,
// if set, is given the time each session took to open.
func (b *bench) zkConnectAll(n int, onEvent func(i int, ev zk.Event), record func(time.Duration)) ([]*zk.Conn, map[string]int, error) {
	x := b.x
	conns := make([]*zk.Conn, n)
	spread := map[string]int{}
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			srv := x.servers[i%len(x.servers)]
			var cb func(zk.Event)
			if onEvent != nil {
				cb = func(ev zk.Event) { onEvent(i, ev) }
			}
			t := time.Now()
			conn, err := b.zkConnect(x.ctx, []string{srv}, cb)
			took := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			conns[i] = conn
			spread[srv]++
			if record != nil {
				record(took)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		zkCloseAll(conns)
		return nil, nil, first
	}
	return conns, spread, nil
}

// zkCloseAll closes the sessions (each Close waits for the server's answer,
// at most a second), many at a time.
func zkCloseAll(conns []*zk.Conn) {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, c := range conns {
		if c == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.Close()
		}()
	}
	wg.Wait()
}

// zkEnsure creates path (persistent, empty) unless it exists.
func zkEnsure(c *zk.Conn, path string) error {
	if _, err := c.Create(path, nil, 0, zkACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}

// zkDeleteTree deletes path and everything below it, many deletes at a time.
func zkDeleteTree(c *zk.Conn, path string) error {
	return treeDeleter{
		children: func(p string) ([]string, error) { kids, _, err := c.Children(p); return kids, err },
		delete:   func(p string) error { return c.Delete(p, -1) },
		noNode:   zk.ErrNoNode,
	}.deleteTree(path)
}

// zkCreateKeys creates the keys that do not exist yet, with the bench value,
// through the workers' sessions, many at a time.
func (b *bench) zkCreateKeys(workers []*benchWorker, keys []string) error {
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i, k := range keys {
		c := workers[i%len(workers)].zc
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.Create(k, b.value, 0, zkACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("creating %s: %w", k, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// zkSessionGone reports whether err says a go-zookeeper session ended.
func zkSessionGone(err error) bool {
	return errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}

// zkOp is the op of a workload in the ZooKeeper-protocol mode; root is the
// workload's directory. go-zookeeper's calls take no context: a call ends
// with the connection (the client times it out after two thirds of the
// session timeout without an answer).
func (b *bench) zkOp(workload, root string) benchOp {
	switch workload {
	case "write", "read", "read-sync":
		return func(_ context.Context, w *benchWorker) (time.Duration, error) {
			var key string
			if workload == "write" {
				key = w.keys[w.next]
				w.next = (w.next + 1) % len(w.keys)
			} else {
				key = w.keys[w.rng.IntN(len(w.keys))]
			}
			t := time.Now()
			switch workload {
			case "write":
				if _, err := w.zc.Set(key, b.value, -1); err != nil {
					return 0, fmt.Errorf("set %s: %w", key, err)
				}
			case "read-sync":
				// go-zookeeper's Sync waits for its answer, so this is two
				// round trips (coordd's client sends both at once).
				if _, err := w.zc.Sync(key); err != nil {
					return 0, fmt.Errorf("sync %s: %w", key, err)
				}
				if _, _, err := w.zc.Get(key); err != nil {
					return 0, fmt.Errorf("get %s: %w", key, err)
				}
			default:
				if _, _, err := w.zc.Get(key); err != nil {
					return 0, fmt.Errorf("get %s: %w", key, err)
				}
			}
			return time.Since(t), nil
		}
	case "create-eph":
		return func(_ context.Context, w *benchWorker) (time.Duration, error) {
			t := time.Now()
			name, err := w.zc.Create(root+"/e-", b.value, zk.FlagEphemeral|zk.FlagSequence, zkACL)
			if err != nil {
				return 0, fmt.Errorf("create: %w", err)
			}
			if err := w.zc.Delete(name, -1); err != nil {
				return 0, fmt.Errorf("delete %s: %w", name, err)
			}
			return time.Since(t), nil
		}
	case "session":
		return func(ctx context.Context, w *benchWorker) (time.Duration, error) {
			t := time.Now()
			c, err := b.zkConnect(ctx, w.servers[:1], nil)
			if err != nil {
				return 0, fmt.Errorf("connect: %w", err)
			}
			_, cerr := c.Create(root+"/s-", b.value, zk.FlagEphemeral|zk.FlagSequence, zkACL)
			c.Close() // waits for the server's answer
			if cerr != nil {
				return 0, fmt.Errorf("create: %w", cerr)
			}
			return time.Since(t), nil
		}
	case "lock":
		// go-zookeeper's Lock: a protected ephemeral sequential child, each
		// waiter watching its predecessor, as ZooKeeper's recipes page has it.
		return func(_ context.Context, w *benchWorker) (time.Duration, error) {
			t := time.Now()
			if err := w.zlock.Lock(); err != nil {
				return 0, fmt.Errorf("lock: %w", err)
			}
			acquired := time.Since(t)
			if err := w.zlock.Unlock(); err != nil {
				return 0, fmt.Errorf("unlock: %w", err)
			}
			return acquired, nil
		}
	}
	return nil
}

// runOneZK is runOne in the ZooKeeper-protocol mode.
func (b *bench) runOneZK(s benchSpec, r benchResult, root string) (benchResult, error) {
	x := b.x
	workers := make([]*benchWorker, s.clients)
	for i := range workers {
		workers[i] = newBenchWorker(i, x.servers)
	}
	if s.workload != "lock" {
		if err := zkEnsure(b.zadmin, root); err != nil {
			return r, err
		}
	}
	if s.workload != "session" {
		conns, spread, err := b.zkConnectAll(s.clients, nil, nil)
		if err != nil {
			return r, err
		}
		defer zkCloseAll(conns)
		r.SessionsPerServer = spread
		for i, w := range workers {
			w.zc = conns[i]
		}
	}
	switch s.workload {
	case "write", "read", "read-sync":
		all := b.assignKeys(&r, s, root, workers)
		if err := b.zkCreateKeys(workers, all); err != nil {
			return r, err
		}
		if err := b.syncAll(workers, root); err != nil {
			return r, err
		}
	case "lock":
		r.Latency = "acquire"
		for _, w := range workers {
			w.zlock = zk.NewLock(w.zc, root, zkACL)
		}
	}
	return b.runWorkersFor(s, r, workers, b.zkOp(s.workload, root))
}

// runWatchZK is runWatch in the ZooKeeper-protocol mode.
func (b *bench) runWatchZK(r benchResult, key string) (benchResult, error) {
	conns, spread, err := b.zkConnectAll(r.Clients, nil, nil)
	if err != nil {
		return r, err
	}
	defer zkCloseAll(conns)
	r.SessionsPerServer = spread
	chans := make([]<-chan zk.Event, len(conns))
	for i, c := range conns {
		_, _, ch, err := c.GetW(key)
		if err != nil {
			return r, fmt.Errorf("watching %s: %w", key, err)
		}
		chans[i] = ch
	}
	return b.watchRun(r, len(conns), watchSides{
		set: func() error { _, err := b.zadmin.Set(key, b.value, -1); return err },
		wait: func(ctx context.Context, i int) error {
			select {
			case ev := <-chans[i]:
				if ev.Type != zk.EventNodeDataChanged {
					return fmt.Errorf("watch on %s: unexpected %s event (%v)", key, ev.Type, ev.Err)
				}
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		rearm: func(i int) error {
			_, _, ch, err := conns[i].GetW(key)
			if err != nil {
				return fmt.Errorf("re-arming the watch on %s: %w", key, err)
			}
			chans[i] = ch
			return nil
		},
	})
}
