package zk

// arrivals tracks which request xids a connection has received, so that a
// write tells the engine only what is true: that the client has the reply
// of every earlier write (LowestPendingXid), the bound below which the
// state machine drops cached replies and refuses a request as a stale retry.
//
// A ZooKeeper client never re-sends a request, but it may send its xids out
// of order: go-zookeeper takes an xid and then queues the request, so two
// goroutines sharing a connection can send xid 6 before xid 5. Claiming
// "every reply below 6" when 6 arrives would make 5, arriving next, a stale
// retry (a SystemError for an ordinary request). So the claim is the lowest
// xid not yet received: every xid below it has arrived on this connection
// (and so was submitted before the write that makes the claim).
//
// An xid the client never sends here (one that was in flight on its previous
// connection, or skipped) would hold the claim back for good, and with it
// the dropping of cached replies; so the claim never lags more than
// arrivalWindow behind the highest xid received. A request arriving further
// out of order than that is refused as a stale retry, as every late write
// was before.
type arrivals struct {
	next  int64          // the lowest xid not received yet
	max   int64          // the highest xid received
	above map[int64]bool // xids received above next
}

// arrivalWindow bounds how far the claim lags behind the highest xid
// received, and so how many replies a session's cache may keep because of
// a gap: a few kilobytes.
const arrivalWindow = 256

// add records the arrival of xid (a request's; negative xids, of pings and
// the like, are not counted) and returns the lowest xid not received yet.
func (a *arrivals) add(xid int64) int64 {
	if xid <= 0 {
		return a.next
	}
	if a.next == 0 {
		a.next = 1
	}
	a.max = max(a.max, xid)
	switch {
	case xid == a.next:
		a.next++
		a.advance()
	case xid > a.next:
		if a.above == nil {
			a.above = make(map[int64]bool)
		}
		a.above[xid] = true
	}
	if floor := a.max - arrivalWindow; a.next < floor {
		a.next = floor
		for x := range a.above {
			if x < floor {
				delete(a.above, x)
			}
		}
		a.advance()
	}
	return a.next
}

// advance moves next past the xids received above it.
func (a *arrivals) advance() {
	for a.above[a.next] {
		delete(a.above, a.next)
		a.next++
	}
}
