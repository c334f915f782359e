package session

import (
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const sec = time.Second

func TestTrackerExpiryOrder(t *testing.T) {
	tr := NewTracker()
	tr.Add(1, 5*sec, at(0))   // deadline 5s
	tr.Add(2, 3*sec, at(0))   // 3s
	tr.Add(3, 10*sec, at(0))  // 10s
	tr.Add(4, 2*sec, at(sec)) // 3s, ties with 2
	tests := []struct {
		now  time.Duration
		max  int
		want []int64
	}{
		{3 * sec, 0, nil}, // deadline < now is strict
		{3*sec + 1, 0, []int64{2, 4}},
		{4 * sec, 0, nil}, // already offered
		{6 * sec, 0, []int64{1}},
		{11 * sec, 0, []int64{3}},
	}
	for _, tc := range tests {
		got := tr.Expired(at(tc.now), tc.max)
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("Expired(%v) = %v, want %v", tc.now, got, tc.want)
		}
		for _, id := range got {
			if _, ok := tr.Deadline(id); !ok {
				t.Fatalf("Expired removed session %d", id)
			}
			tr.Remove(id) // the leader's CloseSession applies before the next poll
		}
	}
}

func TestTrackerExpiredMax(t *testing.T) {
	tr := NewTracker()
	for id := int64(1); id <= 5; id++ {
		tr.Add(id, time.Duration(10-id)*sec, at(0)) // 5 is most overdue
	}
	now := at(20 * sec)
	if got, want := tr.Expired(now, 2), []int64{5, 4}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first batch %v, want %v", got, want)
	}
	if got, want := tr.Expired(now, 2), []int64{3, 2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("second batch %v, want %v", got, want)
	}
	if got, want := tr.Expired(now, 0), []int64{1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("third batch %v, want %v", got, want)
	}
}

func TestTrackerRetry(t *testing.T) {
	tr := NewTracker()
	tr.Add(1, 4*sec, at(0))
	tr.Add(2, 4*sec, at(0))
	if got := tr.Expired(at(5*sec), 0); !reflect.DeepEqual(got, []int64{1, 2}) {
		t.Fatalf("Expired = %v", got)
	}
	// The close of 2 applied; 1's proposal got lost.
	tr.Remove(2)
	for _, d := range []time.Duration{5 * sec, 6 * sec, 9 * sec} {
		if got := tr.Expired(at(d), 0); got != nil {
			t.Fatalf("re-offered at %v before the retry interval: %v", d, got)
		}
	}
	if got := tr.Expired(at(9*sec+1), 0); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("not re-offered after the retry interval: %v", got)
	}
	// Deadline stays the real deadline.
	if d, ok := tr.Deadline(1); !ok || !d.Equal(at(4*sec)) {
		t.Fatalf("Deadline = %v, %v", d, ok)
	}
	// A touch revives an offered session with a fresh deadline.
	tr.Touch(1, at(10*sec))
	if got := tr.Expired(at(13*sec), 0); got != nil {
		t.Fatalf("touched session offered: %v", got)
	}
	if got := tr.Expired(at(14*sec+1), 0); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("Expired = %v", got)
	}
}

func TestTrackerTouch(t *testing.T) {
	tr := NewTracker()
	tr.Add(1, 5*sec, at(0))
	tr.Add(2, 5*sec, at(0))
	tr.Touch(1, at(4*sec))
	tr.Touch(99, at(4*sec)) // unknown: ignored
	if tr.Len() != 2 {
		t.Fatalf("Touch of unknown id added it: Len = %d", tr.Len())
	}
	if got := tr.Expired(at(6*sec), 0); !reflect.DeepEqual(got, []int64{2}) {
		t.Fatalf("Expired = %v, want [2]", got)
	}
	tr.Remove(2) // its CloseSession applied
	if d, _ := tr.Deadline(1); !d.Equal(at(9 * sec)) {
		t.Fatalf("Deadline(1) = %v, want +9s", d)
	}
	// A late touch (older timestamp) never moves the deadline back.
	tr.Touch(1, at(2*sec))
	if d, _ := tr.Deadline(1); !d.Equal(at(9 * sec)) {
		t.Fatalf("late touch moved Deadline(1) to %v", d)
	}
	if got := tr.Expired(at(9*sec+1), 0); !reflect.DeepEqual(got, []int64{1}) {
		t.Fatalf("Expired = %v, want [1]", got)
	}
	// Re-adding replaces timeout and deadline.
	tr.Add(1, 100*sec, at(10*sec))
	if d, _ := tr.Deadline(1); !d.Equal(at(110 * sec)) {
		t.Fatalf("re-Add Deadline = %v", d)
	}
	if got := tr.Expired(at(50*sec), 0); got != nil {
		t.Fatalf("re-added session offered: %v", got)
	}
}

func TestTrackerRemove(t *testing.T) {
	tr := NewTracker()
	for id := int64(1); id <= 4; id++ {
		tr.Add(id, sec, at(0))
	}
	tr.Remove(2)
	tr.Remove(2)
	tr.Remove(42)
	if _, ok := tr.Deadline(2); ok || tr.Len() != 3 {
		t.Fatalf("Remove: Len = %d", tr.Len())
	}
	if got := tr.Expired(at(2*sec), 0); !reflect.DeepEqual(got, []int64{1, 3, 4}) {
		t.Fatalf("Expired = %v", got)
	}
}

