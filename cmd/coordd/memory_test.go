package main

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleReleaserDecides: memory is released only after an interval that
// allocated less than goal/idleAllocDivisor, and only when enough of it can
// be handed back; the first sample never releases.
func TestIdleReleaserDecides(t *testing.T) {
	const goal = 100 << 20 // idle below 5 MiB per interval; worth it from 10 MiB
	var r idleReleaser
	for i, tc := range []struct {
		name       string
		allocs     uint64 // cumulative
		releasable uint64
		want       bool
	}{
		{"first sample sets the baseline", 1 << 30, 50 << 20, false},
		{"busy interval", 1<<30 + 5<<20, 50 << 20, false},
		{"idle interval, much to release", 1<<30 + 6<<20, 50 << 20, true},
		{"idle again, little left to release", 1<<30 + 7<<20, 1 << 20, false},
		{"idle, below the goal's tenth", 1<<30 + 8<<20, 9 << 20, false},
		{"idle, at the goal's tenth", 1<<30 + 9<<20, 10 << 20, true},
		{"busy again", 1<<30 + 100<<20, 60 << 20, false},
		{"idle after the load", 1<<30 + 101<<20, 60 << 20, true},
	} {
		got := r.observe(memSample{allocs: tc.allocs, goal: goal, releasable: tc.releasable})
		if got != tc.want {
			t.Errorf("step %d (%s): release %v, want %v", i, tc.name, got, tc.want)
		}
	}
}

// TestIdleReleaserSmallHeap: with a small heap goal the floor minRelease
// applies, so an idle server with a few free megabytes is left alone.
func TestIdleReleaserSmallHeap(t *testing.T) {
	var r idleReleaser
	r.observe(memSample{allocs: 100, goal: 8 << 20})
	if r.observe(memSample{allocs: 200, goal: 8 << 20, releasable: minRelease - 1}) {
		t.Error("released less than minRelease")
	}
	if !r.observe(memSample{allocs: 300, goal: 8 << 20, releasable: minRelease}) {
		t.Error("did not release minRelease when idle")
	}
}

// TestReleaseIdleMemoryLoop: the loop samples once at start and once per
// tick, releases when observe says so, and returns when stopped.
func TestReleaseIdleMemoryLoop(t *testing.T) {
	samples := []memSample{
		{allocs: 0, goal: 100 << 20},                             // baseline
		{allocs: 50 << 20, goal: 100 << 20, releasable: 1 << 30}, // busy
		{allocs: 51 << 20, goal: 100 << 20, releasable: 1 << 30}, // idle: release
	}
	tick := make(chan time.Time)
	stop := make(chan struct{})
	released := make(chan int, len(samples))
	next := 0
	sample := func() memSample {
		s := samples[next]
		next++
		return s
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		releaseIdleMemory(tick, stop, sample, func() { released <- next })
	}()
	tick <- time.Time{}
	tick <- time.Time{}
	// The loop has taken the second tick; once it is back waiting, stop.
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("releaseIdleMemory did not return after stop")
	}
	close(released)
	var got []int
	for n := range released {
		got = append(got, n)
	}
	if len(got) != 1 || got[0] != 3 {
		t.Fatalf("released after samples %v, want once, after the 3rd", got)
	}
}

// TestStartIdleRelease: a non-positive interval or GOGC=off starts
// nothing; a positive interval starts a loop that samples on its ticker,
// releases once the process is idle, and ends when stopped.
func TestStartIdleRelease(t *testing.T) {
	var samples, releases atomic.Int64
	// Every sample is idle (one byte allocated) with much to release.
	sample := func() memSample {
		n := samples.Add(1)
		return memSample{allocs: uint64(n), goal: 100 << 20, releasable: 1 << 30}
	}
	release := func() { releases.Add(1) }
	for _, tc := range []struct {
		interval time.Duration
		gcOff    bool
	}{{0, false}, {-time.Second, false}, {time.Millisecond, true}} {
		stop, started := startReleaser(tc.interval, tc.gcOff, sample, release)
		stop()
		if started || samples.Load() != 0 || releases.Load() != 0 {
			t.Errorf("interval %v, GOGC=off %v: started %v, %d samples, %d releases; want nothing started", tc.interval, tc.gcOff, started, samples.Load(), releases.Load())
		}
	}
	stop, started := startReleaser(time.Millisecond, false, sample, release)
	if !started {
		t.Fatal("a positive interval started nothing")
	}
	deadline := time.Now().Add(10 * time.Second)
	for releases.Load() < 2 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("after %d samples, %d releases; want 2 (every idle tick after the first sample)", samples.Load(), releases.Load())
		}
		time.Sleep(time.Millisecond)
	}
	stop()
}
