package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is the server's state at one moment: what a scrape reports as
// gauges, and what ZooKeeper's mntr reports beside the counters. The
// server reads it in one go, without waiting on anything the write path
// holds for long (the FSM's read lock for a few O(1) reads).
type State struct {
	// Ready is what /readyz answers: the server knows a leader and has
	// applied what the leader had committed moments ago.
	Ready bool

	// Znodes counts the nodes as ZooKeeper does, its /zookeeper subtree
	// included; EphemeralZnodes the ephemeral ones; ApproximateDataSize is
	// the sum of every node's path and data lengths (ZooKeeper's figure).
	Znodes, EphemeralZnodes, ApproximateDataSize int64
	// Watches counts this server's watch registrations by kind.
	Watches WatchCounts
	// WatchedPaths are the paths with a watch here, WatchingSessions the
	// sessions holding one.
	WatchedPaths, WatchingSessions int64
	// Sessions are the open sessions of the whole cluster (the replicated
	// registry); SessionsConnected those connected to this server.
	Sessions, SessionsConnected int64
	// OutstandingRequests are requests received here and not yet answered.
	OutstandingRequests int64
	// LockDelayed are the nodes of expired sessions kept for a lock-delay
	// now (replicated state).
	LockDelayed int64

	// Raft is this server's view of the replicated log.
	Raft RaftState
}

// WatchCounts are watch registrations by kind.
type WatchCounts struct {
	Data, Child, Persistent, PersistentRecursive int64
}

// Total is the sum over the kinds (ZooKeeper's watch count).
func (w WatchCounts) Total() int64 { return w.Data + w.Child + w.Persistent + w.PersistentRecursive }

// RaftState is one server's view of Raft.
type RaftState struct {
	// State is "follower", "candidate", "leader" or "shutdown".
	State string
	// HasLeader: this server knows a leader (itself, if it leads).
	HasLeader bool
	Term      uint64
	// CommitIndex is the highest index this server knows committed;
	// AppliedIndex the last its state machine applied (the zxid);
	// LastLogIndex the last in its log.
	CommitIndex, AppliedIndex, LastLogIndex uint64
	// LastContact is how long ago a follower last heard from the leader (0
	// on the leader, and before any contact).
	LastContact time.Duration
	// Voters and NonVoters are the members of the latest configuration.
	Voters, NonVoters int
}

// stateCollector reports State as gauges, reading it once per scrape.
type stateCollector struct {
	read func() State

	ready, znodes, ephemerals, dataSize, watches, watchedPaths, watchingSessions,
	sessions, connected, outstanding, lockDelayed,
	term, commit, applied, lastLog, state, isLeader, hasLeader, lastContact, members *prometheus.Desc
}

func newStateCollector(read func() State) *stateCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &stateCollector{
		read:             read,
		ready:            d(nameReady, "1 when the server is ready to serve (as /readyz says): it knows a leader and has applied what the leader had committed moments ago."),
		znodes:           d(nameZnodes, "Znodes in the tree, ZooKeeper's /zookeeper subtree included (mntr's zk_znode_count)."),
		ephemerals:       d(nameEphemeralZnodes, "Ephemeral znodes (mntr's zk_ephemerals_count)."),
		dataSize:         d(nameApproximateDataSize, "Sum of every znode's path and data lengths (mntr's zk_approximate_data_size)."),
		watches:          d(nameWatches, "Watch registrations on this server, by kind (their sum is mntr's zk_watch_count).", "kind"),
		watchedPaths:     d(nameWatchedPaths, "Paths with at least one watch on this server (wchs)."),
		watchingSessions: d(nameWatchingSessions, "Sessions with at least one watch on this server (wchs)."),
		sessions:         d(nameSessions, "Open sessions in the whole cluster (mntr's zk_global_sessions)."),
		connected:        d(nameSessionsConnected, "Sessions connected to this server, over either protocol (mntr's zk_num_alive_connections and zk_local_sessions)."),
		outstanding:      d(nameOutstanding, "Requests received by this server and not yet answered (mntr's zk_outstanding_requests)."),
		lockDelayed:      d(nameLockDelayed, "Ephemerals of expired sessions kept for a lock-delay now: the locks nobody can take until their delay has passed."),
		term:             d(nameRaftTerm, "Raft term this server is in."),
		commit:           d(nameRaftCommitIndex, "Highest Raft log index this server knows committed."),
		applied:          d(nameRaftAppliedIndex, "Last Raft log index this server's state machine applied (its zxid)."),
		lastLog:          d(nameRaftLastLogIndex, "Last index in this server's Raft log."),
		state:            d(nameRaftState, "1 for this server's Raft state, 0 for the others.", "state"),
		isLeader:         d(nameRaftIsLeader, "1 when this server is the Raft leader."),
		hasLeader:        d(nameRaftHasLeader, "1 when this server knows a Raft leader (itself included)."),
		lastContact:      d(nameRaftLastContact, "Seconds since this follower last heard from the leader (0 on the leader)."),
		members:          d(nameRaftMembers, "Members of the latest Raft configuration, by suffrage.", "suffrage"),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ready, c.znodes, c.ephemerals, c.dataSize, c.watches, c.watchedPaths,
		c.watchingSessions, c.sessions, c.connected, c.outstanding, c.lockDelayed, c.term, c.commit, c.applied, c.lastLog,
		c.state, c.isLeader, c.hasLeader, c.lastContact, c.members} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one read of the state.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.read()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(c.ready, boolValue(st.Ready))
	g(c.znodes, float64(st.Znodes))
	g(c.ephemerals, float64(st.EphemeralZnodes))
	g(c.dataSize, float64(st.ApproximateDataSize))
	w := st.Watches
	for i, v := range []int64{w.Data, w.Child, w.Persistent, w.PersistentRecursive} {
		g(c.watches, float64(v), watchKinds[i])
	}
	g(c.watchedPaths, float64(st.WatchedPaths))
	g(c.watchingSessions, float64(st.WatchingSessions))
	g(c.sessions, float64(st.Sessions))
	g(c.connected, float64(st.SessionsConnected))
	g(c.outstanding, float64(st.OutstandingRequests))
	g(c.lockDelayed, float64(st.LockDelayed))
	r := st.Raft
	g(c.term, float64(r.Term))
	g(c.commit, float64(r.CommitIndex))
	g(c.applied, float64(r.AppliedIndex))
	g(c.lastLog, float64(r.LastLogIndex))
	for _, s := range raftStates {
		g(c.state, boolValue(r.State == s), s)
	}
	g(c.isLeader, boolValue(r.State == "leader"))
	g(c.hasLeader, boolValue(r.HasLeader))
	g(c.lastContact, r.LastContact.Seconds())
	g(c.members, float64(r.Voters), suffrages[0])
	g(c.members, float64(r.NonVoters), suffrages[1])
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
