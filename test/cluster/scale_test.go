package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc"
)

var (
	scaleZnodes = flag.Int("scale.znodes", 1_000_000, "znodes BenchmarkScale loads")
	scaleWrites = flag.Int("scale.writes", 100_000, "setData calls BenchmarkScale makes while a follower is down")
)

// BenchmarkScale measures a 3-node cluster (in this process) at scale:
// loading -scale.znodes znodes of 100 bytes (multi of 100 creates, 16
// sessions), the heap that takes per server, a snapshot of that state, a
// server's restart (restore from its snapshot, then the log after it), and
// the catch-up of a follower that was down while -scale.writes setData
// calls were made (more than Raft's trailing logs, so the leader sends it a
// snapshot). Run by make scale; it prints each figure as it goes and
// reports them as metrics.
func BenchmarkScale(b *testing.B) {
	for range b.N {
		scaleOnce(b)
	}
}

func scaleOnce(b *testing.B) {
	c := New(b, 3, Options{})
	ctx := context.Background()
	const sessions, batch, dirs = 16, 100, 100
	cls := make([]*client.Client, sessions)
	for i := range cls {
		cls[i] = connect(b, c.Servers()...)
	}
	value := []byte(strings.Repeat("v", 100))
	for d := range dirs {
		if _, err := cls[0].Create(ctx, fmt.Sprintf("/d%03d", d), nil, client.CreateMode{}); err != nil {
			b.Fatal(err)
		}
	}
	report := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "scale: "+format+"\n", args...) }

	// Load.
	total := *scaleZnodes
	var next atomic.Int64
	start := time.Now()
	parallel(b, sessions, func(i int) error {
		for {
			first := int(next.Add(batch)) - batch
			if first >= total {
				return nil
			}
			var ops []client.Op
			for k := first; k < min(first+batch, total); k++ {
				ops = append(ops, client.CreateOp(fmt.Sprintf("/d%03d/n%07d", k%dirs, k), value, client.CreateMode{}))
			}
			if _, err := cls[i].Multi(ctx, ops...); err != nil {
				return err
			}
		}
	})
	load := time.Since(start)
	report("loaded %d znodes in %v (%.0f znodes/s)", total, load.Round(time.Millisecond), float64(total)/load.Seconds())
	b.ReportMetric(load.Seconds(), "load-s")

	lead := c.WaitLeader(30 * time.Second)
	c.WaitConverged(time.Minute, c.Members[lead].Node().FSM().AppliedIndex())
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	report("heap in use %.0f MB for 3 servers (%.0f MB each, %.0f bytes per znode)",
		mb(ms.HeapInuse), mb(ms.HeapInuse)/3, float64(ms.HeapInuse)/3/float64(total))
	b.ReportMetric(mb(ms.HeapInuse)/3, "heap-MB/server")

	// Snapshot, on a follower.
	f := (lead + 1) % 3
	start = time.Now()
	if err := c.Members[f].Node().Snapshot(); err != nil {
		b.Fatal(err)
	}
	snap := time.Since(start)
	size := snapshotSize(b, c.Members[f].Cfg.DataDir)
	report("snapshot of server %s: %v, %.0f MB", c.Members[f].ID, snap.Round(time.Millisecond), mb(uint64(size)))
	b.ReportMetric(snap.Seconds(), "snapshot-s")

	// Restart: restore the snapshot, replay what follows, rejoin.
	c.Stop(f)
	start = time.Now()
	c.Start(f)
	c.WaitConverged(5*time.Minute, c.Members[lead].Node().FSM().AppliedIndex())
	restore := time.Since(start)
	report("restart of server %s (restore + catch-up): %v", c.Members[f].ID, restore.Round(time.Millisecond))
	b.ReportMetric(restore.Seconds(), "restart-s")

	// A follower down for -scale.writes writes.
	c.Stop(f)
	writes := *scaleWrites
	next.Store(0)
	start = time.Now()
	parallel(b, sessions, func(i int) error {
		for {
			k := int(next.Add(1)) - 1
			if k >= writes {
				return nil
			}
			if _, err := cls[i].Set(ctx, fmt.Sprintf("/d%03d/n%07d", k%dirs, k%total), value, -1); err != nil {
				return err
			}
		}
	})
	report("%d setData with server %s down: %v", writes, c.Members[f].ID, time.Since(start).Round(time.Millisecond))
	target := c.Members[lead].Node().FSM().AppliedIndex()
	start = time.Now()
	c.Start(f)
	tl := followTimeline(c.Members[f].Node(), start, target)
	c.WaitConverged(5*time.Minute, target)
	catchUp := time.Since(start)
	report("server %s caught up %d writes in %v", c.Members[f].ID, writes, catchUp.Round(time.Millisecond))
	report("where the catch-up went: %s", tl())
	b.ReportMetric(catchUp.Seconds(), "catchup-s")
}

// followTimeline samples a restarted server's progress every 2 ms from
// now until it has applied target, and returns a function that waits for
// that and says where the time went: how long the server took to start
// (its own snapshot restored), until the leader's first entries or
// snapshot arrived, until a snapshot from the leader was in place, and
// until the rest of the log was applied.
func followTimeline(n *rpc.Node, start time.Time, target int64) func() string {
	started := time.Since(start)
	done := make(chan string, 1)
	go func() {
		ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
		applied0 := n.FSM().AppliedIndex()
		snap0, last0 := snapshotIndex(n), lastLogIndex(n)
		var first, installed time.Duration
		var installedAt int64
		deadline := time.Now().Add(5 * time.Minute)
		for time.Now().Before(deadline) {
			a := n.FSM().AppliedIndex()
			now := time.Since(start)
			if first == 0 && (lastLogIndex(n) > last0 || snapshotIndex(n) > snap0) {
				first = now
			}
			if installed == 0 {
				if si := snapshotIndex(n); si > snap0 && int64(si) > applied0 {
					installed, installedAt = now, int64(si)
				}
			}
			if a >= target {
				msg := fmt.Sprintf("started (own snapshot restored, index %d) after %s; the leader's first entries or snapshot in its log after %s; ",
					applied0, ms(started), ms(first))
				if installed > 0 {
					msg += fmt.Sprintf("its snapshot (index %d) installed after %s; the %d entries after it applied after %s",
						installedAt, ms(installed), target-installedAt, ms(now))
				} else {
					msg += fmt.Sprintf("%d entries applied after %s (no snapshot)", target-applied0, ms(now))
				}
				done <- msg
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		done <- "did not catch up within 5 minutes"
	}()
	return func() string { return <-done }
}

// snapshotIndex and lastLogIndex read a server's Raft figures.
func snapshotIndex(n *rpc.Node) uint64 {
	v, _ := strconv.ParseUint(n.Raft().Stats()["last_snapshot_index"], 10, 64)
	return v
}

func lastLogIndex(n *rpc.Node) uint64 {
	v, _ := strconv.ParseUint(n.Raft().Stats()["last_log_index"], 10, 64)
	return v
}

// parallel runs f(0..n-1) concurrently and fails b with the first error.
func parallel(b *testing.B, n int, f func(i int) error) {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

func mb(n uint64) float64 { return float64(n) / (1 << 20) }

// snapshotSize is the size of the newest snapshot's state in dataDir.
func snapshotSize(b *testing.B, dataDir string) int64 {
	files, _ := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "state.bin"))
	var newest os.FileInfo
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && (newest == nil || fi.ModTime().After(newest.ModTime())) {
			newest = fi
		}
	}
	if newest == nil {
		b.Fatalf("no snapshot in %s", dataDir)
	}
	return newest.Size()
}
