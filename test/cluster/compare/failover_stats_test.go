package main

import (
	"strings"
	"testing"
	"time"
)

const ms1 = time.Millisecond

// steady is a client that completes one operation every period in
// [from, to), except in the gaps, where its operations fail.
func steady(from, to, period time.Duration, gaps ...window) *clientRec {
	c := &clientRec{}
	for t := from; t < to; t += period {
		ok := true
		for _, g := range gaps {
			if g.has(t) {
				ok = false
			}
		}
		c.ops = append(c.ops, opRec{start: t, end: t + period, ok: ok})
	}
	return c
}

func TestLongestStall(t *testing.T) {
	c := steady(0, 10*time.Second, 10*ms1, window{5 * time.Second, 5*time.Second + 400*ms1})
	for _, tc := range []struct {
		name string
		w    window
		want time.Duration
	}{
		{"over the gap", window{5 * time.Second, 10 * time.Second}, 410 * ms1},
		{"before it", window{0, 4 * time.Second}, 10 * ms1},
		{"overlapping its end", window{5*time.Second + 300*ms1, 6 * time.Second}, 410 * ms1},
	} {
		if got := c.longestStall(tc.w, 10*time.Second); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// A client that never recovers stalls until the run's end.
	stuck := steady(0, 5*time.Second, 10*ms1, window{5 * time.Second, 20 * time.Second})
	if got := stuck.longestStall(window{4 * time.Second, 12 * time.Second}, 12*time.Second); got != 7*time.Second {
		t.Errorf("stuck: %v, want 7s", got)
	}
	// A slow operation is a stall as long as it took.
	slow := &clientRec{ops: []opRec{{0, 10 * ms1, true}, {10 * ms1, 900 * ms1, true}, {900 * ms1, 910 * ms1, true}}}
	if got := slow.longestStall(window{0, time.Second}, time.Second); got != 890*ms1 {
		t.Errorf("slow: %v, want 890ms", got)
	}
}

func TestRecovery(t *testing.T) {
	event := 10 * time.Second
	var clients []*clientRec
	for range 10 {
		clients = append(clients, steady(0, 20*time.Second, 10*ms1, window{event, event + 400*ms1}))
	}
	// Throughput is nil for 400 ms: the first 1 s window with 90% of the
	// rate before starts 300 ms after the fault (it holds 100 ms of the dip).
	if got := recovery(clients, event, 5*time.Second); got < 290*ms1 || got > 310*ms1 {
		t.Errorf("after a 400 ms stall: %v, want 300ms", got)
	}
	// A dip long after the fault is not the fault's.
	var later []*clientRec
	for range 10 {
		later = append(later, steady(0, 20*time.Second, 10*ms1, window{event + 3*time.Second, event + 4*time.Second}))
	}
	if got := recovery(later, event, 8*time.Second); got != 0 {
		t.Errorf("with a dip 3 s after the fault: %v, want 0", got)
	}
	// A long stall.
	var long []*clientRec
	for range 10 {
		long = append(long, steady(0, 20*time.Second, 10*ms1, window{event, event + 3*time.Second}))
	}
	if got := recovery(long, event, 8*time.Second); got < 2890*ms1 || got > 2910*ms1 {
		t.Errorf("after a 3 s stall: %v, want 2.9s", got)
	}
	var calm []*clientRec
	for range 10 {
		calm = append(calm, steady(0, 20*time.Second, 10*ms1))
	}
	if got := recovery(calm, event, 5*time.Second); got != 0 {
		t.Errorf("without a dip: %v, want 0", got)
	}
	// At half the rate for good: never back.
	var halved []*clientRec
	for i := range 10 {
		to := 20 * time.Second
		if i%2 == 0 {
			to = event
		}
		halved = append(halved, steady(0, to, 10*ms1))
	}
	if got := recovery(halved, event, 5*time.Second); got != -1 {
		t.Errorf("at half the rate: %v, want -1", got)
	}
}

func TestBackAfter(t *testing.T) {
	c := steady(0, 10*time.Second, 10*ms1, window{5 * time.Second, 5*time.Second + 700*ms1})
	if got := c.backAfter(5 * time.Second); got != 710*ms1 {
		t.Errorf("backAfter: %v, want 710ms", got)
	}
	if got := c.backAfter(11 * time.Second); got != -1 {
		t.Errorf("backAfter past the end: %v, want -1", got)
	}
}

func TestParseFailover(t *testing.T) {
	if got, err := parseFailover("all"); err != nil || len(got) != len(failoverScenarios) {
		t.Errorf("all: %v %v", got, err)
	}
	if got, err := parseFailover(""); err != nil || got != nil {
		t.Errorf("empty: %v %v", got, err)
	}
	if _, err := parseFailover("leader-kill,nope"); err == nil {
		t.Error("an unknown scenario was accepted")
	}
}

func TestHostOrder(t *testing.T) {
	servers := []string{"a", "b", "c"}
	for _, tc := range []struct {
		i    int
		want string
	}{{0, "abc"}, {1, "bca"}, {2, "cab"}, {3, "acb"}, {4, "bac"}, {5, "cba"}, {6, "abc"}} {
		if got := strings.Join(hostOrder(servers, tc.i), ""); got != tc.want {
			t.Errorf("client %d: %s, want %s", tc.i, got, tc.want)
		}
	}
}
