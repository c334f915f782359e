package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc"
	"github.com/coordd/coordd/test/cluster/freeport"
	"github.com/coordd/coordd/tree"
)

// Options tune an in-process cluster.
type Options struct {
	// Tick is the session tick (default 200ms). Sessions are bounded to
	// [2, 20] ticks (0.4s to 4s), below coordd's default maximum of 40
	// ticks, so that the sessions of tests that wait for an expiry end
	// quickly.
	Tick time.Duration
	// SnapshotThreshold and TrailingLogs as in rpc.Config (defaults: rpc's).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// ReapInterval is the leader's reaper period (default 100ms).
	ReapInterval time.Duration
	// DisableTTL refuses TTL nodes.
	DisableTTL bool
	// MaxDataSize is the largest znode, as in rpc.Config (default rpc's).
	MaxDataSize int
	// Verbose routes server logs to t.Log.
	Verbose bool
	// Seed, if set, prepares each member's data dir before its first start
	// (a test restores a backup into it); the members then start on it
	// rather than bootstrap.
	Seed func(cfg rpc.Config) error
	// SuperDigest is rpc.Config's (the super user's digest).
	SuperDigest string
	// SASLUsers and SASLSuperUser are rpc.Config's (the JAAS file of the
	// SASL users, and the SASL super user).
	SASLUsers     string
	SASLSuperUser string
	// ElectionTimeout is Raft's heartbeat and election timeout (default
	// 500ms). A server with no leader for twice that closes its client
	// streams.
	ElectionTimeout time.Duration
	// Admin gives each server an admin HTTP address (rpc.Config.MetricsAddr:
	// metrics, /livez, /readyz) of its own; Node().MetricsAddr() says which.
	Admin bool
	// LockDelays are every server's lock-delay rules (rpc.Config's).
	LockDelays []rpc.LockDelay
}

// Cluster is a set of in-process coordd servers.
type Cluster struct {
	t       testing.TB
	Net     *Network
	Members []*Member
}

// Member is one server of a Cluster; Node is nil while it is stopped.
type Member struct {
	ID   string
	Cfg  rpc.Config
	mu   sync.Mutex
	node *rpc.Node
}

// Node returns the running server, or nil.
func (m *Member) Node() *rpc.Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.node
}

// FreeAddr returns an unused 127.0.0.1 address, never the same twice in a
// process (freeport.Addr).
func FreeAddr(t testing.TB) string { return freeport.Addr(t) }

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// New starts an n-server cluster and waits for a leader. Everything stops
// when the test ends.
//
// Addresses come from FreeAddr, which only finds a port free at the time:
// another test binary running in parallel may bind it first. If a first
// start finds its address taken, New starts over with fresh addresses and
// fresh data dirs (a server that did start has bootstrapped with the old
// peer addresses).
func New(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if opts.Tick == 0 {
		opts.Tick = 200 * time.Millisecond
	}
	if opts.ReapInterval == 0 {
		opts.ReapInterval = 100 * time.Millisecond
	}
	if opts.ElectionTimeout == 0 {
		opts.ElectionTimeout = 500 * time.Millisecond
	}
	for attempt := 1; ; attempt++ {
		c := newCluster(t, n, opts)
		var err error
		if opts.Seed != nil {
			for _, m := range c.Members {
				if err := opts.Seed(m.Cfg); err != nil {
					t.Fatalf("seeding server %s: %v", m.ID, err)
				}
			}
		}
		for i := range c.Members {
			if err = c.start(i, 0); err != nil {
				break
			}
		}
		if err != nil {
			c.StopAll()
			if attempt < 5 && errors.Is(err, syscall.EADDRINUSE) {
				t.Logf("starting a cluster: %v; again with other addresses", err)
				continue
			}
			t.Fatalf("starting a cluster: %v", err)
		}
		t.Cleanup(c.StopAll)
		c.WaitLeader(15 * time.Second)
		c.waitConfigSettled(15 * time.Second)
		return c
	}
}

