// Package watch is a server's table of one-shot ZooKeeper watches.
//
// Watches are server-local state (DESIGN.md, invariant 10): they live in the
// server the session is connected to, are never replicated and are not part
// of a snapshot. A Manager keeps ZooKeeper's two server-side tables:
//
//   - data watches ([Data]), set by getData on an existing node and by exists
//     whether or not the node exists (as in ZooKeeper, exists-watches live in
//     the data table, so a NodeCreated fires them);
//   - child watches ([Child]), set by getChildren on an existing node.
//
// Each table maps a path to the sessions watching it, and each session to its
// watches, so firing costs O(watchers of the path) and removing or listing a
// session's watches costs O(that session's watches); nothing ever scans the
// whole table.
//
// # How the FSM uses it
//
// The FSM applies a log entry to the tree and, inside the same critical section
// that makes the change visible to reads, passes the entry's events to
// [Manager.Trigger] and queues the returned notifications, in order, on the
// sessions' outbound streams. A client therefore receives an event before any
// reply that reflects the change. Symmetrically, a read that sets a watch must
// call [Manager.Add] (and a reconnect must call [Manager.Reregister]) while no
// entry can be applied between the read of the tree and the registration —
// typically under the read side of the same lock — or an event could slip
// between the two and be lost.
//
// Watches are one-shot: a watch is removed when it fires. A session gets at
// most one notification per event however many of its watches the event
// fires. After a snapshot restore the FSM calls [Manager.Reset]; when a session
// closes or leaves this server, [Manager.RemoveSession].
//
// The package knows nothing of Raft, networking, encodings or the life cycle of
// sessions: a session is just an int64 id, and delivering a [Notification] is
// the caller's business.
package watch
