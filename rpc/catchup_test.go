package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/rpc/apipb"
)

// replicationFailures counts the leader's "failed to appendEntries to" and
// "failed to install snapshot" log records: one per failed attempt of a
// replicator (not of a heartbeat), after each of which hashicorp/raft backs
// off, 10ms * 2^(n-2) after the n-th, up to 10.24 s.
type replicationFailures struct {
	n    atomic.Int64
	next slog.Handler
}

func (h *replicationFailures) Enabled(context.Context, slog.Level) bool { return true }
func (h *replicationFailures) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "failed to appendEntries to" || r.Message == "failed to install snapshot" {
		h.n.Add(1)
	}
	return nil
}
func (h *replicationFailures) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *replicationFailures) WithGroup(string) slog.Handler      { return h }

// outage is a three-node cluster with one follower stopped: its leader,
// the stopped follower's config, and the leader's replication failures.
type outage struct {
	leader   *Node
	cfg      Config
	failures *replicationFailures
}

// stopFollower starts three nodes (edit applied to each config) and stops
// a follower.
func stopFollower(t *testing.T, edit func(*Config)) outage {
	t.Helper()
	counters := map[string]*replicationFailures{}
	nodes, leader := threeNodes(t, func(c *Config) {
		edit(c)
		h := &replicationFailures{}
		counters[c.ID] = h
		c.Logger = slog.New(h)
	})
	for _, n := range nodes {
		if n != leader {
			n.Close()
			return outage{leader: leader, cfg: n.cfg, failures: counters[leader.ID()]}
		}
	}
	t.Fatal("no follower")
	return outage{}
}

// awaitBackoff waits for the leader's 10th failed attempt to replicate to
// the stopped follower: its replicator's next attempt is then 2.56 s away.
func (o outage) awaitBackoff(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for o.failures.n.Load() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d failed replication attempts in 30s", o.failures.n.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// restart starts the follower again and waits, up to within, until it has
// applied the leader's applied index of now; it returns the follower and
// how long that took.
func (o outage) restart(t *testing.T, within time.Duration) (*Node, time.Duration) {
	t.Helper()
	target := o.leader.FSM().AppliedIndex()
	var back *Node
	startOver(t, func() (err error) {
		back, err = NewNode(o.cfg)
		return err
	})
	t.Cleanup(func() { back.Close() })
	start := time.Now()
	for back.FSM().AppliedIndex() < target {
		if time.Since(start) > within {
			t.Fatalf("the follower applied %d after %v, want %d", back.FSM().AppliedIndex(), within, target)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return back, time.Since(start)
}

// TestFollowerBackCatchesUpAtOnce: a follower that was down long enough
// for the leader's replicator to back off 2.56 s between attempts is
// caught up well before that once it is back: the heartbeat that reaches it
// again wakes the replicator (rpc/third_party/raft, patch part 5). Before,
// the replicator slept out its backoff, up to 10 s after a long outage.
func TestFollowerBackCatchesUpAtOnce(t *testing.T) {
	o := stopFollower(t, func(*Config) {})
	s := newSession(t, o.leader)
	if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/missed"}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("create: %v", r)
	}
	o.awaitBackoff(t)
	if _, took := o.restart(t, 10*time.Second); took > 1500*time.Millisecond {
		t.Fatalf("the follower caught up %v after its restart, want well under the replicator's 2.56s backoff", took)
	}
}

// TestFollowerGetsAFreshSnapshot: a follower too far behind for the
// leader's log gets a snapshot taken for it, not the leader's newest one
// and every entry written since (rpc/third_party/raft, freshenSnapshot).
// The newest may be up to two SnapshotIntervals old, and the entries
// after it went one AppendEntries at a time: a follower that missed
// 100 000 writes took 3.4 s to catch up where a fresh snapshot takes 1.2.
func TestFollowerGetsAFreshSnapshot(t *testing.T) {
	o := stopFollower(t, func(c *Config) {
		c.SnapshotThreshold = 64
		c.TrailingLogs = 16
		c.SnapshotInterval = time.Hour // only the snapshots asked for
	})
	s := newSession(t, o.leader)
	create := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: fmt.Sprintf("/n%d", i)}}})
			if r.Error != apipb.ErrorCode_OK {
				t.Fatalf("create: %v", r)
			}
		}
	}
	create(0, 100)
	// The leader's newest snapshot, and its log compacted to 16 entries
	// before it: the follower's next entry is gone.
	if err := o.leader.Snapshot(); err != nil {
		t.Fatal(err)
	}
	old := o.leader.FSM().AppliedIndex()
	create(100, 400)
	// Down long enough for the replicator to back off for seconds, as after
	// any real outage: the leader's heartbeat, not the replicator's retry,
	// then finds the follower back, which is what tells the replicator that
	// a fresh snapshot is worth taking (the leader takes none for a follower
	// that does not answer).
	o.awaitBackoff(t)
	target := o.leader.FSM().AppliedIndex()
	o.restart(t, 20*time.Second)
	store, err := raft.NewFileSnapshotStoreWithLogger(o.cfg.DataDir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := store.List()
	if err != nil || len(snaps) == 0 {
		t.Fatalf("the follower's snapshots: %v, %v", snaps, err)
	}
	if got := snaps[0].Index; got < uint64(target) {
		t.Fatalf("the follower was sent the snapshot at index %d (the leader's newest at %d), want one taken for it, at %d or later", got, old, target)
	}
}

// TestBoltFollowerRestartsAfterASnapshot: a follower on raft.db that was
// sent a snapshot, and then entries after it, starts again. Raft cleared
// the old log after installing a snapshot only for a log store that says
// it is monotonic, which raft-boltdb did not: the follower kept its old
// entries, appended the new ones after the gap, and its next start refused
// raft.db as damaged ("entry N follows entry M": the store's check finds
// gaps, raft-boltdb fork part 3). Found by TestDiskFull (diskfault).
func TestBoltFollowerRestartsAfterASnapshot(t *testing.T) {
	o := stopFollower(t, func(c *Config) {
		c.RaftLog = RaftLogBolt
		c.SnapshotThreshold = 64
		c.TrailingLogs = 16
		c.SnapshotInterval = time.Hour // only the snapshots asked for
	})
	s := newSession(t, o.leader)
	create := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: fmt.Sprintf("/n%d", i)}}})
			if r.Error != apipb.ErrorCode_OK {
				t.Fatalf("create: %v", r)
			}
		}
	}
	create(0, 100)
	if err := o.leader.Snapshot(); err != nil {
		t.Fatal(err)
	}
	back, _ := o.restart(t, 20*time.Second)
	create(100, 110)
	target := o.leader.FSM().AppliedIndex()
	waitFor(t, func() bool { return back.FSM().AppliedIndex() >= target })
	back.Close()
	again, _ := o.restart(t, 20*time.Second)
	again.Close()
}
