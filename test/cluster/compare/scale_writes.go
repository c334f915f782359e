package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Write workloads, and the snapshots written meanwhile (figure 3 of
// scale.go).

// percentile returns the p-quantile of v (0 when empty); it sorts v.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	i := int(p * float64(len(v)))
	return v[min(i, len(v)-1)]
}

// writeSample is one write: when it began and how long it took.
type writeSample struct {
	at  time.Time
	lat time.Duration
}

// writeLoad runs n sessions on servers doing setData on random flat znodes
// until stop is closed, and returns what they measured.
func (s *scaler) writeLoad(servers []string, n int, stop <-chan struct{}) (func() ([]writeSample, int64, time.Duration), error) {
	conns, err := s.sessionsOn(servers, n)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var all []writeSample
	var errs atomic.Int64
	var wg sync.WaitGroup
	value := bytes.Repeat([]byte("w"), 100)
	start := time.Now()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 41))
			var mine []writeSample
			for {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
					return
				default:
				}
				p := flatPath(rng.IntN(max(1, s.c.znodes)))
				t0 := time.Now()
				if _, err := c.Set(p, value, -1); err != nil {
					errs.Add(1)
					continue
				}
				mine = append(mine, writeSample{t0, time.Since(t0)})
			}
		}()
	}
	return func() ([]writeSample, int64, time.Duration) {
		wg.Wait()
		took := time.Since(start)
		closeConns(conns)
		return all, errs.Load(), took
	}, nil
}

// figures sums up a write load.
func figures(samples []writeSample, errs int64, took time.Duration) writeFigures {
	lat := make([]float64, len(samples))
	for i, x := range samples {
		lat[i] = float64(x.lat.Microseconds()) / 1000
	}
	w := writeFigures{Ops: len(samples), OpsPerS: float64(len(samples)) / took.Seconds(), Errors: errs, P99MS: percentile(lat, 0.99)}
	if len(lat) > 0 {
		w.MaxMS = lat[len(lat)-1]
	}
	return w
}

// interval is a span of time, a snapshot being written.
type interval struct{ from, to time.Time }

// classify splits write latencies (ms) by whether the write overlapped one
// of the intervals.
func classify(samples []writeSample, during []interval) (quiet, snap []float64) {
	for _, x := range samples {
		end := x.at.Add(x.lat)
		in := false
		for _, iv := range during {
			if x.at.Before(iv.to) && end.After(iv.from) {
				in = true
				break
			}
		}
		ms := float64(x.lat.Microseconds()) / 1000
		if in {
			snap = append(snap, ms)
		} else {
			quiet = append(quiet, ms)
		}
	}
	return quiet, snap
}

// snapWatcher follows the snapshots the servers write: coordd's (Raft's
// file store: a directory TERM-INDEX-MILLIS.tmp while being written,
// renamed without .tmp when done) and ZooKeeper's (version-2/snapshot.ZXID,
// written in place: being written while it grows).
type snapWatcher struct {
	mu    sync.Mutex
	snaps map[string]*snapSeen // by file
	stop  chan struct{}
	done  chan struct{}
}

type snapSeen struct {
	server     int
	from, last time.Time // first seen (coordd: its name's time), last growth
	size       int64
	finished   bool
	path       string
}

