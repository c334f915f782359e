package main

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Returning idle memory to the OS.
//
// With the default GOGC=100 the runtime lets the heap grow to twice the live
// heap before it collects, and its background scavenger keeps about 10% more
// than that heap goal mapped. A server that has gone idle after a burst of
// writes therefore keeps holding up to 2.2x its live heap in resident memory
// (with 100k znodes: ~35 MB live, ~70 MB resident) although it will not need
// it until the load comes back. Lowering GOGC would shrink that, but costs
// throughput under load (GOGC=50 cost 15% of write throughput). Instead the
// server watches its own allocation rate and, once it has gone idle, runs one
// debug.FreeOSMemory: a collection followed by returning every free page to
// the OS. Under load nothing changes.

// idleAllocDivisor: an interval in which less than heapGoal/idleAllocDivisor
// bytes were allocated counts as idle (with a 70 MB goal and a 5 s interval:
// under 700 KB/s; an idle 3-node cluster allocates 50-200 KB/s, one under 64
// writing clients about 35 MB/s).
const idleAllocDivisor = 20

// minRelease is the least memory, in bytes, worth a release.
const minRelease = 4 << 20

// memSample is what the idle check reads from the runtime.
type memSample struct {
	allocs uint64 // bytes allocated since the process started
	goal   uint64 // current heap goal
	// releasable: heap memory a collection and a scavenge would hand back:
	// free spans not yet returned to the OS, plus objects allocated since
	// the last collection beyond the heap that was live at its end (at
	// most that much of them is garbage).
	releasable uint64
}

var memMetrics = []string{
	"/gc/heap/allocs:bytes",
	"/gc/heap/goal:bytes",
	"/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
}

// readMemSample reads a memSample from runtime/metrics.
func readMemSample() memSample {
	s := make([]metrics.Sample, len(memMetrics))
	for i, name := range memMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	allocs, goal, live, objects, free := v[0], v[1], v[2], v[3], v[4]
	rel := free
	if objects > live {
		rel += objects - live
	}
	return memSample{allocs: allocs, goal: goal, releasable: rel}
}

// idleReleaser decides, one sample per interval, when to return memory.
type idleReleaser struct {
	prevAllocs uint64
	primed     bool
}

// observe takes the sample of the interval that just ended and reports
// whether to release memory now: the interval was idle (it allocated less
// than goal/idleAllocDivisor) and at least max(minRelease, goal/10) bytes
// could be handed back. The first sample only sets the baseline.
func (r *idleReleaser) observe(s memSample) bool {
	delta := s.allocs - r.prevAllocs
	r.prevAllocs = s.allocs
	if !r.primed {
		r.primed = true
		return false
	}
	if delta >= s.goal/idleAllocDivisor {
		return false
	}
	return s.releasable >= max(minRelease, s.goal/10)
}

// releaseIdleMemory checks once per tick whether the process has gone idle,
// and if so calls release (debug.FreeOSMemory in the server). It returns when
// stop is closed.
func releaseIdleMemory(tick <-chan time.Time, stop <-chan struct{}, sample func() memSample, release func()) {
	var r idleReleaser
	r.observe(sample())
	for {
		select {
		case <-stop:
			return
		case <-tick:
			if r.observe(sample()) {
				release()
			}
		}
	}
}

// startIdleRelease starts releaseIdleMemory with the runtime's metrics and
// debug.FreeOSMemory, checking every interval, and returns the function that
// stops it. An interval <= 0 starts nothing, and so does gcOff (GOGC=off in
// the environment: whoever set it wants no collections, and a release is
// one). It changes neither GOGC nor GOMEMLIMIT.
func startIdleRelease(interval time.Duration, gcOff bool) (stop func()) {
	stop, _ = startReleaser(interval, gcOff, readMemSample, debug.FreeOSMemory)
	return stop
}

// startReleaser is startIdleRelease with the sampling and the release
// given; started reports whether it started the loop. stop returns once
// the loop has ended.
func startReleaser(interval time.Duration, gcOff bool, sample func() memSample, release func()) (stop func(), started bool) {
	if interval <= 0 || gcOff {
		return func() {}, false
	}
	t := time.NewTicker(interval)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		releaseIdleMemory(t.C, done, sample, release)
	}()
	return func() {
		t.Stop()
		close(done)
		<-exited
	}, true
}