// waitConfigSettled waits until every member's /zookeeper/config lists
// every member's client address, and every member has applied the entry
// that raised the cluster to this build's command level. Each server
// registers its own address after the cluster starts, and each
// registration changes /zookeeper/config (and fires the watches on it,
// recursive ones on / among them, as in ZooKeeper): a test starts once
// those changes are behind it, with the semantics of this build's level.
func (c *Cluster) waitConfigSettled(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		settled, last := true, ""
		for _, m := range c.Members {
			n := m.Node()
			if n == nil {
				continue
			}
			var data []byte
			var level int64
			n.FSM().Read(func(v fsm.View) { data, _, _ = v.Tree.Get(tree.ConfigPath); level = v.Level })
			if level < fsm.Level {
				settled, last = false, fmt.Sprintf("server %s: command level %d, not yet %d", m.ID, level, fsm.Level)
			}
			for _, o := range c.Members {
				if !strings.Contains(string(data), o.Cfg.ClientAddr) {
					settled, last = false, fmt.Sprintf("server %s: %q lacks %s", m.ID, data, o.Cfg.ClientAddr)
				}
			}
		}
		if settled {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("/zookeeper/config not settled after %v: %s", d, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newCluster configures n members on fresh addresses and data dirs.
func newCluster(t testing.TB, n int, opts Options) *Cluster {
	c := &Cluster{t: t, Net: NewNetwork()}
	var peers []rpc.Peer
	for i := 1; i <= n; i++ {
		id := fmt.Sprint(i)
		peerAddr := FreeAddr(t)
		c.Net.Register(id, peerAddr)
		peers = append(peers, rpc.Peer{ID: id, Addr: peerAddr})
		logger := slog.New(slog.DiscardHandler)
		if opts.Verbose || os.Getenv("COORDD_TEST_LOG") != "" {
			logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		c.Members = append(c.Members, &Member{ID: id, Cfg: rpc.Config{
			ID: id, DataDir: t.TempDir(), ClientAddr: FreeAddr(t), PeerAddr: peerAddr,
			Tick: opts.Tick, MaxSessionTimeout: 20 * opts.Tick,
			HeartbeatTimeout: opts.ElectionTimeout, ElectionTimeout: opts.ElectionTimeout,
			LeaderLeaseTimeout: 250 * time.Millisecond, SnapshotThreshold: opts.SnapshotThreshold,
			TrailingLogs: opts.TrailingLogs, SnapshotInterval: 200 * time.Millisecond,
			Logger: logger.With("server", id), DialPeer: c.Net.Dialer(id),
			ReapInterval: opts.ReapInterval, DisableTTL: opts.DisableTTL, MaxDataSize: opts.MaxDataSize,
			SuperDigest: opts.SuperDigest, SASLUsers: opts.SASLUsers, SASLSuperUser: opts.SASLSuperUser,
			LockDelays: opts.LockDelays,
		}})
	}
	for _, m := range c.Members {
		m.Cfg.Peers = peers
		if opts.Admin {
			m.Cfg.MetricsAddr = FreeAddr(t)
		}
	}
	return c
}

// Start starts (or restarts, with its data) member i.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	// The old listener's port may take a moment to be free again.
	if err := c.start(i, 5*time.Second); err != nil {
		c.t.Fatalf("starting server %s: %v", c.Members[i].ID, err)
	}
}

// start starts member i unless it runs, trying again for up to wait.
func (c *Cluster) start(i int, wait time.Duration) error {
	m := c.Members[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node != nil {
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		node, err := rpc.NewNode(m.Cfg)
		if err == nil {
			m.node = node
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("server %s: %w", m.ID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops member i (a clean shutdown; its data stays).
func (c *Cluster) Stop(i int) {
	m := c.Members[i]
	m.mu.Lock()
	n := m.node
	m.node = nil
	m.mu.Unlock()
	if n != nil {
		n.Close()
	}
}

// StopAll stops every member.
func (c *Cluster) StopAll() {
	var wg sync.WaitGroup
	for i := range c.Members {
		wg.Add(1)
		go func(i int) { defer wg.Done(); c.Stop(i) }(i)
	}
	wg.Wait()
}

// Servers returns every member's client address.
func (c *Cluster) Servers() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.Cfg.ClientAddr)
	}
	return out
}

// LeaderIndex returns the index of the running leader, or -1.
func (c *Cluster) LeaderIndex() int {
	for i, m := range c.Members {
		if n := m.Node(); n != nil && n.IsLeader() {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a running member leads and has applied its term's
// first entry, and returns its index.
func (c *Cluster) WaitLeader(d time.Duration) int {
	c.t.Helper()
	var idx int
	c.Eventually(d, "a leader", func() bool {
		idx = c.LeaderIndex()
		if idx < 0 {
			return false
		}
		n := c.Members[idx].Node()
		return n != nil && n.LeaderReady()
	})
	return idx
}

// Follower returns the index of some running non-leader member.
func (c *Cluster) Follower() int {
	l := c.LeaderIndex()
	for i, m := range c.Members {
		if i != l && m.Node() != nil {
			return i
		}
	}
	return -1
}

// Isolate cuts every link of member i.
func (c *Cluster) Isolate(i int) {
	for j := range c.Members {
		if j != i {
			c.Net.Cut(c.Members[i].ID, c.Members[j].ID)
		}
	}
}

// WaitConverged waits until every running member has applied the same
// index, at least min.
func (c *Cluster) WaitConverged(d time.Duration, min int64) {
	c.t.Helper()
	c.Eventually(d, "members to converge", func() bool {
		var idx int64 = -1
		for _, m := range c.Members {
			n := m.Node()
			if n == nil {
				continue
			}
			a := n.FSM().AppliedIndex()
			if a < min || (idx >= 0 && a != idx) {
				return false
			}
			idx = a
		}
		return true
	})
}

// Eventually polls cond until it holds or d passes (then fails the test).
func (c *Cluster) Eventually(d time.Duration, what string, cond func() bool) {
	c.t.Helper()
	Eventually(c.t, d, what, cond)
}

// Eventually polls cond every few milliseconds until it holds, failing t
// when d passes first.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
