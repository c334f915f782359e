package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// etcd is the etcd side, through clientv3 and its concurrency package.
// etcd has keys, leases and revisions where ZooKeeper and coordd have
// znodes, sessions and versions, so each workload uses its nearest
// equivalent, as written beside it.
type etcd struct{}

func (etcd) name() string { return "etcd" }

// etcdTimeout bounds every operation, so that a stuck cluster fails the
// run instead of hanging it.
const etcdTimeout = 30 * time.Second

// timedCtx runs f with a context bounded by etcdTimeout and returns how
// long f took.
func timedCtx(f func(context.Context) error) (time.Duration, error) {
	cx, cancel := context.WithTimeout(context.Background(), etcdTimeout)
	defer cancel()
	return timed(func() error { return f(cx) })
}

// leaseTTL is the TTL of the leases that stand for sessions, in seconds
// (coordctl bench's session timeout is 10 s).
const leaseTTL = 10

func etcdConnect(server string) (*clientv3.Client, error) {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{server},
		DialTimeout: 10 * time.Second, // and wait until connected
		Logger:      zap.NewNop(),
	})
}

func (etcd) prepare(c config, s spec, value []byte) (op, func(), error) {
	ctx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), etcdTimeout)
	}
	dir := c.root + "/" + s.workload
	if usesKeys(s) {
		dir = c.root + "/kv"
	}
	var keys []string
	if usesKeys(s) {
		admin, err := etcdConnect(c.servers[0])
		if err != nil {
			return nil, nil, err
		}
		// Earlier runs made most of them: put only what is missing.
		cx, cancel := ctx()
		have, err := admin.Get(cx, dir+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		cancel()
		if err != nil {
			admin.Close()
			return nil, nil, fmt.Errorf("keys under %s: %w", dir, err)
		}
		exists := make(map[string]bool, len(have.Kvs))
		for _, kv := range have.Kvs {
			exists[string(kv.Key)] = true
		}
		keys = make([]string, keyCount(c, s))
		for i := range keys {
			keys[i] = dir + "/" + keyName(i)
			if exists[keys[i]] {
				continue
			}
			cx, cancel := ctx()
			_, err := admin.Put(cx, keys[i], string(value))
			cancel()
			if err != nil {
				admin.Close()
				return nil, nil, fmt.Errorf("put %s: %w", keys[i], err)
			}
		}
		admin.Close()
	}
	clients := make([]*clientv3.Client, s.clients)
	// One lease per client stands for its session where the workload
	// needs one (create-eph, lock), as coordctl bench's clients each hold
	// a session.
	sessions := make([]*concurrency.Session, s.clients)
	closeAll := func() {
		for _, se := range sessions {
			if se != nil {
				se.Close()
			}
		}
		for i, cl := range clients {
			if cl != nil && (!c.shareConns || i < len(c.servers)) {
				cl.Close()
			}
		}
	}
	for i := range clients {
		var err error
		if c.shareConns && i >= len(c.servers) {
			clients[i] = clients[i%len(c.servers)] // one connection per server
		} else if clients[i], err = etcdConnect(c.servers[i%len(c.servers)]); err != nil {
			closeAll()
			return nil, nil, err
		}
		if s.workload == "create-eph" || s.workload == "lock" {
			if sessions[i], err = concurrency.NewSession(clients[i], concurrency.WithTTL(leaseTTL)); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("lease: %w", err)
			}
		}
	}
	next := make([]int, s.clients)
	val := string(value)
	switch s.workload {
	case "write":
		return func(i int, _ *rand.Rand) (time.Duration, error) {
			k := keys[writeKey(i, s.clients, len(keys), &next[i])]
			return timedCtx(func(cx context.Context) error { _, err := clients[i].Put(cx, k, val); return err })
		}, closeAll, nil
	case "read", "read-sync":
		// read: a serializable read is answered by the server the client
		// is connected to, from its own state, as a ZooKeeper or coordd
		// read is. read-sync: etcd's default, linearizable read, for which
		// the server confirms with the leader's read index first, as sync
		// + read does.
		var opts []clientv3.OpOption
		if s.workload == "read" {
			opts = append(opts, clientv3.WithSerializable())
		}
		return func(i int, rng *rand.Rand) (time.Duration, error) {
			k := keys[rng.IntN(len(keys))]
			return timedCtx(func(cx context.Context) error { _, err := clients[i].Get(cx, k, opts...); return err })
		}, closeAll, nil
	case "create-eph":
		// etcd has no sequential keys: each op puts a key of its own,
		// attached to the client's lease (it goes when the lease does, as
		// an ephemeral goes with its session), then deletes it.
		return func(i int, _ *rand.Rand) (time.Duration, error) {
			next[i]++
			k := dir + "/e-" + strconv.Itoa(i) + "-" + strconv.Itoa(next[i])
			return timedCtx(func(cx context.Context) error {
				if _, err := clients[i].Put(cx, k, val, clientv3.WithLease(sessions[i].Lease())); err != nil {
					return err
				}
				_, err := clients[i].Delete(cx, k)
				return err
			})
		}, closeAll, nil
	case "lock":
		// concurrency.Mutex is etcd's lock recipe: a key per waiter under
		// the lock's prefix, attached to its lease; each waiter waits for
		// the deletion of the key created just before its own.
		return func(i int, _ *rand.Rand) (time.Duration, error) {
			m := concurrency.NewMutex(sessions[i], dir+"/")
			cx, cancel := ctx()
			defer cancel()
			lat, err := timed(func() error { return m.Lock(cx) })
			if err != nil {
				return 0, err
			}
			return lat, m.Unlock(cx)
		}, closeAll, nil
	case "session":
		// A session is a lease: grant it (and keep it alive), put one key
		// attached to it, and revoke it, which deletes the key.
		return func(i int, _ *rand.Rand) (time.Duration, error) {
			next[i]++
			k := dir + "/s-" + strconv.Itoa(i) + "-" + strconv.Itoa(next[i])
			return timed(func() error {
				se, err := concurrency.NewSession(clients[i], concurrency.WithTTL(leaseTTL))
				if err != nil {
					return err
				}
				cx, cancel := ctx()
				defer cancel()
				_, err = clients[i].Put(cx, k, val, clientv3.WithLease(se.Lease()))
				if cerr := se.Close(); err == nil {
					err = cerr
				}
				return err
			})
		}, closeAll, nil
	}
	closeAll()
	return nil, nil, fmt.Errorf("unknown workload %q", s.workload)
}