func TestTrackerPromoteDemote(t *testing.T) {
	tr := NewTracker()
	tr.Add(1, sec, at(0))
	tr.Add(7, sec, at(0)) // not in the new leader's registry
	sessions := []Info{{ID: 1, TimeoutMs: 4000}, {ID: 2, TimeoutMs: 2000}}

	// At +10s both would be long overdue under the old deadlines; a new leader gives
	// everyone a full fresh timeout.
	tr.Promote(sessions, at(10*sec))
	if tr.Len() != 2 {
		t.Fatalf("Len after Promote = %d, want 2", tr.Len())
	}
	if _, ok := tr.Deadline(7); ok {
		t.Fatal("Promote kept a session not in the list")
	}
	if got := tr.Expired(at(10*sec+1), 0); got != nil {
		t.Fatalf("expired right after Promote: %v", got)
	}
	if d, _ := tr.Deadline(1); !d.Equal(at(14 * sec)) {
		t.Fatalf("Deadline(1) = %v, want +14s", d)
	}
	if got := tr.Expired(at(12*sec+1), 0); !reflect.DeepEqual(got, []int64{2}) {
		t.Fatalf("Expired = %v, want [2]", got)
	}

	tr.Demote()
	if tr.Len() != 0 {
		t.Fatalf("Len after Demote = %d", tr.Len())
	}
	if got := tr.Expired(at(time.Hour), 0); got != nil {
		t.Fatalf("demoted tracker expired %v", got)
	}
	tr.Touch(1, at(time.Hour)) // ignored
	if tr.Len() != 0 {
		t.Fatal("Touch after Demote tracked a session")
	}
	// Usable again after a later promotion.
	tr.Promote(sessions[:1], at(0))
	if tr.Len() != 1 {
		t.Fatalf("Len = %d", tr.Len())
	}
}

func TestTrackerZeroTimeout(t *testing.T) {
	tr := NewTracker()
	tr.Add(1, 0, at(0))
	tr.Add(2, -sec, at(0))
	if got := tr.Expired(at(1), 0); !reflect.DeepEqual(got, []int64{2, 1}) {
		t.Fatalf("Expired = %v", got)
	}
	if got := tr.Expired(at(1), 0); got != nil {
		t.Fatalf("same instant re-offer: %v", got)
	}
	if got := tr.Expired(at(2), 0); len(got) != 2 {
		t.Fatalf("Expired = %v", got)
	}
}

func TestNegotiate(t *testing.T) {
	const tick = 2 * time.Second
	ms := time.Millisecond
	tests := []struct {
		name                string
		requested, min, max time.Duration
		want                time.Duration
	}{
		{"within defaults", 10 * sec, 0, 0, 10 * sec},
		{"below default min", 1 * sec, 0, 0, 4 * sec},
		{"above default max", 100 * sec, 0, 0, 40 * sec},
		{"at min", 4 * sec, 0, 0, 4 * sec},
		{"at max", 40 * sec, 0, 0, 40 * sec},
		{"zero means 10 ticks", 0, 0, 0, 20 * sec},
		{"negative means 10 ticks", -5 * sec, 0, 0, 20 * sec},
		{"default clamped by max", 0, 0, 15 * sec, 15 * sec},
		{"default clamped by min", 0, 30 * sec, 0, 30 * sec},
		{"explicit bounds", 7 * sec, 6 * sec, 8 * sec, 7 * sec},
		{"explicit min", 1500 * ms, 6 * sec, 8 * sec, 6 * sec},
		{"explicit max", 9 * sec, 6 * sec, 8 * sec, 8 * sec},
		{"only min given", 50 * sec, 1 * sec, 0, 40 * sec},
		{"only max given", 1 * sec, 0, 5 * sec, 4 * sec},
		{"min > max: min wins", 5 * sec, 9 * sec, 8 * sec, 9 * sec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Negotiate(tc.requested, tick, tc.min, tc.max); got != tc.want {
				t.Fatalf("Negotiate(%v, %v, %v, %v) = %v, want %v", tc.requested, tick, tc.min, tc.max, got, tc.want)
			}
		})
	}
}

// TestTrackerRefresh: after a stall, every tracked session gets a fresh full
// timeout and none is forgotten.
func TestTrackerRefresh(t *testing.T) {
	tr := NewTracker()
	t0 := time.Unix(1000, 0)
	tr.Add(1, time.Second, t0)
	tr.Add(2, 3*time.Second, t0)
	late := t0.Add(10 * time.Second)
	if got := tr.Expired(late, 0); len(got) != 2 {
		t.Fatalf("before refresh: %v", got)
	}
	tr.Refresh(late)
	if got := tr.Expired(late.Add(500*time.Millisecond), 0); len(got) != 0 {
		t.Fatalf("expired right after a refresh: %v", got)
	}
	if got := tr.Expired(late.Add(2*time.Second), 0); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after one timeout: %v, want [1]", got)
	}
	if tr.Len() != 2 {
		t.Fatalf("refresh lost sessions: %d", tr.Len())
	}
}
