//go:build diskfault

package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/test/cluster/faultfs"
)

// mountFaultFS mounts a faultfs loopback of a new directory on another,
// unmounted when the test ends (after the servers on it have stopped).
func mountFaultFS(t *testing.T) *faultfs.FS {
	t.Helper()
	f, err := faultfs.Mount(t.TempDir(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.SetSyncDelay(0)
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// TestSlowFsync: every fsync of the leader's disk takes 2 s, then 10 s (a
// FUSE file system under its data dir that delays them). The leader hands
// its leadership to another server after its first slow append, says why
// in its log and its metrics, and the cluster goes on writing at the
// healthy servers' pace; no acknowledged write is lost. Before, the leader
// kept its leadership (its heartbeats go on while it syncs) and every
// write of the cluster took at least one slow fsync.
func TestSlowFsync(t *testing.T) {
	requireRoot(t)
	for _, delay := range []time.Duration{2 * time.Second, 10 * time.Second} {
		t.Run(delay.String(), func(t *testing.T) { testSlowFsync(t, delay) })
	}
}

func testSlowFsync(t *testing.T, delay time.Duration) {
	disks := map[string]*faultfs.FS{}
	logs := map[string]*lockedBuffer{}
	nodes, leader := threeNodes(t, func(c *Config) {
		f := mountFaultFS(t)
		disks[c.ID] = f
		c.DataDir = f.Dir
		b := &lockedBuffer{}
		logs[c.ID] = b
		c.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo})).With("server", c.ID)
	})
	dumpLogsOnFailure(t, logs)
	var servers []string
	for _, n := range nodes {
		servers = append(servers, n.ClientAddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := client.Connect(ctx, servers, client.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	if _, err := cl.Create(ctx, "/sf", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	var acked []string
	write := func(i int) (time.Duration, error) {
		p := fmt.Sprintf("/sf/n%04d", i)
		start := time.Now()
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		if _, err := cl.Create(wctx, p, []byte("x"), client.CreateMode{}); err != nil {
			return time.Since(start), err
		}
		acked = append(acked, p)
		return time.Since(start), nil
	}
	for i := range 10 {
		if _, err := write(i); err != nil {
			t.Fatal(err)
		}
	}

	slow := disks[leader.ID()]
	slow.SetSyncDelay(delay)
	start := time.Now()
	// The leader's next append takes one slow fsync; then it must lead no
	// more, within that and an election or two.
	for i := 10; leader.IsLeader(); i++ {
		if time.Since(start) > delay+10*time.Second {
			t.Fatalf("server %s still leads %v after its fsyncs became %v slow", leader.ID(), time.Since(start), delay)
		}
		if _, err := write(i); err != nil {
			t.Logf("write %d: %v", i, err)
		}
	}
	handed := time.Since(start)
	t.Logf("server %s handed its leadership over %v after its fsyncs became %v slow", leader.ID(), handed.Round(time.Millisecond), delay)
	// The healthy servers agree on a leader among them (the slow one
	// learns it only once its slow appends are done).
	healthy := followersOf(nodes, leader)
	newLeader := waitAgreedLeader(t, healthy...)
	// The cluster writes at the healthy servers' pace.
	var worst time.Duration
	for i := 1000; i < 1020; i++ {
		took, err := write(i)
		if err != nil {
			t.Fatalf("write %d after the handover: %v", i, err)
		}
		worst = max(worst, took)
	}
	if worst >= delay {
		t.Fatalf("a write took %v after the handover, as long as a slow fsync (%v)", worst, delay)
	}
	t.Logf("after the handover: 20 writes, the slowest %v", worst.Round(time.Millisecond))
	if l := logs[leader.ID()].String(); !strings.Contains(l, "slow disk") {
		t.Fatalf("server %s's log does not say slow disk", leader.ID())
	}
	if got := counterValue(t, leader, "coordd_raft_log_slow_appends_total"); got < 1 {
		t.Fatalf("coordd_raft_log_slow_appends_total = %v", got)
	}
	slow.SetSyncDelay(0)
	for _, n := range nodes {
		waitFor(t, func() bool { return n.FSM().AppliedIndex() >= newLeader.FSM().AppliedIndex() })
		for _, p := range acked {
			if !hasNode(n, p) {
				t.Fatalf("server %s lacks %s, an acknowledged write", n.ID(), p)
			}
		}
	}
}

// counterValue returns the value of n's metric name (a counter or a
// gauge, without labels).
func counterValue(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	mfs, err := n.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// dumpLogsOnFailure logs every server's log if the test fails.
func dumpLogsOnFailure(t *testing.T, logs map[string]*lockedBuffer) {
	t.Cleanup(func() {
		if t.Failed() {
			for id, b := range logs {
				t.Logf("server %s's log:\n%s", id, b)
			}
		}
	})
}
