// Package rpc is the coordd server: it wires Raft (hashicorp/raft over TCP,
// a raft-wal or raft-boltdb log and stable store (logstore.go), file
// snapshots) to the FSM, serves
// the client port with the session engine (rpc/engine) behind its
// front-ends (rpc/grpcapi for the public gRPC API), serves the internal peer
// service (write forwarding, read index, session touches, member info), and
// runs the leader's duties (term no-op, session expiry, reaping, lock-delay
// releases).
//
// It owns what is per-server and not replicated and concerns the cluster:
// the forwarding stream to the leader (proposer.go), read-index rounds
// (readindex.go, ask.go), the leader-only session deadlines (leader.go), the
// peer port (mux.go, peer.go) and status. It never mutates the tree or the
// session registry except by proposing a command through Raft.
package rpc
