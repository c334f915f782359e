// Package engine is the server's session engine, protocol-neutral: the
// sessions connected to this server, each with its ordered request queue and
// outbound queue; reads against the local tree; writes submitted to the
// cluster and answered when this server's FSM applies them; sync; watch
// registration and delivery; keep-alives passed to the leader and vouched
// for. It owns the server-local watch table.
//
// It knows no wire format. The gRPC front-end (rpc/grpcapi) and the
// ZooKeeper front-end (rpc/zk) are codecs in front of it: each turns its
// wire's messages into Requests, hands them to a Session in arrival order,
// and encodes the Messages the Session queues (replies, watch events,
// vouches) in the order they were queued. Whatever holds for one protocol
// (per-session FIFO, events before the replies that reflect them, zxid
// order, exactly-once writes) holds for the other, because it is kept here.
//
// It does not know Raft: the server around it (package rpc) provides a
// Cluster that submits commands, computes read indexes and passes
// keep-alives to the leader.
package engine