func (s *scaler) watchSnapshots() *snapWatcher {
	w := &snapWatcher{snaps: map[string]*snapSeen{}, stop: make(chan struct{}), done: make(chan struct{})}
	seenBefore := map[string]bool{}
	for i := range s.c.dataDirs {
		for _, f := range snapFiles(s.c.dataDirs[i]) {
			seenBefore[f] = true
		}
	}
	go func() {
		defer close(w.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			now := time.Now()
			w.mu.Lock()
			for i, d := range s.c.dataDirs {
				for _, f := range snapFiles(d) {
					if seenBefore[f] {
						continue
					}
					key := strings.TrimSuffix(f, ".tmp")
					sn := w.snaps[key]
					if sn == nil {
						sn = &snapSeen{server: i, from: now, last: now, path: f}
						if t, ok := raftSnapTime(f); ok {
							sn.from = t
						}
						w.snaps[key] = sn
					}
					fi, err := os.Stat(snapState(f))
					if err == nil && fi.Size() != sn.size {
						sn.size, sn.last = fi.Size(), now
					}
					if !strings.HasSuffix(f, ".tmp") && strings.Contains(f, "/snapshots/") && !sn.finished {
						// coordd's: renamed, so complete.
						sn.finished, sn.last, sn.path = true, now, f
					}
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// intervals returns the snapshots seen and stops watching.
func (w *snapWatcher) intervals(servers []string) ([]interval, []snapFigure) {
	close(w.stop)
	<-w.done
	var ivs []interval
	var figs []snapFigure
	for _, sn := range w.snaps {
		ivs = append(ivs, interval{sn.from, sn.last})
		if fi, err := os.Stat(snapState(sn.path)); err == nil {
			sn.size = fi.Size()
		}
		figs = append(figs, snapFigure{Server: servers[sn.server], S: sn.last.Sub(sn.from).Seconds(), MB: float64(sn.size) / (1 << 20)})
	}
	slices.SortFunc(figs, func(a, b snapFigure) int { return strings.Compare(a.Server, b.Server) })
	return ivs, figs
}

// snapFiles lists a data dir's snapshots: coordd's directories in
// snapshots/, ZooKeeper's files version-2/snapshot.*.
func snapFiles(dir string) []string {
	a, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*"))
	b, _ := filepath.Glob(filepath.Join(dir, "version-2", "snapshot.*"))
	return append(a, b...)
}

// snapState is the file of a snapshot holding the state.
func snapState(f string) string {
	if strings.Contains(f, "/snapshots/") {
		return filepath.Join(f, "state.bin")
	}
	return f
}

// raftSnapTime reads the time in a Raft snapshot's name, TERM-INDEX-MILLIS.
func raftSnapTime(f string) (time.Time, bool) {
	parts := strings.Split(strings.TrimSuffix(filepath.Base(f), ".tmp"), "-")
	if !strings.Contains(f, "/snapshots/") || len(parts) != 3 {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// snapshots runs the write workload and classes its latencies by the
// snapshots being written meanwhile.
func (s *scaler) snapshots() error {
	if s.c.writeTime <= 0 || s.c.znodes == 0 {
		return nil
	}
	w := s.watchSnapshots()
	stop := make(chan struct{})
	wait, err := s.writeLoad(s.c.servers, s.c.writeClients, stop)
	if err != nil {
		return err
	}
	time.Sleep(s.c.writeTime)
	close(stop)
	samples, errs, took := wait()
	ivs, figs := w.intervals(s.c.servers)
	s.r.Writes = figures(samples, errs, took)
	quiet, snap := classify(samples, ivs)
	s.r.Writes.QuietN, s.r.Writes.SnapN = len(quiet), len(snap)
	s.r.Writes.QuietP99MS, s.r.Writes.SnapP99MS = percentile(quiet, 0.99), percentile(snap, 0.99)
	s.r.Snapshots = figs
	if errs > 0 {
		s.fail("%d writes failed while snapshots were taken", errs)
	}
	var durs []string
	for _, f := range figs {
		durs = append(durs, fmt.Sprintf("%s %.1fs %.0fMB", f.Server, f.S, f.MB))
	}
	s.logf("%d writes in %v (%.0f/s, %d errors): p99 %.1f ms without a snapshot (%d writes), %.1f ms during one (%d writes); snapshots: %s",
		len(samples), took.Round(time.Second), s.r.Writes.OpsPerS, errs, s.r.Writes.QuietP99MS, len(quiet), s.r.Writes.SnapP99MS, len(snap), strings.Join(durs, ", "))
	return nil
}
