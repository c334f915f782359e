package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// zookeeper is the ZooKeeper side, through go-zookeeper.
type zookeeper struct{}

func (zookeeper) name() string { return "ZooKeeper" }

var acl = zk.WorldACL(zk.PermAll)

// connect opens a session on one server and waits until it is established.
func connect(server string) (*zk.Conn, error) {
	conn, events, err := zk.Connect([]string{server}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case e := <-events:
			if e.State == zk.StateHasSession {
				go func() {
					for range events { // drain: the client blocks on a full channel
					}
				}()
				return conn, nil
			}
		case <-deadline.C:
			conn.Close()
			return nil, fmt.Errorf("%s: no session within 10s", server)
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// ensure creates path and its parents.
func ensure(conn *zk.Conn, path string) error {
	p := ""
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		p += "/" + part
		if _, err := conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

func (zookeeper) prepare(c config, s spec, value []byte) (op, func(), error) {
	admin, err := connect(c.servers[0])
	if err != nil {
		return nil, nil, err
	}
	defer admin.Close()
	dir := c.root + "/" + s.workload
	if usesKeys(s) {
		dir = c.root + "/kv"
	}
	if err := ensure(admin, dir); err != nil {
		return nil, nil, err
	}
	var keys []string
	if usesKeys(s) {
		// Earlier runs made most of them: create only what is missing.
		have, _, err := admin.Children(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("children of %s: %w", dir, err)
		}
		exists := make(map[string]bool, len(have))
		for _, name := range have {
			exists[name] = true
		}
		keys = make([]string, keyCount(c, s))
		for i := range keys {
			keys[i] = dir + "/" + keyName(i)
			if exists[keyName(i)] {
				continue
			}
			if _, err := admin.Create(keys[i], value, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return nil, nil, fmt.Errorf("create %s: %w", keys[i], err)
			}
		}
	}
	conns := make([]*zk.Conn, s.clients)
	closeAll := func() {
		for _, conn := range conns {
			if conn != nil {
				conn.Close()
			}
		}
	}
	if s.workload != "session" {
		for i := range conns {
			if conns[i], err = connect(c.servers[i%len(c.servers)]); err != nil {
				closeAll()
				return nil, nil, err
			}
		}
	}
	if usesKeys(s) {
		// The keys were created through the first server: every other
		// session's server catches up with the leader before it reads them.
		for _, conn := range conns {
			if _, err := conn.Sync(dir); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("sync %s: %w", dir, err)
			}
		}
	}
	next := make([]int, s.clients)
	switch s.workload {
	case "write":
		return func(i int, _ *rand.Rand) (time.Duration, error) {
			k := keys[writeKey(i, s.clients, len(keys), &next[i])]
			return timed(func() error { _, err := conns[i].Set(k, value, -1); return err })
		}, closeAll, nil
	case "read":
		return func(i int, rng *rand.Rand) (time.Duration, error) {
			k := keys[rng.IntN(len(keys))]
			return timed(func() error { _, _, err := conns[i].Get(k); return err })
		}, closeAll, nil
	case "read-sync":
		// go-zookeeper has no asynchronous sync, so this is two round
		// trips, where coordctl's read-sync sends both at once (SyncGet).
		return func(i int, rng *rand.Rand) (time.Duration, error) {
			k := keys[rng.IntN(len(keys))]
			return timed(func() error {
				if _, err := conns[i].Sync(k); err != nil {
					return err
				}
				_, _, err := conns[i].Get(k)
				return err
			})
		}, closeAll, nil
	case "create-eph":
		return func(i int, _ *rand.Rand) (time.Duration, error) {
			return timed(func() error {
				p, err := conns[i].Create(dir+"/e-", value, zk.FlagEphemeral|zk.FlagSequence, acl)
				if err != nil {
					return err
				}
				return conns[i].Delete(p, -1)
			})
		}, closeAll, nil
	case "lock":
		// go-zookeeper's Lock is the recipe of ZooKeeper's documentation:
		// a protected ephemeral sequential node, each waiter watching its
		// predecessor. The latency is the acquire's, as in coordctl bench.
		return func(i int, _ *rand.Rand) (time.Duration, error) {
			l := zk.NewLock(conns[i], dir, acl)
			lat, err := timed(l.Lock)
			if err != nil {
				return 0, err
			}
			return lat, l.Unlock()
		}, closeAll, nil
	case "session":
		return func(i int, _ *rand.Rand) (time.Duration, error) {
			return timed(func() error {
				conn, err := connect(c.servers[i%len(c.servers)])
				if err != nil {
					return err
				}
				defer conn.Close()
				_, err = conn.Create(dir+"/s-", value, zk.FlagEphemeral|zk.FlagSequence, acl)
				return err
			})
		}, closeAll, nil
	}
	closeAll()
	return nil, nil, fmt.Errorf("unknown workload %q", s.workload)
}
