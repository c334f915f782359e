// Package session owns coordd's client sessions, in three independent parts.
//
// The replicated session registry ([Registry]) is part of the FSM's state: the set of
// open sessions (id, negotiated timeout, password) and, per session, the exactly-once
// reply cache of the Raft dissertation's client sessions (§6.3; DESIGN.md invariants 7
// and 8) and the identities the session authenticated as (ZooKeeper's addAuth), which
// the FSM's ACL checks use. It also keeps the nodes of expired sessions held for a
// lock-delay ([LockDelay]: a path, the session, a time), which the FSM decides and
// releases. It is mutated only from Raft apply, so it is deterministic: it never reads a
// clock or a random source, never lets map iteration order reach its output, starts no
// goroutines and takes no locks (the FSM serialises access). [Registry.Clone] is a
// copy-on-write O(1) capture, so a snapshot can be encoded in another goroutine while
// apply goes on; [Registry.WriteTo] and [ReadRegistry] give it a deterministic,
// checksummed binary form.
//
// The expiry tracker ([Tracker]) is the leader-only soft state of session deadlines
// (like ZooKeeper's ExpiryQueue or etcd's lessor). It is never replicated; the clock is
// passed in as a time.Time argument to every call, and it starts no goroutines. A new
// leader calls [Tracker.Promote], which gives every session a fresh full timeout; a
// demoted leader calls [Tracker.Demote], which forgets everything.
//
// [Negotiate] clamps a client's requested timeout into the server's bounds, as
// ZooKeeper does.
//
// The package must not know about Raft, the data tree (ephemeral nodes are the tree's
// and the FSM's business), watches or networking; it imports nothing else of coordd.
package session
