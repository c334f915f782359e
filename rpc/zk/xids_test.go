package zk

import "testing"

func TestArrivalsInOrder(t *testing.T) {
	var a arrivals
	for x := int64(1); x <= 5; x++ {
		if got := a.add(x); got != x+1 {
			t.Fatalf("after %d in order: %d, want %d", x, got, x+1)
		}
	}
	if got := a.add(-2); got != 6 {
		t.Fatalf("a ping moved the claim: %d, want 6", got)
	}
}

// TestArrivalsOutOfOrder: xid 6 arriving before 5 claims nothing past 5,
// and once 5 is in, both count.
func TestArrivalsOutOfOrder(t *testing.T) {
	var a arrivals
	for x := int64(1); x <= 4; x++ {
		a.add(x)
	}
	if got := a.add(6); got != 5 {
		t.Fatalf("6 before 5: claim %d, want 5", got)
	}
	if got := a.add(7); got != 5 {
		t.Fatalf("7 before 5: claim %d, want 5", got)
	}
	if got := a.add(5); got != 8 {
		t.Fatalf("5 at last: claim %d, want 8", got)
	}
	if len(a.above) != 0 {
		t.Fatalf("%d xids left above the claim", len(a.above))
	}
}

// TestArrivalsGapBounded: an xid that never arrives (it was in flight on
// the client's previous connection) holds the claim back by at most
// arrivalWindow, and the bookkeeping stays that small.
func TestArrivalsGapBounded(t *testing.T) {
	var a arrivals
	const first = 5000 // a resumed session: xids 1..4999 went elsewhere
	var got int64
	for x := int64(first); x < first+3*arrivalWindow; x++ {
		got = a.add(x)
		if low := x - arrivalWindow; got < low {
			t.Fatalf("after %d: claim %d lags more than %d", x, got, arrivalWindow)
		}
		if len(a.above) > arrivalWindow+1 {
			t.Fatalf("after %d: %d xids kept", x, len(a.above))
		}
	}
	if want := int64(first + 3*arrivalWindow); got != want {
		t.Fatalf("claim %d once the window passed the gap, want %d", got, want)
	}
}
