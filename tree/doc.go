// Package tree is coordd's znode data model: the hierarchical namespace of
// znodes with ZooKeeper's exact semantics for paths, versions, zxids,
// sequential names, node kinds (persistent, ephemeral, container, TTL),
// atomic multi-operations, the watch events each change produces, and
// deterministic snapshots.
//
// The package owns: path validation, the nodes and their Stat, the
// per-parent count of children ever created (which numbers sequential
// nodes), an index of ephemerals by owning session, an index of container
// and TTL nodes for the reaper, O(1) copy-on-write clones, and the snapshot
// encoding.
//
// It must not know about Raft, sessions, watches, clocks or networking. It
// is a pure, deterministic function of the calls made on it: every write is
// given its zxid and time in a Tx by the caller, and the same sequence of
// calls always yields the same state and the same snapshot bytes (writes
// need a non-nil *Tx). It starts no goroutines and takes no locks: the
// caller (the FSM) serialises writes and may let reads run concurrently
// with each other. A Clone may be read (for example encoded with WriteTo)
// on another goroutine while the original keeps being written.
package tree
