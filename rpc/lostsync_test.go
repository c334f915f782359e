//go:build diskfault

package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/test/cluster/faultfs"
)

// TestLostFsync: a server's machine stops while clients write (its file
// system, a faultfs, freezes), and comes back having lost every write it
// had not synced and every directory entry whose directory it had not
// synced, as lazyfs does. The server, the leader or a follower, must start
// again on what is left, hold at least the entries it had appended (a
// follower tells the leader so only once they are synced), and the
// cluster must have lost no acknowledged write.
func TestLostFsync(t *testing.T) {
	requireRoot(t)
	for _, leaderCrashes := range []bool{false, true} {
		name := "follower"
		if leaderCrashes {
			name = "leader"
		}
		t.Run(name, func(t *testing.T) { testLostFsync(t, leaderCrashes) })
	}
}

func testLostFsync(t *testing.T, leaderCrashes bool) {
	disks := map[string]*faultfs.FS{}
	logs := map[string]*lockedBuffer{}
	nodes, leader := threeNodes(t, func(c *Config) {
		f := mountFaultFS(t)
		f.LoseUnsynced(true)
		disks[c.ID] = f
		c.DataDir = f.Dir
		c.walSegmentSize = 64 << 10 // new segments (and their directory entries) as it goes
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = 256, 1<<20, 100*time.Millisecond
		b := &lockedBuffer{}
		logs[c.ID] = b
		c.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo})).With("server", c.ID)
	})
	dumpLogsOnFailure(t, logs)
	target := leader
	if !leaderCrashes {
		target = followersOf(nodes, leader)[0]
	}
	var servers []string
	for _, n := range nodes {
		if n != target {
			servers = append(servers, n.ClientAddr())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.Connect(ctx, servers, client.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	if _, err := cl.Create(ctx, "/lf", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acked []string
	writer := func(prefix string, stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("/lf/%s-%05d", prefix, i)
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := cl.Create(wctx, p, make([]byte, 200), client.CreateMode{})
			wcancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, p)
				mu.Unlock()
			}
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go writer("a", stop, done)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 300 })

	// The machine stops, mid-write.
	f := disks[target.ID()]
	f.Crash()
	appended := target.raft.LastIndex()
	files, entries := f.Lost()
	cfg := target.cfg
	target.crashed.Store(true) // a stopped machine hands nothing over
	target.Close()
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s (leader: %v) stopped at entry %d; lost the unsynced writes of %d files and %d directory entries", cfg.ID, leaderCrashes, appended, files, entries)

	// What is left opens, checked whole, and holds what it had appended
	// (a follower's, acknowledged to the leader once synced).
	kind, rec, err := prepareDataDir(cfg.DataDir, "")
	if err != nil {
		t.Fatalf("server %s's data dir after the crash: %v", cfg.ID, err)
	}
	s, _, err := openStorage(cfg.DataDir, kind, rec, hclog.NewNullLogger(), slog.New(slog.DiscardHandler), walOptions{segmentSize: cfg.walSegmentSize})
	if err != nil {
		t.Fatalf("server %s's data dir after the crash: %v", cfg.ID, err)
	}
	last, _ := s.LastIndex()
	s.Close()
	if !leaderCrashes && last < appended {
		t.Fatalf("server %s holds entries up to %d after the crash; it had appended %d", cfg.ID, last, appended)
	}
	t.Logf("after the crash its log ends at %d", last)

	var again *Node
	waitFor(t, func() bool {
		again, err = NewNode(cfg)
		if err != nil && !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("server %s does not start again: %v", cfg.ID, err)
		}
		return err == nil
	})
	t.Cleanup(func() { again.Close() })
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= n+100 })
	close(stop)
	<-done
	all := []*Node{again}
	for _, n := range nodes {
		if n != target {
			all = append(all, n)
		}
	}
	newLeader := waitAgreedLeader(t, all...)
	for _, n := range all {
		waitFor(t, func() bool { return n.FSM().AppliedIndex() >= newLeader.FSM().AppliedIndex() })
		for _, p := range acked {
			if !hasNode(n, p) {
				t.Fatalf("server %s lacks %s, an acknowledged write", n.ID(), p)
			}
		}
	}
	t.Logf("%d acknowledged writes on every server", len(acked))
}
