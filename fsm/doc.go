// Package fsm is coordd's replicated state machine: it implements raft.FSM
// (batching) over the znode tree and the session registry.
//
// It owns the decoding of log entries (the cmdpb command set), applying them
// deterministically (invariant 1 of DESIGN.md: no clock, randomness, map
// order or disk; the time of a change is the leader-stamped time in the
// command and the zxid is the entry's log index), exactly-once replies for
// retried writes, lock-delays (the ephemerals of an expired session kept
// for a while under the leader's rules, then released by a later entry:
// lockdelay.go), snapshots and restores.
//
// It tells its Observer (the server's session engine) what each entry did,
// the tree events included, while it still holds the write lock, so that the
// server can fire watches and queue events and replies on its sessions in
// the same critical section that makes the change visible to reads
// (invariant 10).
//
// It knows nothing about networking, wire protocols, watches (server-local
// state, not replicated) or which sessions are connected where.
package fsm
