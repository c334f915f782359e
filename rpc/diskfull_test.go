//go:build diskfault

package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/fsm"
)

// The tests of this file need root: they mount a small tmpfs under each
// server's data dir, which fills up (ENOSPC) when a test fills it. They
// are built with the tag diskfault (make diskfault, make diskfault-ci)
// and fail, not skip, without root.

// requireRoot fails the test unless it runs as root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the diskfault tests mount file systems: run them as root (make diskfault)")
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// when the test ends (after the servers it holds have stopped: cleanups
// run last-registered first).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -t tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes dir/filler until its file system is full, then gives
// back leave bytes of it, and returns the file's path.
func fillDisk(t *testing.T, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			buf = buf[:len(buf)/2]
		}
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(max(0, st.Size()-leave)); err != nil {
		t.Fatal(err)
	}
	return path
}

// lockedBuffer is a log destination the test reads while servers write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hasNode reports whether n's tree holds path.
func hasNode(n *Node, path string) bool {
	var err error
	n.FSM().Read(func(v fsm.View) { _, _, err = v.Tree.Get(path) })
	return err == nil
}

// TestDiskFull: the disk of one server of three fills up (a tmpfs, full to
// the last byte) while clients write, the leader's or a follower's, under
// either log store. The cluster goes on writing; the server says "disk
// full" in its log and its metrics; once space is freed it catches up by
// itself, without a restart; every acknowledged write is on every server;
// no half-written snapshot is left behind; and the server starts again on
// its data dir, which it checks whole.
//
// Before the fixes: a WAL whose next segment could not be created (its
// file is preallocated) failed every later append with "segment is
// sealed" until a restart, so the server never caught up (raft-wal fork
// part 8); a snapshot that failed for want of space left its partial
// files in snapshots/ (raft fork part 10).
func TestDiskFull(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name   string
		kind   string
		leader bool
	}{
		{"leader/wal", RaftLogWAL, true},
		{"follower/wal", RaftLogWAL, false},
		{"leader/bolt", RaftLogBolt, true},
		{"follower/bolt", RaftLogBolt, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testDiskFull(t, tc.kind, tc.leader)
		})
	}
}

func testDiskFull(t *testing.T, kind string, leaderFull bool) {
	logs := map[string]*lockedBuffer{}
	nodes, leader := threeNodes(t, func(c *Config) {
		c.DataDir = mountTmpfs(t, 4<<20)
		c.RaftLog = kind
		c.walSegmentSize = 64 << 10
		// Snapshots often; but the leader keeps its log, so that a server
		// behind catches up from it, not from a snapshot (installing one
		// starts its log anew, and would hide a log store that no longer
		// appends).
		c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval = 64, 1<<20, 100*time.Millisecond
		b := &lockedBuffer{}
		logs[c.ID] = b
		c.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo})).With("server", c.ID)
	})
	target := leader
	if !leaderFull {
		target = followersOf(nodes, leader)[0]
	}
	var servers []string
	for _, n := range nodes {
		servers = append(servers, n.ClientAddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := client.Connect(ctx, servers, client.WithSessionTimeout(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	if _, err := cl.Create(ctx, "/df", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("d"), 300)
	var acked []string
	write := func(phase string, count int) int {
		failed := 0
		for i := range count {
			p := fmt.Sprintf("/df/%s-%04d", phase, i)
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := cl.Create(wctx, p, data, client.CreateMode{})
			wcancel()
			if err != nil {
				failed++
				t.Logf("%s: %v", p, err)
				continue
			}
			acked = append(acked, p)
		}
		return failed
	}
	write("before", 100)

	// 16 KiB left: enough for the append that fills a WAL segment, not
	// for the next segment (64 KiB, preallocated), a snapshot, or much of
	// raft.db's growth.
	filler := fillDisk(t, target.cfg.DataDir, 16<<10)
	t.Logf("server %s (leader: %v): disk full, %d bytes free", target.ID(), target == leader, freeBytes(target.cfg.DataDir))
	failed := write("full", 400)
	t.Logf("while full: %d of 400 writes failed", failed)
	// Its clients were sent to the others (the writes above went on), and
	// a client that comes to it alone is refused, saying why.
	onlyTarget := func(d time.Duration) error {
		cctx, ccancel := context.WithTimeout(ctx, d)
		defer ccancel()
		tc, err := client.Connect(cctx, []string{target.ClientAddr()}, client.WithSessionTimeout(4*time.Second))
		if err == nil {
			tc.Close(context.Background())
		}
		return err
	}
	if err := onlyTarget(2 * time.Second); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a client of server %s alone, its disk full: %v, want a refusal that says disk full", target.ID(), err)
	} else {
		t.Logf("refused: %v", err)
	}
	if target.IsLeader() {
		t.Fatalf("server %s still leads with a full disk", target.ID())
	}
	waitFor(t, func() bool { return target.disk.isFull() })
	if !strings.Contains(logs[target.ID()].String(), "disk full") {
		t.Fatalf("server %s's log does not say disk full:\n%s", target.ID(), logs[target.ID()])
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	write("freed", 200)
	var last int64
	for _, n := range nodes {
		if n != target && n.FSM().AppliedIndex() > last {
			last = n.FSM().AppliedIndex()
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for target.FSM().AppliedIndex() < last || target.disk.isFull() {
		if time.Now().After(deadline) {
			for id, b := range logs {
				t.Logf("server %s's log:\n%s", id, b)
			}
			t.Fatalf("server %s did not go on by itself once space was freed: applied %d of %d, disk full %v",
				target.ID(), target.FSM().AppliedIndex(), last, target.disk.isFull())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs[target.ID()].String(), "disk space again") {
		t.Fatalf("server %s's log does not say it has space again", target.ID())
	}
	if err := onlyTarget(10 * time.Second); err != nil {
		t.Fatalf("server %s refuses clients once space is freed: %v", target.ID(), err)
	}
	for _, n := range nodes {
		for _, p := range acked {
			if !hasNode(n, p) {
				t.Fatalf("server %s lacks %s, an acknowledged write", n.ID(), p)
			}
		}
	}
	// It starts again on that data dir (checked whole) and holds it all;
	// and no snapshot that failed is left in it (Close waits for one
	// under way).
	cfg := target.cfg
	target.Close()
	tmp, _ := filepath.Glob(filepath.Join(cfg.DataDir, "snapshots", "*.tmp"))
	if len(tmp) > 0 {
		t.Fatalf("failed snapshots left behind: %v", tmp)
	}
	var again *Node
	waitFor(t, func() bool {
		again, err = NewNode(cfg)
		if err != nil && !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("server %s does not start again on its data dir: %v", cfg.ID, err)
		}
		return err == nil
	})
	t.Cleanup(func() { again.Close() })
	waitFor(t, func() bool { return again.FSM().AppliedIndex() >= last })
	for _, p := range acked {
		if !hasNode(again, p) {
			t.Fatalf("restarted, server %s lacks %s", cfg.ID, p)
		}
	}
	t.Logf("acknowledged: %d writes; server %s logged %d lines at ERROR", len(acked), cfg.ID, strings.Count(logs[cfg.ID].String(), "level=ERROR"))
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
