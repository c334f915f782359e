package rpc

import (
	"io"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/metrics"
)

// What the server tells its metrics (rpc/metrics), and how it reads its
// state for them. Events are counted where they happen, by decorators
// around what Raft calls (the log store, the snapshot store, the state
// machine); the state is read at scrape time by state(), which mntr reads
// too.

// timedLogStore times every append to the Raft log: the whole StoreLogs,
// and the part bbolt spent writing and syncing pages (its stats' write
// time before and after; an append of the stable store or a compaction
// committing meanwhile would be counted in, which is rare and only makes
// the figure larger).
type timedLogStore struct {
	raft.LogStore
	m *metrics.Metrics
	// writeTime returns bbolt's cumulative write time, or nil.
	writeTime func() time.Duration
	// disk notes appends that fail for want of space.
	disk *diskSpace
	// slow is told how long each append took.
	slow *slowDisk
}

// StoreLog implements raft.LogStore.
func (s timedLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore.
func (s timedLogStore) StoreLogs(logs []*raft.Log) error {
	var before time.Duration
	if s.writeTime != nil {
		before = s.writeTime()
	}
	start := time.Now()
	err := s.LogStore.StoreLogs(logs)
	d := time.Since(start)
	s.disk.wrote(metrics.DiskWriteLog, err)
	s.slow.appended(d)
	if err == nil {
		sync := time.Duration(-1)
		if s.writeTime != nil {
			sync = s.writeTime() - before
		}
		s.m.LogAppended(len(logs), d, sync)
	}
	return err
}

// IsMonotonic passes on raft.MonotonicLogStore, which changes how Raft
// treats the log after a snapshot is installed.
func (s timedLogStore) IsMonotonic() bool {
	if ms, ok := s.LogStore.(raft.MonotonicLogStore); ok {
		return ms.IsMonotonic()
	}
	return false
}

// boltWriteTime returns the cumulative time a bbolt database spent writing
// and syncing its committed transactions.
func boltWriteTime(stats func() bbolt.Stats) func() time.Duration {
	return func() time.Duration {
		st := stats()
		return st.TxStats.GetWriteTime()
	}
}

// timedSnapshotStore times every snapshot written to disk and records its
// size: one this server took (the FSM's Persist) or one the leader sent.
type timedSnapshotStore struct {
	raft.SnapshotStore
	m *metrics.Metrics
	// disk notes snapshots that fail for want of space.
	disk *diskSpace
}

// Create implements raft.SnapshotStore.
func (s timedSnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		s.disk.wrote(metrics.DiskWriteSnapshot, err)
		return nil, err
	}
	return &timedSink{SnapshotSink: sink, m: s.m, disk: s.disk, start: time.Now()}, nil
}

// timedSink counts a snapshot's bytes and records them when it is closed.
type timedSink struct {
	raft.SnapshotSink
	m     *metrics.Metrics
	disk  *diskSpace
	start time.Time
	size  int64
}

// Write implements io.Writer.
func (s *timedSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	s.size += int64(n)
	if err != nil {
		s.disk.wrote(metrics.DiskWriteSnapshot, err)
	}
	return n, err
}

// Close implements io.Closer: the snapshot is on disk.
func (s *timedSink) Close() error {
	err := s.SnapshotSink.Close()
	s.disk.wrote(metrics.DiskWriteSnapshot, err)
	if err == nil {
		s.m.SnapshotWritten(s.size, time.Since(s.start))
	}
	return err
}

// meteredFSM is the FSM as Raft sees it: each batch applied is counted and
// timed. It passes on raft.BatchingFSM, which Raft looks for.
type meteredFSM struct {
	f *fsm.FSM
	m *metrics.Metrics
}

var _ raft.BatchingFSM = meteredFSM{}

