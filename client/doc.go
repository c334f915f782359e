// Package client is the Go client library of coordd. It owns one session per
// Client: connecting to a server, failing over to another when the stream
// breaks, re-sending unanswered requests with their original xids (so a write
// applies exactly once within the session), pinging, tracking the last zxid
// seen, the client side of watches, one-shot and persistent (dispatch and
// re-registration on reconnect), and mapping the wire error codes to
// sentinel errors.
//
// It speaks only the public API (rpc/apipb) and never imports the server
// packages (fsm, tree, session, watch, rpc).
//
// # Calls and contexts
//
// Every call takes a context. Calls may be made from many goroutines at once:
// they are sent in call order on the session's stream and matched with their
// replies by xid. If the context ends before the reply arrives, the call
// returns ctx.Err(); a request already sent may still be executed by the
// server, so for a write the outcome is then unknown to the caller. While the
// client is disconnected, calls wait (bounded by their context) and are sent
// once the session is re-established.
//
// # Failover and expiry
//
// When the stream breaks, the client reports StateDisconnected and tries the
// other servers (random order, then the one it lost) until one accepts the
// session again (StateReconnected) or the session timeout has passed since the
// server last heard from the client, or a server reports the session expired
// (StateExpired). After expiry every pending and later call fails with
// ErrSessionExpired; the client never opens a new session on its own: call
// Connect again. A write that was sent but not answered when the session ended
// fails with an error matching both ErrOutcomeUnknown and ErrSessionExpired
// (or ErrClosed): it may or may not have been applied.
//
// # Suspension: before the session can expire
//
// A program that holds something through its session (a lock) must stop
// relying on it before the leader can expire the session and hand it to
// someone else. A server that vouches (all current servers) tells the client
// which of its requests the leader has heard of, in a term a majority
// confirmed afterwards; the client reports StateSuspended at
//
//	sent + T - V - M
//
// where sent is when it sent the last such request (for a new session, the
// connect request), T the session timeout, V the server's vouch interval
// (half the server's tick) and M the margin (WithSuspendMargin, by default
// max(T/50, 50ms)). No leader expires the session before sent + T, so a
// suspended session has V + M left, by the client's clock, to stop.
// Disconnecting and reconnecting move nothing: only the leader's
// confirmation does. When the leader confirms the session again, the client
// reports StateReconnected. Idle sessions ping often enough that healthy ones
// are never suspended; a leader failover that takes longer than about
// T - 2V - M - T/3 does suspend them (safely). Against a server that does not
// vouch, the client suspends the session at every disconnect, as a
// ZooKeeper client's SUSPENDED. Client.Confirmation reports the figures.
//
// # Watches
//
// GetW, ExistsW and ChildrenW return a one-shot channel (capacity 1) that
// receives exactly one Event and is then closed. AddWatch returns the
// channel of a persistent watch, recursive or not (ZooKeeper's addWatch),
// which receives every change it covers until RemoveWatches or StopWatch
// removes it or the session ends. Its buffer is bounded and it never blocks
// the client: a reader that falls behind gets an EventResync and re-reads
// (see AddWatch). When the session ends, every watch channel receives an
// EventNotWatching event whose Err is ErrSessionExpired or ErrClosed, and
// is closed.
//
// Each event reaches every watch of the client that it matches, once: the
// server says which kinds of the session's watches it matched, and the
// client dispatches it to its one-shot watches of those kinds on the path,
// its persistent ones on the path and its recursive ones on the path and
// above, as ZooKeeper's Java client does. On failover the client re-sends
// its watches, persistent ones included, with the last zxid it saw; the new
// server fires at once the one-shot ones whose node changed meanwhile.
package client
