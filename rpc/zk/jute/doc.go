// Package jute is the wire codec of ZooKeeper's client protocol, the one
// zkCli.sh, the Java client, Curator, kazoo and go-zookeeper speak: jute
// records (zookeeper.jute) in length-prefixed frames over TCP, with
// ZooKeeper 3.8/3.9's numbers for opcodes, error codes, event types, keeper
// states, watcher types, create modes and permissions.
//
// The package owns the bytes: the primitives (Reader, Writer), every record
// a client sends or a server answers, the encoding of multi requests and
// responses (per-op results and the partial-failure shape), framing with a
// size limit (ReadFrame, AppendFrame), and telling a jute connection from a
// four-letter word, an HTTP/2 preface or a TLS handshake by its first four
// bytes (Classify). Decoding never panics and never allocates more than its
// input justifies; every error matches one of the package's sentinels.
//
// It must not know about sessions, the tree, Raft or the network: it does
// not decide how a server answers a request, which requests a session may
// send, or what an error means. Its only dependency is the standard
// library; it starts no goroutines and holds no state between calls.
package jute
