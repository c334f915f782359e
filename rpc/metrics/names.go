package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/rpc/engine"
)

// The names of every metric coordd exports, with their help, in one place.
// Prometheus's conventions: the coordd_ prefix, base units in the name
// (seconds, bytes), _total on counters. testdata/metrics.golden pins each
// name with its type and labels: a rename breaks every dashboard and alert
// that uses the old name (deploy/grafana, deploy/prometheus), so it is a
// breaking change, made on purpose.
const (
	nameBuildInfo = "coordd_build_info"
	nameReady     = "coordd_ready"

	// ZooKeeper's mntr figures.
	nameZnodes              = "coordd_znodes"
	nameEphemeralZnodes     = "coordd_ephemeral_znodes"
	nameApproximateDataSize = "coordd_approximate_data_size_bytes"
	nameWatches             = "coordd_watches"
	nameWatchedPaths        = "coordd_watched_paths"
	nameWatchingSessions    = "coordd_watching_sessions"
	nameSessions            = "coordd_sessions"
	nameSessionsConnected   = "coordd_sessions_connected"
	nameOutstanding         = "coordd_outstanding_requests"
	namePacketsReceived     = "coordd_packets_received_total"
	namePacketsSent         = "coordd_packets_sent_total"
	nameRequestDuration     = "coordd_request_duration_seconds"
	nameSessionExpirations  = "coordd_session_expirations_total"

	// Lock-delays: ephemerals of expired sessions kept for a while.
	nameLockDelays      = "coordd_lock_delays_total"
	nameLockDelaysEnded = "coordd_lock_delays_ended_total"
	nameLockDelayed     = "coordd_lock_delayed_znodes"

	// Raft's.
	nameRaftTerm           = "coordd_raft_term"
	nameRaftCommitIndex    = "coordd_raft_commit_index"
	nameRaftAppliedIndex   = "coordd_raft_applied_index"
	nameRaftLastLogIndex   = "coordd_raft_last_log_index"
	nameRaftState          = "coordd_raft_state"
	nameRaftIsLeader       = "coordd_raft_is_leader"
	nameRaftHasLeader      = "coordd_raft_has_leader"
	nameRaftLastContact    = "coordd_raft_last_contact_seconds"
	nameRaftMembers        = "coordd_raft_members"
	nameRaftLeaderChanges  = "coordd_raft_leader_changes_total"
	nameRaftElections      = "coordd_raft_elections_total"
	nameRaftProposals      = "coordd_raft_proposals_total"
	nameRaftForwarded      = "coordd_raft_forwarded_commands_total"
	nameLogAppendDuration  = "coordd_raft_log_append_duration_seconds"
	nameLogAppendEntries   = "coordd_raft_log_append_entries"
	nameLogFsyncDuration   = "coordd_raft_log_fsync_duration_seconds"
	nameSnapshotDuration   = "coordd_raft_snapshot_persist_duration_seconds"
	nameSnapshotSize       = "coordd_raft_snapshot_size_bytes"
	nameSnapshotRestores   = "coordd_raft_snapshot_restores_total"
	nameReadIndexDuration  = "coordd_read_index_duration_seconds"
	nameReadIndexFailures  = "coordd_read_index_failures_total"
	nameApplyBatchEntries  = "coordd_fsm_apply_batch_entries"
	nameApplyBatchDuration = "coordd_fsm_apply_duration_seconds"

	// The disk's.
	nameDiskFull       = "coordd_disk_full"
	nameDiskFullErrors = "coordd_disk_full_errors_total"
	nameSlowLogAppends = "coordd_raft_log_slow_appends_total"
)

// Label values of the enumerated labels.
var (
	// watchKinds are coordd_watches' kind label, in watch.Kind's bit order.
	watchKinds = []string{"data", "child", "persistent", "persistent_recursive"}
	// raftStates are coordd_raft_state's state label.
	raftStates = []string{"follower", "candidate", "leader", "shutdown"}
	// readIndexRoles are the role label of the read-index metrics: a round
	// the leader runs (its commit index, confirmed by a majority), or a
	// follower's call to the leader.
	readIndexRoles = []string{"leader", "follower"}
	// suffrages are coordd_raft_members' suffrage label.
	suffrages = []string{"voter", "nonvoter"}
	// electionCauses are coordd_raft_elections_total's cause label: a
	// follower that heard nothing from its leader for the heartbeat
	// timeout, one whose leader's connections closed and that found the
	// leader accepts no new one, one the leader asked to take over.
	electionCauses = []string{"heartbeat_timeout", "leader_gone", "leadership_transfer"}
	// lockDelayEnds are coordd_lock_delays_ended_total's how label: the
	// leader released the node once its delay had passed, or a client
	// deleted it before.
	lockDelayEnds = []string{"released", "deleted"}
	// diskWrites are coordd_disk_full_errors_total's write label, in
	// DiskWrite's order.
	diskWrites = []string{"log", "stable", "snapshot"}
)

// Buckets, in base units.
var (
	// latencyBuckets: 100 µs to 6.5 s, doubling. A write on a healthy disk
	// takes about a millisecond; a read, tens of microseconds.
	latencyBuckets = prometheus.ExponentialBuckets(100e-6, 2, 17)
	// diskBuckets: 50 µs to 3.3 s, doubling. An fdatasync takes 100 µs to
	// a few milliseconds on a healthy disk.
	diskBuckets = prometheus.ExponentialBuckets(50e-6, 2, 17)
	// snapshotBuckets: 1 ms to 65 s.
	snapshotBuckets = prometheus.ExponentialBuckets(1e-3, 2, 17)
	// batchBuckets: 1 to 1024 entries (a leader writes at most 512 at once).
	batchBuckets = prometheus.ExponentialBuckets(1, 2, 11)
)

// opType is the type label of an operation's latency: "write" for what
// goes through the log (a session's close too), "sync" for sync, "session"
// for what keeps a session going, "read" for the rest (answered from this
// server's tree and watch table). A dashboard sums the ops of one type.
func opType(op engine.Op) string {
	switch op {
	case engine.OpCreate, engine.OpDelete, engine.OpSetData, engine.OpCheck, engine.OpMulti,
		engine.OpSetACL, engine.OpReconfig, engine.OpClose:
		return "write"
	case engine.OpSync:
		return "sync"
	case engine.OpPing, engine.OpSetWatches, engine.OpAddAuth:
		return "session"
	}
	return "read"
}

// engineOps returns every operation the engine names, in order.
func engineOps() []engine.Op {
	var ops []engine.Op
	for op := engine.Op(0); op.String() != "unknown"; op++ {
		ops = append(ops, op)
	}
	return ops
}
