// Package rpc is the coordd server: it wires Raft (hashicorp/raft over TCP,
// raft-boltdb/v2 log and stable store, file snapshots) to the FSM, serves the
// public gRPC API (one ordered session stream per client, plus status) and
// the internal peer service (write forwarding, read index, session touches,
// member info), and runs the leader's duties (term no-op, session expiry).
//
// It owns everything that is per-server and not replicated: which sessions
// are connected here, their request queues and outbound streams, the
// forwarding stream to the leader, and the leader-only session deadlines.
// It never mutates the tree or the session registry except by proposing a
// command through Raft.
package rpc
