// Package fsm is coordd's replicated state machine: it implements raft.FSM
// (batching) over the znode tree and the session registry.
//
// It owns the decoding of log entries (the cmdpb command set), applying them
// deterministically (invariant 1 of DESIGN.md: no clock, randomness, map
// order or disk; the time of a change is the leader-stamped time in the
// command and the zxid is the entry's log index), exactly-once replies for
// retried writes, snapshots and restores.
//
// It hands the watch events of each entry to the server-local watch manager
// and tells its Observer (the rpc layer) what each entry did while it still
// holds the write lock, so that the server can queue watch events and replies
// on session streams in the same critical section that makes the change
// visible to reads (invariant 10).
//
// It knows nothing about networking, gRPC or which sessions are connected
// where.
package fsm
