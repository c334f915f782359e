package watch

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/coordd/coordd/tree"
)

const (
	benchWatches  = 100_000
	benchSessions = 1_000
)

// benchRegs returns benchWatches (session, path) pairs over benchSessions
// sessions: 100 paths per session, each path watched by 10 sessions.
func benchRegs() (sessions []int64, paths []string) {
	sessions = make([]int64, benchWatches)
	paths = make([]string, benchWatches)
	for i := range benchWatches {
		sessions[i] = int64(i%benchSessions + 1)
		paths[i] = fmt.Sprintf("/app/group%03d/node%05d", i%100, i/10)
	}
	return sessions, paths
}

func fill(m *Manager, sessions []int64, paths []string) {
	for i := range sessions {
		m.Add(sessions[i], paths[i], Data)
	}
}

// BenchmarkAdd adds watches into a table growing to 100k watches from 1k
// sessions, and reports the heap the table holds per watch (path strings,
// which the caller allocates, excluded).
func BenchmarkAdd(b *testing.B) {
	sessions, paths := benchRegs()
	m := NewManager()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % benchWatches
		if j == 0 && i > 0 {
			b.StopTimer()
			m = NewManager()
			b.StartTimer()
		}
		m.Add(sessions[j], paths[j], Data)
	}
	b.StopTimer()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m = NewManager()
	fill(m, sessions, paths)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if m.Len() != benchWatches {
		b.Fatalf("Len = %d", m.Len())
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchWatches, "B/watch")
	runtime.KeepAlive(m)
}

// BenchmarkMemoryOneWatcherPerPath reports the heap per watch when every
// path has a single watcher (the inline case).
func BenchmarkMemoryOneWatcherPerPath(b *testing.B) {
	paths := make([]string, benchWatches)
	for i := range paths {
		paths[i] = fmt.Sprintf("/app/node%06d", i)
	}
	var before, after runtime.MemStats
	for i := 0; i < b.N; i++ {
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := NewManager()
		for j, p := range paths {
			m.Add(int64(j%benchSessions+1), p, Data)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(m)
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchWatches, "B/watch")
}

// BenchmarkTrigger fires one watch on a path while unrelated watches exist;
// the cost must not depend on their number. Each iteration re-adds the watch
// and triggers it.
func BenchmarkTrigger(b *testing.B) {
	sessions, paths := benchRegs()
	for _, unrelated := range []int{0, benchWatches} {
		b.Run(fmt.Sprintf("unrelated=%d", unrelated), func(b *testing.B) {
			m := NewManager()
			fill(m, sessions[:unrelated], paths[:unrelated])
			events := []tree.Event{{Type: tree.EventNodeDataChanged, Path: "/target", Zxid: 1}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.Add(7, "/target", Data)
				if n := m.Trigger(events); len(n) != 1 {
					b.Fatalf("%d notifications", len(n))
				}
			}
		})
	}
}

// BenchmarkTriggerNoWatcher is the common case: an applied write whose paths
// nobody watches.
func BenchmarkTriggerNoWatcher(b *testing.B) {
	sessions, paths := benchRegs()
	m := NewManager()
	fill(m, sessions, paths)
	events := []tree.Event{
		{Type: tree.EventNodeCreated, Path: "/x/y", Zxid: 1},
		{Type: tree.EventNodeChildrenChanged, Path: "/x", Zxid: 1},
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n := m.Trigger(events); n != nil {
			b.Fatal(n)
		}
	}
}

// BenchmarkRemoveSession removes a session holding 100 watches from a table
// of 100k watches (the session is re-added, untimed, before each removal).
func BenchmarkRemoveSession(b *testing.B) {
	sessions, paths := benchRegs()
	m := NewManager()
	fill(m, sessions, paths)
	var mine []string
	for i := range sessions {
		if sessions[i] == 1 {
			mine = append(mine, paths[i])
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for _, p := range mine {
			m.Add(1, p, Data)
		}
		b.StartTimer()
		if n := m.RemoveSession(1); n != len(mine) {
			b.Fatalf("removed %d, want %d", n, len(mine))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(mine)), "ns/watch")
}

// recursiveTree returns the 100 000 leaves of a tree of fanout 10 and depth
// 5 (/d0/d1/d2/d3/d4, each level 0-9), and n paths picked at random, with a
// fixed seed, among all its nodes (leaves and inner nodes alike).
func recursiveTree(n int) (leaves, watched []string) {
	var all []string
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		for i := range 10 {
			p := fmt.Sprintf("%s/%d", prefix, i)
			all = append(all, p)
			if depth == 4 {
				leaves = append(leaves, p)
			} else {
				walk(p, depth+1)
			}
		}
	}
	walk("", 0)
	r := rand.New(rand.NewPCG(1, 2))
	for range n {
		watched = append(watched, all[r.IntN(len(all))])
	}
	return leaves, watched
}

// BenchmarkTriggerRecursive fires the events of one write on a leaf of a
// tree of 100 000 paths while 0 or 10 000 recursive watches (from 1 000
// sessions) are spread over it: a setData (one event) and a create
// (NodeCreated and the parent's NodeChildrenChanged). The cost is the walk
// of the path's ancestors in the recursive index (none when there is no
// recursive watch) plus one notification per matching session; it must not
// grow with the number of watches.
func BenchmarkTriggerRecursive(b *testing.B) {
	leaves, watched := recursiveTree(10_000)
	if len(leaves) != 100_000 {
		b.Fatalf("%d leaves", len(leaves))
	}
	writes := map[string]func(leaf string) []tree.Event{
		"setData": func(leaf string) []tree.Event {
			return []tree.Event{{Type: tree.EventNodeDataChanged, Path: leaf, Zxid: 1}}
		},
		"create": func(leaf string) []tree.Event {
			parent := leaf[:strings.LastIndexByte(leaf, '/')]
			return []tree.Event{{Type: tree.EventNodeCreated, Path: leaf, Zxid: 1}, {Type: tree.EventNodeChildrenChanged, Path: parent, Zxid: 1}}
		},
	}
	for _, write := range []string{"setData", "create"} {
		for _, recursive := range []int{0, len(watched)} {
			b.Run(fmt.Sprintf("%s/recursive=%d", write, recursive), func(b *testing.B) {
				m := NewManager()
				for i, p := range watched[:recursive] {
					m.Add(int64(i%benchSessions+1), p, PersistentRecursive)
				}
				// 4096 writes on leaves picked with a fixed seed, cycled.
				r := rand.New(rand.NewPCG(3, 4))
				batches := make([][]tree.Event, 4096)
				for i := range batches {
					batches[i] = writes[write](leaves[r.IntN(len(leaves))])
				}
				notes := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					notes += len(m.Trigger(batches[i%len(batches)]))
				}
				b.ReportMetric(float64(notes)/float64(b.N), "notifications/op")
			})
		}
	}
}
