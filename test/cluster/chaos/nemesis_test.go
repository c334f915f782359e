package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// faultKind names a kind of fault.
type faultKind string

const (
	fKillRandom    faultKind = "kill-random"
	fKillLeader    faultKind = "kill-leader"
	fPauseLeader   faultKind = "pause-leader"
	fIsolateLeader faultKind = "isolate-leader"
	fSplit         faultKind = "split-majority"
	fSlow          faultKind = "slow-links"
	fKillAll       faultKind = "kill-all"
)

// allKinds are the fault kinds. kill-all (every server SIGKILLed at once,
// then restarted) goes beyond the list: it checks that what was
// acknowledged survives on disk.
var allKinds = []faultKind{fKillRandom, fKillLeader, fPauseLeader, fIsolateLeader, fSplit, fSlow, fKillAll}

func (k faultKind) network() bool { return k == fIsolateLeader || k == fSplit || k == fSlow }

// link is a directed peer link.
type link struct {
	From, To int
	Delay    time.Duration
}

// step is one fault of the schedule: inject, hold, heal, then a healthy gap.
type step struct {
	N        int
	Kind     faultKind
	Hold     time.Duration
	Gap      time.Duration
	Node     int    // kill-random: the node index
	Minority []int  // split-majority: the minority side
	Links    []link // slow-links
}

func (s step) String() string {
	b := fmt.Sprintf("#%02d %-14s hold %-6v gap %-6v", s.N, s.Kind, s.Hold, s.Gap)
	switch s.Kind {
	case fKillRandom:
		b += fmt.Sprintf(" node %d", s.Node+1)
	case fSplit:
		var m []string
		for _, i := range s.Minority {
			m = append(m, fmt.Sprint(i+1))
		}
		b += " minority {" + strings.Join(m, ",") + "}"
	case fSlow:
		var l []string
		for _, x := range s.Links {
			l = append(l, fmt.Sprintf("%d->%d+%v", x.From+1, x.To+1, x.Delay))
		}
		b += " " + strings.Join(l, " ")
	case fKillLeader, fPauseLeader, fIsolateLeader:
		b += " (leader at run time)"
	}
	return b
}

// dur picks a duration in [lo, hi], rounded to 100ms (10ms below 1s).
func dur(r *rand.Rand, lo, hi time.Duration) time.Duration {
	d := lo + time.Duration(r.Int64N(int64(hi-lo)+1))
	if hi < time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// plan derives the fault schedule from the seed alone: the same seed, node
// count and duration give the same schedule. Only "the leader" is resolved
// when the step runs.
func plan(seed int64, nodes int, total time.Duration) []step {
	r := rand.New(rand.NewPCG(uint64(seed), 0x636f6f726464))
	var out []step
	var used time.Duration
	// The first steps cover every kind once (in a seeded order), so even a
	// short run sees each fault; the rest are drawn at random.
	first := r.Perm(len(allKinds))
	// The plan covers more than the run's duration (recovery times vary);
	// the run stops at its duration.
	for n := 1; used < total*3/2 && n <= 1000; n++ {
		kind := allKinds[r.IntN(len(allKinds))]
		if n <= len(first) {
			kind = allKinds[first[n-1]]
		}
		s := step{N: n, Kind: kind, Gap: dur(r, time.Second, 5*time.Second)}
		switch s.Kind {
		case fKillRandom:
			s.Node = r.IntN(nodes)
			s.Hold = dur(r, time.Second, 4*time.Second)
		case fKillLeader:
			s.Hold = dur(r, time.Second, 4*time.Second)
		case fKillAll:
			// Short: the workload sessions (6s) must outlive the outage.
			s.Hold = dur(r, 300*time.Millisecond, 1500*time.Millisecond)
		case fPauseLeader:
			// Longer than the election timeout (500ms), and at least twice it.
			s.Hold = dur(r, 1200*time.Millisecond, 3500*time.Millisecond)
		case fIsolateLeader:
			s.Hold = dur(r, 2*time.Second, 6*time.Second)
		case fSplit:
			s.Hold = dur(r, 2*time.Second, 6*time.Second)
			size := 1
			if nodes >= 5 {
				size = 1 + r.IntN((nodes-1)/2)
			}
			perm := r.Perm(nodes)
			s.Minority = append([]int(nil), perm[:size]...)
			sort.Ints(s.Minority)
		case fMember:
			// The replaced server stays out this long.
			s.Hold = dur(r, 2*time.Second, 5*time.Second)
		case fSlow:
			s.Hold = dur(r, 3*time.Second, 8*time.Second)
			all := r.IntN(3) == 0
			for i := 0; i < nodes; i++ {
				for j := 0; j < nodes; j++ {
					if i != j && (all || r.IntN(2) == 0) {
						s.Links = append(s.Links, link{i, j, dur(r, 20*time.Millisecond, 150*time.Millisecond)})
					}
				}
			}
			if len(s.Links) == 0 {
				s.Links = append(s.Links, link{0, 1, 100 * time.Millisecond})
			}
		}
		// Each step also costs roughly 1.5s of recovery on top of hold+gap.
		used += s.Hold + s.Gap + 1500*time.Millisecond
		out = append(out, s)
	}
	return out
}

// interval is a span of run time (offsets from the run's start).
type interval struct{ from, to time.Duration }

// timeline records when the cluster was not known to be healthy.
type timeline struct {
	mu        sync.Mutex
	unhealthy []interval // closed spans
	open      bool
	openFrom  time.Duration
}

func (tl *timeline) faultStart(at time.Duration) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if !tl.open {
		tl.open, tl.openFrom = true, at
	}
}

