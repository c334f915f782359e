package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/client"
)

func connect(t testing.TB, servers ...string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	opts := []client.Option{client.WithSessionTimeout(4 * time.Second)}
	if os.Getenv("COORDD_TEST_LOG") != "" {
		opts = append(opts, client.WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("client", strings.Join(servers, ","))))
	}
	c, err := client.Connect(ctx, servers, opts...)
	if err != nil {
		t.Fatalf("connect %v: %v", servers, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestWritesThroughFollowerReadableEverywhere: writes sent to a follower
// are forwarded to the leader and readable on every server.
func TestWritesThroughFollowerReadableEverywhere(t *testing.T) {
	c := New(t, 3, Options{})
	f := c.Follower()
	cl := connect(t, c.Members[f].Cfg.ClientAddr)
	ctx := ctxT(t)
	if _, err := cl.Create(ctx, "/app", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		if _, err := cl.Create(ctx, fmt.Sprintf("/app/n%02d", i), []byte{byte(i)}, client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	// Read-your-writes on the follower, at once.
	kids, _, err := cl.Children(ctx, "/app")
	if err != nil || len(kids) != 30 {
		t.Fatalf("children on the follower: %d %v", len(kids), err)
	}
	for i, m := range c.Members {
		r := connect(t, m.Cfg.ClientAddr)
		if err := r.Sync(ctx, "/app"); err != nil {
			t.Fatalf("sync on %d: %v", i, err)
		}
		kids, st, err := r.Children(ctx, "/app")
		if err != nil || len(kids) != 30 || st.NumChildren != 30 || st.Cversion != 30 {
			t.Fatalf("server %s: %d children, stat %+v, err %v", m.ID, len(kids), st, err)
		}
		data, _, err := r.Get(ctx, "/app/n07")
		if err != nil || len(data) != 1 || data[0] != 7 {
			t.Fatalf("server %s: get: %v %v", m.ID, data, err)
		}
	}
}

// TestSyncGetSeesEveryAcknowledgedWrite: a SyncGet on a follower returns
// the value of the write just acknowledged to a session on the leader, every
// time, though the Sync and the Get travel together.
func TestSyncGetSeesEveryAcknowledgedWrite(t *testing.T) {
	c := New(t, 3, Options{})
	w := connect(t, c.Members[c.LeaderIndex()].Cfg.ClientAddr)
	r := connect(t, c.Members[c.Follower()].Cfg.ClientAddr)
	ctx := ctxT(t)
	if _, err := w.Create(ctx, "/k", []byte("0"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 50; i++ {
		want := fmt.Sprint(i)
		if _, err := w.Set(ctx, "/k", []byte(want), -1); err != nil {
			t.Fatal(err)
		}
		data, st, err := r.SyncGet(ctx, "/k")
		if err != nil || string(data) != want || st.Version != int32(i) {
			t.Fatalf("SyncGet on the follower after write %d: %q (version %d), %v", i, data, st.Version, err)
		}
	}
}

// TestLeaderKillElectsNewLeader: with the leader gone, a new one is elected
// and writes go on within a few seconds; nothing acknowledged is lost.
func TestLeaderKillElectsNewLeader(t *testing.T) {
	c := New(t, 3, Options{})
	cl := connect(t, c.Servers()...)
	ctx := ctxT(t)
	for i := 0; i < 10; i++ {
		if _, err := cl.Create(ctx, fmt.Sprintf("/before%d", i), nil, client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	old := c.LeaderIndex()
	c.Stop(old)
	start := time.Now()
	c.Eventually(10*time.Second, "a write after the leader stopped", func() bool {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cl.Create(wctx, "/after", nil, client.CreateMode{})
		return err == nil || errors.Is(err, client.ErrNodeExists)
	})
	t.Logf("writes resumed %v after the leader stopped", time.Since(start).Round(time.Millisecond))
	if nl := c.LeaderIndex(); nl < 0 || nl == old {
		t.Fatalf("leader %d after stopping %d", nl, old)
	}
	kids, _, err := cl.Children(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if !contains(kids, fmt.Sprintf("before%d", i)) {
			t.Fatalf("acknowledged /before%d lost: %v", i, kids)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRestartedNodeCatchesUp: a follower stopped while writes go on rejoins
// with its data and catches up from the log.
func TestRestartedNodeCatchesUp(t *testing.T) {
	c := New(t, 3, Options{})
	cl := connect(t, c.Members[c.LeaderIndex()].Cfg.ClientAddr)
	ctx := ctxT(t)
	if _, err := cl.Create(ctx, "/x", []byte("0"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	f := c.Follower()
	c.WaitConverged(5*time.Second, cl.LastZxid())
	c.Stop(f)
	var last int64
	for i := 1; i <= 100; i++ {
		st, err := cl.Set(ctx, "/x", []byte(fmt.Sprint(i)), int32(i-1))
		if err != nil {
			t.Fatal(err)
		}
		last = st.Mzxid
	}
	c.Start(f)
	c.WaitConverged(15*time.Second, last)
	r := connect(t, c.Members[f].Cfg.ClientAddr)
	data, st, err := r.Get(ctx, "/x")
	if err != nil || string(data) != "100" || st.Version != 100 {
		t.Fatalf("restarted server: %q %+v %v", data, st, err)
	}
}

// TestSnapshotInstall: a follower whose log is behind the leader's last
// snapshot (and its trailing logs) is brought up by snapshot install.
func TestSnapshotInstall(t *testing.T) {
	c := New(t, 3, Options{SnapshotThreshold: 64, TrailingLogs: 16})
	cl := connect(t, c.Members[c.LeaderIndex()].Cfg.ClientAddr)
	ctx := ctxT(t)
	f := c.Follower()
	c.Stop(f)
	for i := 0; i < 300; i++ {
		if _, err := cl.Create(ctx, fmt.Sprintf("/s%03d", i), []byte("v"), client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	// Snapshot (and so compact) every running server: whichever leads when
	// the follower returns no longer has the entries it lacks.
	for i, m := range c.Members {
		if n := m.Node(); n != nil && i != f {
			if err := n.Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
				t.Fatalf("snapshot on %s: %v", m.ID, err)
			}
			t.Logf("server %s snapshot at index %s", m.ID, n.Raft().Stats()["last_snapshot_index"])
		}
	}
	c.Start(f)
	c.WaitConverged(20*time.Second, cl.LastZxid())
	// Raft records the installed snapshot just after the FSM restored it.
	n := c.Members[f].Node()
	c.Eventually(5*time.Second, "the follower to record the installed snapshot", func() bool {
		return n.Raft().Stats()["last_snapshot_index"] != "0"
	})
	r := connect(t, c.Members[f].Cfg.ClientAddr)
	kids, _, err := r.Children(ctx, "/")
	if err != nil || len(kids) != 301 { // and /zookeeper
		t.Fatalf("follower after snapshot install: %d children, %v", len(kids), err)
	}
}

// TestWholeClusterRestart: every acknowledged write survives stopping and
// restarting every server.
func TestWholeClusterRestart(t *testing.T) {
	c := New(t, 3, Options{SnapshotThreshold: 100, TrailingLogs: 50})
	cl := connect(t, c.Servers()...)
	ctx := ctxT(t)
	var acked []string
	for i := 0; i < 250; i++ {
		p, err := cl.Create(ctx, "/w-", []byte(fmt.Sprint(i)), client.CreateMode{Sequential: true})
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, p)
	}
	_ = cl.Close(ctx)
	c.StopAll()
	for i := range c.Members {
		c.Start(i)
	}
	c.WaitLeader(15 * time.Second)
	r := connect(t, c.Servers()...)
	if err := r.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	for i, p := range acked {
		data, _, err := r.Get(ctx, p)
		if err != nil || string(data) != fmt.Sprint(i) {
			t.Fatalf("acknowledged %s lost after restart: %q %v", p, data, err)
		}
	}
}

// TestSequentialAcrossLeaderChange: sequential names stay unique and
// increasing while the leader changes.
func TestSequentialAcrossLeaderChange(t *testing.T) {
	c := New(t, 3, Options{})
	ctx := ctxT(t)
	setup := connect(t, c.Servers()...)
	if _, err := setup.Create(ctx, "/q", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var names []string
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		cl := connect(t, c.Servers()...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := ""
			for i := 0; i < 200; i++ {
				select {
				case <-stop:
					return
				default:
				}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				p, err := cl.Create(wctx, "/q/item-", nil, client.CreateMode{Sequential: true})
				cancel()
				if err != nil {
					t.Errorf("create: %v", err)
					return
				}
				if p <= prev {
					t.Errorf("sequence went backwards for one client: %s after %s", p, prev)
				}
				prev = p
				mu.Lock()
				names = append(names, p)
				mu.Unlock()
			}
		}()
	}
	c.Eventually(10*time.Second, "some creates", func() bool { mu.Lock(); defer mu.Unlock(); return len(names) > 100 })
	c.Stop(c.LeaderIndex())
	wg.Wait()
	close(stop)
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Fatalf("sequential name %s handed out twice", n)
		}
		seen[n] = true
	}
	// Reads are local: sync first, so that setup's server has applied every
	// create acknowledged (by any server) before this read.
	if err := setup.Sync(ctx, "/q"); err != nil {
		t.Fatal(err)
	}
	kids, _, err := setup.Children(ctx, "/q")
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != len(names) {
		t.Fatalf("%d children, %d acknowledged creates", len(kids), len(names))
	}
	sort.Strings(kids)
	for i, k := range kids {
		if want := fmt.Sprintf("item-%010d", i); k != want {
			t.Fatalf("child %d is %s, want %s (gap or duplicate)", i, k, want)
		}
	}
}

// TestFiveNodesTwoDown: a 5-node cluster keeps serving with two servers
// down (one of them the leader).
func TestFiveNodesTwoDown(t *testing.T) {
	c := New(t, 5, Options{})
	ctx := ctxT(t)
	l := c.LeaderIndex()
	c.Stop(l)
	c.Stop((l + 1) % 5)
	c.WaitLeader(15 * time.Second)
	var up []string
	for _, m := range c.Members {
		if m.Node() != nil {
			up = append(up, m.Cfg.ClientAddr)
		}
	}
	cl := connect(t, up...)
	for i := 0; i < 20; i++ {
		if _, err := cl.Create(ctx, fmt.Sprintf("/five%d", i), nil, client.CreateMode{}); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(10*time.Second, cl.LastZxid())
}

// BenchmarkClusterWrites measures setData throughput through a 3-node
// cluster with 1 and 64 concurrent writers (each its own session).
func BenchmarkClusterWrites(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			c := New(b, 3, Options{})
			ctx := context.Background()
			clients := make([]*client.Client, writers)
			for i := range clients {
				clients[i] = connect(b, c.Servers()...)
				if _, err := clients[i].Create(ctx, fmt.Sprintf("/k%d", i), nil, client.CreateMode{}); err != nil {
					b.Fatal(err)
				}
			}
			val := []byte(strings.Repeat("x", 100))
			runClients(b, clients, "writes/s", func(i int, cl *client.Client) error {
				_, err := cl.Set(ctx, fmt.Sprintf("/k%d", i), val, -1)
				return err
			})
		})
	}
}

// BenchmarkSessionReads measures getData through one server with 64
// concurrent readers, each its own session on a connection of its own, as
// 64 client processes would be: the cost of a round trip on a session's
// stream, client and server (both in this process), without Raft or disk.
func BenchmarkSessionReads(b *testing.B) {
	const readers = 64
	c := New(b, 1, Options{})
	ctx := context.Background()
	clients := make([]*client.Client, readers)
	for i := range clients {
		clients[i] = connect(b, c.Servers()...)
	}
	if _, err := clients[0].Create(ctx, "/r", []byte(strings.Repeat("x", 100)), client.CreateMode{}); err != nil {
		b.Fatal(err)
	}
	runClients(b, clients, "reads/s", func(_ int, cl *client.Client) error {
		_, _, err := cl.Get(ctx, "/r")
		return err
	})
}

// runClients runs b.N ops, shared out over the clients (each in a goroutine
// of its own, calling op with its index), and reports ops per second as
// unit.
func runClients(b *testing.B, clients []*client.Client, unit string, op func(i int, cl *client.Client) error) {
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/len(clients) + 1
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if err := op(i, cl); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*len(clients))/b.Elapsed().Seconds(), unit)
}

// TestTakenAddressIsRecognised: a server whose address another process
// holds fails to start with an error New recognises (EADDRINUSE), so that
// New picks other addresses instead of failing the test.
func TestTakenAddressIsRecognised(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	c := newCluster(t, 1, Options{Tick: 200 * time.Millisecond})
	c.Members[0].Cfg.ClientAddr = taken.Addr().String()
	err = c.start(0, 0)
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("start on a taken address: %v, want EADDRINUSE", err)
	}
	if c.Members[0].Node() != nil {
		t.Fatal("a member that failed to start has a node")
	}
	c.Members[0].Cfg.ClientAddr = FreeAddr(t)
	if err := c.start(0, 5*time.Second); err != nil {
		t.Fatalf("start on a free address: %v", err)
	}
	c.StopAll()
}
