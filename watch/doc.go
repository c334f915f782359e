// Package watch is a server's table of ZooKeeper watches: one-shot and
// persistent, recursive or not.
//
// Watches are server-local state (DESIGN.md, invariant 10): they live in the
// server the session is connected to, are never replicated and are not part
// of a snapshot. A session holds, on each path, any combination of four
// independent kinds:
//
//   - [Data], one-shot, set by getData on an existing node and by exists
//     whether or not the node exists (as in ZooKeeper, exists-watches are
//     data watches, so a NodeCreated fires them);
//   - [Child], one-shot, set by getChildren on an existing node;
//   - [Persistent], set by addWatch(PERSISTENT), present node or not: every
//     event type of its path, and it stays;
//   - [PersistentRecursive], set by addWatch(PERSISTENT_RECURSIVE):
//     NodeCreated, NodeDataChanged and NodeDeleted of its path and of every
//     path below it (nodes created later included), never
//     NodeChildrenChanged, and it stays.
//
// The rules are ZooKeeper's, observed on ZooKeeper 3.8 and on 3.8 with the
// watch fixes of 3.9 (docs/zookeeper-watches.md, which also says where 3.8
// itself differs): one notification per session per event however many of
// its watches match ([Manager.Trigger]), removal and check by ZooKeeper's
// WatcherType ([Manager.RemoveWatches], [Manager.CheckWatches]),
// re-registration on reconnect ([Manager.ReregisterAll]).
//
// # Cost
//
// The table maps a path to the sessions watching it, each session to its
// watches, and — a third index — each path holding a recursive watch to its
// recursive watchers. Firing an event costs O(watchers of its path) plus,
// only while at least one recursive watch exists, one lookup in the
// recursive index per ancestor of the path: O(depth), however many watches
// the table holds (ZooKeeper walks the ancestors too, and skips the walk when
// it has no recursive watch). Removing or listing a session's watches costs
// O(that session's watches); nothing ever scans the whole table.
//
// # How the FSM uses it
//
// The FSM applies a log entry to the tree and, inside the same critical section
// that makes the change visible to reads, passes the entry's events to
// [Manager.Trigger] and queues the returned notifications, in order, on the
// sessions' outbound streams. A client therefore receives an event before any
// reply that reflects the change. Symmetrically, a read that sets a watch must
// call [Manager.Add] (and a reconnect must call [Manager.ReregisterAll]) while
// no entry can be applied between the read of the tree and the registration —
// typically under the read side of the same lock — or an event could slip
// between the two and be lost. After a snapshot restore the FSM calls
// [Manager.Reset]; when a session closes or leaves this server,
// [Manager.RemoveSession]. (ZooKeeper sends a closing session the events of
// its own ephemerals' deletion, just before the reply to its close: the
// close's Trigger comes before its RemoveSession.)
//
// The package knows nothing of Raft, networking, encodings or the life cycle of
// sessions: a session is just an int64 id, and delivering a [Notification] is
// the caller's business.
package watch
