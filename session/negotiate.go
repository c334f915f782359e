package session

import "time"

// Negotiate returns the session timeout granted for a requested one, as ZooKeeper
// does: requested clamped into [min, max]. A min of 0 means 2*tick and a max of 0 means
// 20*tick (ZooKeeper's defaults). A requested value <= 0 (the client expressed no
// preference) means 10*tick, the middle of the default range, then clamped like any
// other request. If min > max, min wins: the floor must outlast a leader failover,
// which matters more than the ceiling. tick must be positive when min or max is 0.
func Negotiate(requested, tick, min, max time.Duration) time.Duration {
	if min == 0 {
		min = 2 * tick
	}
	if max == 0 {
		max = 20 * tick
	}
	if requested <= 0 {
		requested = 10 * tick
	}
	if requested > max {
		requested = max
	}
	if requested < min {
		requested = min
	}
	return requested
}
