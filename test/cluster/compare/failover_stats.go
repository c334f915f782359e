package main

import (
	"slices"
	"time"
)

// The figures of a failover run, computed from what every client recorded:
// each operation's start, end and outcome, and when its connection was
// lost. All times are offsets from the start of the run. These functions
// are pure, so that the definitions are tested on their own.

// opRec is one operation of one client.
type opRec struct {
	start, end time.Duration
	ok         bool
}

// clientRec is what one client recorded.
type clientRec struct {
	home    int     // the server it connected to first
	writer  bool    // a writer (setData), else a reader (getData)
	ops     []opRec // in order
	losses  []time.Duration
	expired bool
	watched bool // its watch fired at the end of the run
}

// window is a span of a run, [from, to).
type window struct{ from, to time.Duration }

func (w window) has(t time.Duration) bool { return t >= w.from && t < w.to }

// failedIn counts the client's failed operations that ended in w.
func (c *clientRec) failedIn(w window) int {
	n := 0
	for _, o := range c.ops {
		if !o.ok && w.has(o.end) {
			n++
		}
	}
	return n
}

// lossesIn counts the client's lost connections in w.
func (c *clientRec) lossesIn(w window) int {
	n := 0
	for _, t := range c.losses {
		if w.has(t) {
			n++
		}
	}
	return n
}

// longestStall is the longest time the client went without a successful
// operation, over the gaps that overlap w: from the end of one successful
// operation (or the run's start) to the end of the next (or the run's end,
// runEnd, if none came). A failed operation does not end a stall; a slow
// one is a stall as long as it took.
func (c *clientRec) longestStall(w window, runEnd time.Duration) time.Duration {
	var longest time.Duration
	last := time.Duration(0)
	gap := func(from, to time.Duration) {
		if to > w.from && from < w.to && to-from > longest {
			longest = to - from
		}
	}
	for _, o := range c.ops {
		if !o.ok {
			continue
		}
		gap(last, o.end)
		last = o.end
	}
	gap(last, runEnd)
	return longest
}

// stallAt is where the client's longest stall that overlaps w began.
func (c *clientRec) stallAt(w window, runEnd time.Duration) time.Duration {
	var longest, at time.Duration
	last := time.Duration(0)
	gap := func(from, to time.Duration) {
		if to > w.from && from < w.to && to-from > longest {
			longest, at = to-from, from
		}
	}
	for _, o := range c.ops {
		if !o.ok {
			continue
		}
		gap(last, o.end)
		last = o.end
	}
	gap(last, runEnd)
	return at
}

// backAfter is how long after t the client's first successful operation
// that started after t ended: how long a client whose server went away
// took to be served again. -1: never.
func (c *clientRec) backAfter(t time.Duration) time.Duration {
	for _, o := range c.ops {
		if o.ok && o.start >= t {
			return o.end - t
		}
	}
	return -1
}

// latencies are the durations of the client's successful operations that
// started in w.
func (c *clientRec) latencies(w window) []time.Duration {
	var out []time.Duration
	for _, o := range c.ops {
		if o.ok && w.has(o.start) {
			out = append(out, o.end-o.start)
		}
	}
	return out
}

// durPercentile is the p-quantile of ds (sorted in place); 0 for none.
func durPercentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

// Recovery is judged in buckets of rateBucket, and a window of
// rateWindow: throughput is back once a rateWindow holds 90% of the
// operations it held before the event.
const (
	rateBucket = 10 * time.Millisecond
	rateWindow = time.Second
	// baseline is how long before the event the rate is measured.
	baseline = 5 * time.Second
	// dipBelow marks a bucket as a dip: under half the rate before.
	dipBelow = 0.5
)

// recovery is how long after the event the clients' throughput (their
// successful operations, all together) was back to 90% of what it was in
// the baseline before it: the start of the first rateWindow that holds 90%
// of the baseline's rate, after the dip the fault caused (the windows
// under half that rate, the first of them starting within rateWindow of
// the event, and those right after it). Later dips, a loaded machine's,
// are not the fault's. 0 when it held 90% from the event on; -1 when it
// was not back within limit of the event.
func recovery(clients []*clientRec, event, limit time.Duration) time.Duration {
	n := int((limit + rateWindow) / rateBucket)
	buckets := make([]int, n)
	before := 0
	base := window{event - baseline, event}
	for _, c := range clients {
		for _, o := range c.ops {
			if !o.ok {
				continue
			}
			if base.has(o.end) {
				before++
			}
			if o.end >= event {
				if i := int((o.end - event) / rateBucket); i < n {
					buckets[i]++
				}
			}
		}
	}
	if before == 0 {
		return -1
	}
	perWindow := float64(before) * float64(rateWindow) / float64(baseline)
	per := int(rateWindow / rateBucket)
	sums := make([]int, max(0, n-per+1)) // sums[i]: the window starting at bucket i
	s := 0
	for i, b := range buckets {
		s += b
		if i >= per {
			s -= buckets[i-per]
		}
		if i >= per-1 {
			sums[i-per+1] = s
		}
	}
	last := min(len(sums), int(limit/rateBucket)+1)
	dip := func(i int) bool { return float64(sums[i]) < dipBelow*perWindow }
	from := 0
	for from < per && from < last && !dip(from) {
		from++
	}
	if from < per {
		for from < last && dip(from) {
			from++
		}
	} else {
		from = 0
	}
	for i := from; i < last; i++ {
		if float64(sums[i]) >= 0.9*perWindow {
			return time.Duration(i) * rateBucket
		}
	}
	return -1
}

// rates counts the clients' successful operations that ended in each
// bucket of w.
func rates(clients []*clientRec, w window, bucket time.Duration) []int {
	out := make([]int, int((w.to-w.from+bucket-1)/bucket))
	for _, c := range clients {
		for _, o := range c.ops {
			if o.ok && w.has(o.end) {
				out[int((o.end-w.from)/bucket)]++
			}
		}
	}
	return out
}
