// Package metrics is the server's Prometheus registry: every metric coordd
// exports, named in one place (names.go), and the figures ZooKeeper's
// four-letter words report, read from the same counters.
//
// Two kinds of figures pass through it. Events (a request answered, a log
// append, a snapshot written, a leader change) are counted as they happen,
// with atomic counters and histograms that never block the caller. State
// (znodes, sessions, watches, Raft's indexes) is not counted at all: the
// server hands New a function that reads it, and a scrape calls it once
// and reports what it returned. So a scrape costs the server one read of
// its state, however often it comes, and the write path never waits for
// it.
//
// It knows the session engine's operations (each request's latency is
// recorded under its operation's name) and implements the engine's Meter;
// it knows nothing of Raft, the FSM or any wire.
package metrics
