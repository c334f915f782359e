package session

import (
	"container/heap"
	"slices"
	"sync"
	"time"
)

// Tracker is the leader's soft state of session deadlines (ZooKeeper's ExpiryQueue,
// etcd's lessor). It is never replicated: only the leader keeps one populated, a new
// leader starts it with [Tracker.Promote] and a demoted one empties it with
// [Tracker.Demote]. The clock is injected: every method that needs the time takes it
// as an argument, and no goroutine runs inside.
//
// Each session has a deadline (the last Add, Touch or Promote plus its timeout) and a
// due time, the moment [Tracker.Expired] next offers it: its deadline, or, once it was
// offered, one timeout after that offer (the retry interval, covering a CloseSession
// proposal that got lost). A min-heap on the due time makes Expired O(k log n) for k
// offered sessions — O(1) when nothing is due — and Touch O(log n).
//
// A Tracker is safe for concurrent use (the leader loop, the FSM apply path and the
// peer touch streams may all reach it); it holds a mutex only for the duration of a
// call.
type Tracker struct {
	mu   sync.Mutex
	byID map[int64]*tracked
	h    dueHeap
}

type tracked struct {
	id       int64
	timeout  time.Duration
	deadline time.Time
	due      time.Time // deadline, or the re-offer time once offered
	index    int       // position in the heap
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{byID: make(map[int64]*tracked)}
}

// Add tracks session id with the given timeout, its deadline now+timeout. Adding an id
// already tracked replaces its timeout and deadline (and cancels a pending offer).
func (t *Tracker) Add(id int64, timeout time.Duration, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(id, timeout, now)
}

func (t *Tracker) add(id int64, timeout time.Duration, now time.Time) {
	d := now.Add(timeout)
	if e, ok := t.byID[id]; ok {
		e.timeout, e.deadline, e.due = timeout, d, d
		heap.Fix(&t.h, e.index)
		return
	}
	e := &tracked{id: id, timeout: timeout, deadline: d, due: d}
	t.byID[id] = e
	heap.Push(&t.h, e)
}

// Touch postpones the deadline of session id to now plus its timeout, and cancels a
// pending offer (should the CloseSession proposed for it not commit, the session lives
// on). An unknown id is ignored. A touch never moves a deadline earlier, so a touch
// batch that arrives late (stamped with an older now) is harmless.
func (t *Tracker) Touch(id int64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byID[id]
	if !ok {
		return
	}
	d := now.Add(e.timeout)
	if d.Before(e.deadline) {
		return
	}
	e.deadline, e.due = d, d
	heap.Fix(&t.h, e.index)
}

// Remove stops tracking session id (call it when CloseSession applies). An unknown id
// is ignored.
func (t *Tracker) Remove(id int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byID[id]; ok {
		heap.Remove(&t.h, e.index)
		delete(t.byID, id)
	}
}

// Expired returns up to max sessions (all, if max <= 0) that are due at now: whose
// deadline is before now and that were not offered within their retry interval. They
// come most overdue first (by due time, then id). Expired does not remove them — the
// leader proposes CloseSession and calls [Tracker.Remove] when it applies — but marks
// them offered: each is offered again only if it is still tracked, untouched, one full
// timeout later. It costs O(log n) per session returned and O(1) when none is due.
func (t *Tracker) Expired(now time.Time, max int) []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int64
	for len(t.h) > 0 && t.h[0].due.Before(now) && (max <= 0 || len(out) < max) {
		e := t.h[0]
		out = append(out, e.id)
		// Re-offer one timeout from now; at least now, so the loop ends even for a
		// zero or negative timeout.
		e.due = now.Add(e.timeout)
		if e.due.Before(now) {
			e.due = now
		}
		heap.Fix(&t.h, 0)
	}
	return out
}

// Promote makes the tracker a new leader's: it tracks exactly the given sessions, each
// with a fresh full timeout (Info.TimeoutMs) from now, so no session expires merely
// because the leadership changed. Whatever was tracked before is forgotten.
func (t *Tracker) Promote(sessions []Info, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reset(len(sessions))
	for _, s := range sessions {
		t.add(s.ID, time.Duration(s.TimeoutMs)*time.Millisecond, now)
	}
}

// Refresh gives every tracked session a fresh full timeout from now, as
// Promote does, keeping the set of sessions. It is for a leader that could
// not keep its deadlines for a while (a long pause of its process): the
// touches of that time were never processed, so the deadlines say nothing.
func (t *Tracker) Refresh(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.byID
	ids := make([]int64, 0, len(old))
	for id := range old {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	t.reset(len(old))
	for _, id := range ids {
		t.add(id, old[id].timeout, now)
	}
}

// Demote forgets every session (the leader stepped down).
func (t *Tracker) Demote() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reset(0)
}

func (t *Tracker) reset(n int) {
	t.byID = make(map[int64]*tracked, n)
	t.h = make(dueHeap, 0, n)
}

// Len returns the number of tracked sessions.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// Deadline returns the deadline of session id (not its re-offer time), if tracked.
func (t *Tracker) Deadline(id int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byID[id]; ok {
		return e.deadline, true
	}
	return time.Time{}, false
}

// dueHeap is a container/heap min-heap of tracked sessions by (due, id).
type dueHeap []*tracked

func (h dueHeap) Len() int { return len(h) }

func (h dueHeap) Less(i, j int) bool {
	if c := h[i].due.Compare(h[j].due); c != 0 {
		return c < 0
	}
	return h[i].id < h[j].id
}

func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *dueHeap) Push(x any) {
	e := x.(*tracked)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *dueHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.index = -1
	*h = old[:n-1]
	return e
}
