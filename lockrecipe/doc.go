// Package lockrecipe owns coordd's coordination recipes: the mutex (plain
// and reentrant), the read/write lock, the semaphore, leader election,
// barriers and the FIFO queue, built from ephemeral sequential nodes, watches
// and multi as described on ZooKeeper's recipes page.
//
// It speaks to the cluster only through package client (one Session per
// client.Client) and knows nothing about the server.
//
// Build a Session on a connected client with NewSession, then the recipes
// on it: NewMutex, NewReentrantMutex, NewRWMutex, NewSemaphore,
// NewElection, NewBarrier, NewDoubleBarrier and NewQueue. A recipe value
// is one owner (one holder, candidate or participant); use one value per
// owner, several per Session if needed. LockPath, ElectionPath and Resolve
// hold the naming rule of the programs that let people name a lock or an
// election (a bare NAME is /locks/NAME or /elections/NAME).
//
// # What every waiting recipe guarantees
//
//   - Protected creates: each attempt names its node with a fresh GUID
//     ("_c_<guid>-lock-0000000007"). When the create call fails without a
//     definite answer (ctx ended, an ambiguous server error), the recipe looks
//     for its node by GUID before trying again, adopts it only if its
//     ephemeral owner is the current session, and deletes a node owned by
//     another session. So a lost reply leaves no orphan.
//   - No herd: a waiter watches only the node it must wait for (for a mutex,
//     its immediate predecessor), so a release wakes exactly one waiter.
//   - Every pass re-lists the lock's children and checks that the waiter's own
//     node is still there; if it vanished, the call fails with ErrLockLost
//     (together with client.ErrSessionExpired when the session ended) instead
//     of reporting an acquisition without a node.
//   - A Lock whose context ends deletes its own node before returning
//     (retrying until done or the session is gone); TryLock never leaves a
//     node behind. Any wait that ends with its context also stops its watch
//     (client.StopWatch), so abandoned waits do not pile up watches.
//   - The Session follows the client's state through a subscription of its
//     own (client.NotifyStates): the program may read the client's States
//     channel too.
//   - Lost closes when the holder can no longer be sure it holds: when the
//     client suspends the session (client.StateSuspended), when the session
//     ends, or when the holder's node is deleted (the recipe watches its
//     node from the first call to Lost on: a holder that never asks sets no
//     watch). The client suspends the
//     session strictly before the leader can expire it, at
//     sent + T - V - M at the latest, where sent is when it sent the last
//     request the leader confirmed, T the session timeout, V the server's
//     vouch interval (half its tick: 500ms by default) and M the margin
//     (client.WithSuspendMargin; default max(T/50, 50ms)). No other owner can
//     acquire before sent + T: a holder that stops within V + M of Lost
//     closing never overlaps the next. See Session.
//   - The fencing token of an acquisition is the creation zxid of its node:
//     it grows strictly with every acquisition of one lock, cluster-wide.
//     GuardedMulti performs writes only while the lock node still exists.
//
// # What a lock handoff costs
//
// A Mutex acquisition that has to wait, and its release, are these calls:
//
//	create _c_<guid>-lock-N (ephemeral, sequential)   1 round trip, 1 commit
//	getChildren of the lock's node                    1 round trip (local read)
//	getData + watch on the predecessor                1 round trip
//	... the predecessor's delete fires the watch       1 event
//	getChildren again: held                           1 round trip
//	delete (Unlock)                                    1 round trip, 1 commit
//
// Two commits and four round trips, as go-zookeeper's Lock (create, children,
// getData with a watch, children; delete) and Curator's InterProcessMutex
// (LockInternals: create withProtection, getSortedChildren, getData
// usingWatcher on the predecessor, getSortedChildren; delete) make them. An
// acquisition that does not wait skips the middle three. A handoff, from
// the holder's Unlock to the next holder's Lock returning, waits for one
// commit (the delete), one event and one read, the same chain in all
// three. The getChildren after the wake cannot go: the deleted predecessor
// may have been a waiter that gave up, with an older node still before it.
// Until Lost is asked for, nothing more is sent; from then on one getData
// with a watch on the holder's own node (and its event at the release).
//
// Parents of a recipe's path are created as container nodes when missing,
// so the server reaps them once they are empty again; every create that
// finds its parent gone re-creates it.
package lockrecipe
