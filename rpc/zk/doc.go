// Package zk is the ZooKeeper front-end of the session engine: ZooKeeper's
// client protocol (jute records in length-prefixed frames over TCP, codec in
// rpc/zk/jute), so that zkCli, the Java client, Curator, kazoo and
// go-zookeeper work against coordd unchanged, and ZooKeeper's four-letter
// words.
//
// It owns a connection's life on the client port once the first bytes said
// it is not gRPC: the ConnectRequest handshake (a new or resumed session,
// the optional read-only flag answered in kind, expiry answered with session
// id 0), decoding each request into an engine request in arrival order, and
// encoding the engine's replies and watch events in the order the engine
// queued them, with ZooKeeper's special xids and error numbers, and a
// connection's SASL exchange (sasl.go; the mechanism and the users file are
// rpc/zk/sasl's), whose proven identity goes to the session. A session
// opened here is the same kind of session as one opened over gRPC: the
// engine keeps every guarantee.
//
// It knows no Raft and keeps no session state beyond its connection.
package zk