func (tl *timeline) healthyAt(at time.Duration) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.open {
		tl.unhealthy = append(tl.unhealthy, interval{tl.openFrom, at})
		tl.open = false
	}
}

// healthyFrom returns the earliest time >= t from which the cluster was
// healthy, and whether it stayed healthy for at least span after it (up to
// end, the time of the check).
func (tl *timeline) healthyFrom(t, span, end time.Duration) (time.Duration, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	ivs := append([]interval(nil), tl.unhealthy...)
	if tl.open {
		ivs = append(ivs, interval{tl.openFrom, 1 << 62})
	}
	h := t
	for _, iv := range ivs {
		if iv.from <= h && h < iv.to {
			h = iv.to
		}
	}
	for _, iv := range ivs {
		if iv.from > h && iv.from < h+span {
			return h, false
		}
	}
	return h, h+span <= end
}

// nemesis executes a schedule against a cluster.
type nemesis struct {
	e      *env
	steps  []step
	net    *network // nil: no network faults
	noNet  string   // why network faults are skipped
	noSlow string   // why slow links are skipped (net.px is nil)

	mu       sync.Mutex
	injected map[faultKind]int
	skipped  map[faultKind]int
	unhealed []string
}

func (nm *nemesis) count(m map[faultKind]int, k faultKind) {
	nm.mu.Lock()
	m[k]++
	nm.mu.Unlock()
}

// sleep waits d, or less when ctx ends (faults are always healed anyway).
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// run executes the steps until ctx ends or the schedule is done. Every
// fault is healed before run returns, and the cluster is given up to 30s to
// become healthy after each.
func (nm *nemesis) run(ctx context.Context) {
	e := nm.e
	for _, s := range nm.steps {
		if ctx.Err() != nil {
			return
		}
		if s.Kind.network() && nm.net == nil || s.Kind == fSlow && nm.net.px == nil {
			why := nm.noNet
			if why == "" {
				why = nm.noSlow
			}
			nm.count(nm.skipped, s.Kind)
			e.logf("nemesis %s: SKIPPED (%s)", s, why)
			sleep(ctx, s.Gap)
			continue
		}
		e.tl.faultStart(e.since())
		heal, desc := nm.inject(s)
		e.logf("nemesis %s: %s", s, desc)
		sleep(ctx, s.Hold)
		if l := e.c.leader(); l >= 0 {
			e.logf("nemesis #%02d before healing: leader is node %s", s.N, e.c.nodes[l].id)
		} else {
			e.logf("nemesis #%02d before healing: no leader", s.N)
		}
		heal()
		ok, why := e.c.waitHealthy(context.Background(), 30*time.Second)
		if !ok {
			msg := fmt.Sprintf("step #%d (%s): cluster not healthy 30s after healing: %s", s.N, s.Kind, why)
			nm.mu.Lock()
			nm.unhealed = append(nm.unhealed, msg)
			nm.mu.Unlock()
			e.logf("nemesis: %s", msg)
		} else {
			e.tl.healthyAt(e.since())
			e.logf("nemesis #%02d healed, cluster healthy", s.N)
		}
		sleep(ctx, s.Gap)
	}
}