// Apply implements raft.FSM.
func (f meteredFSM) Apply(l *raft.Log) interface{} { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM.
func (f meteredFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	start := time.Now()
	out := f.f.ApplyBatch(logs)
	f.m.AppliedBatch(len(logs), time.Since(start))
	return out
}

// Snapshot implements raft.FSM.
func (f meteredFSM) Snapshot() (raft.FSMSnapshot, error) { return f.f.Snapshot() }

// Restore implements raft.FSM.
func (f meteredFSM) Restore(rc io.ReadCloser) error {
	err := f.f.Restore(rc)
	if err == nil {
		f.m.SnapshotRestored()
	}
	return err
}

// countLeaderChanges counts every new leader Raft reports, until the node
// stops. A change of leader is counted when a leader is known and it is
// not the one last reported (re-elections after a leaderless moment too,
// as etcd counts them).
func (n *Node) countLeaderChanges() {
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	// A leader Raft knew before the observer was registered counts too.
	_, last := n.raft.LeaderWithID()
	if last != "" {
		n.metrics.LeaderChanged()
	}
	for {
		select {
		case <-n.ctx.Done():
			return
		case o := <-ch:
			id := o.Data.(raft.LeaderObservation).LeaderID
			if id != "" && id != last {
				n.metrics.LeaderChanged()
			}
			last = id
		}
	}
}

// countElections counts every election this server calls, by its cause,
// until the node stops.
func (n *Node) countElections() {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.ElectionObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		select {
		case <-n.ctx.Done():
			return
		case o := <-ch:
			n.metrics.ElectionCalled(electionCause(o.Data.(raft.ElectionObservation).Cause))
		}
	}
}

// electionCause is the metric's name for why Raft called an election.
func electionCause(c raft.ElectionCause) string {
	switch c {
	case raft.ElectionHeartbeatTimeout:
		return "heartbeat_timeout"
	case raft.ElectionLeaderGone:
		return "leader_gone"
	case raft.ElectionLeadershipTransfer:
		return "leadership_transfer"
	}
	return ""
}

// state reads this server's state for a scrape and for mntr, in one go.
// It takes the FSM's read lock for a few O(1) reads, and otherwise reads
// atomics and Raft's getters: never anything the write path holds for
// long.
func (n *Node) state() metrics.State {
	var st metrics.State
	n.fsm.Read(func(v fsm.View) {
		st.Znodes = int64(v.Tree.Len()) // ZooKeeper's system nodes included: they are in the tree
		st.EphemeralZnodes = int64(v.Tree.Ephemerals())
		st.ApproximateDataSize = v.Tree.ApproximateDataSize()
		st.Sessions = int64(v.Sessions.Len())
		st.LockDelayed = int64(v.Sessions.LockDelays())
	})
	ws := n.engine.Watches().Stats()
	st.Watches = metrics.WatchCounts{Data: int64(ws.Data), Child: int64(ws.Child), Persistent: int64(ws.Persistent), PersistentRecursive: int64(ws.PersistentRecursive)}
	st.WatchedPaths, st.WatchingSessions = int64(ws.Paths), int64(ws.Sessions)
	st.SessionsConnected = int64(n.engine.Connected())
	st.OutstandingRequests = n.engine.Outstanding()
	st.Raft.AppliedIndex = uint64(n.fsm.AppliedIndex())
	if !n.raftSet.Load() {
		st.Raft.State = "follower"
		return st
	}
	r := n.raft
	state := r.State()
	st.Raft.State = roleOf(state)
	_, leader := r.LeaderWithID()
	st.Raft.HasLeader = leader != ""
	st.Raft.Term = r.CurrentTerm()
	st.Raft.CommitIndex = r.CommitIndex()
	st.Raft.LastLogIndex = r.LastIndex()
	if last := r.LastContact(); state != raft.Leader && !last.IsZero() {
		st.Raft.LastContact = time.Since(last)
	}
	if cf := r.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				st.Raft.Voters++
			} else {
				st.Raft.NonVoters++
			}
		}
	}
	st.Ready, _ = n.Ready()
	return st
}