// leaderOr returns the leader, or (when there is none) node fallback.
func (nm *nemesis) leaderOr(fallback int) (int, string) {
	if l := nm.e.c.leader(); l >= 0 {
		return l, fmt.Sprintf("leader node %s", nm.e.c.nodes[l].id)
	}
	return fallback, fmt.Sprintf("no leader found, node %s instead", nm.e.c.nodes[fallback].id)
}

// inject applies a step and returns how to heal it.
func (nm *nemesis) inject(s step) (func(), string) {
	c := nm.e.c
	nm.count(nm.injected, s.Kind)
	fallback := s.N % len(c.nodes)
	switch s.Kind {
	case fKillRandom, fKillLeader:
		i, who := s.Node, fmt.Sprintf("node %s", c.nodes[s.Node].id)
		if s.Kind == fKillLeader {
			i, who = nm.leaderOr(fallback)
		}
		pid := c.pid(i)
		c.kill(i)
		return func() {
			if err := c.start(i); err != nil {
				nm.e.logf("nemesis: restart of node %s failed: %v", c.nodes[i].id, err)
			}
		}, fmt.Sprintf("SIGKILL %s (pid %d)", who, pid)
	case fKillAll:
		var pids []int
		for i := range c.nodes {
			pids = append(pids, c.pid(i))
		}
		var wg sync.WaitGroup
		for i := range c.nodes {
			wg.Add(1)
			go func(i int) { defer wg.Done(); c.kill(i) }(i)
		}
		wg.Wait()
		return func() {
			for i := range c.nodes {
				if err := c.start(i); err != nil {
					nm.e.logf("nemesis: restart of node %s failed: %v", c.nodes[i].id, err)
				}
			}
		}, fmt.Sprintf("SIGKILL every node (pids %v)", pids)
	case fPauseLeader:
		i, who := nm.leaderOr(fallback)
		c.pause(i)
		return func() { c.resume(i) }, fmt.Sprintf("SIGSTOP %s (pid %d)", who, c.pid(i))
	case fIsolateLeader, fSplit:
		var minority []int
		who := ""
		if s.Kind == fIsolateLeader {
			i, w := nm.leaderOr(fallback)
			minority, who = []int{i}, w
		} else {
			minority = s.Minority
			who = "minority"
		}
		var majority []int
		for i := range c.nodes {
			if !contains(minority, i) {
				majority = append(majority, i)
			}
		}
		if err := nm.net.partition(minority, majority); err != nil {
			nm.e.logf("nemesis: partition failed: %v", err)
		}
		return func() {
			if err := nm.net.heal(); err != nil {
				nm.e.logf("nemesis: heal failed: %v", err)
			}
		}, fmt.Sprintf("partition %s %v | %v", who, ids(c, minority), ids(c, majority))
	case fMember:
		return nm.memberReplace(s)
	case fSlow:
		for _, l := range s.Links {
			nm.net.px.setDelay(l.From, l.To, l.Delay)
		}
		return func() { nm.net.px.clearDelays() }, fmt.Sprintf("slow %d links", len(s.Links))
	}
	return func() {}, "nothing"
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func ids(c *procCluster, xs []int) []string {
	var out []string
	for _, i := range xs {
		out = append(out, c.nodes[i].id)
	}
	return out
}
