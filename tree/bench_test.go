package tree

import (
	"fmt"
	"io"
	"runtime"
	"testing"
	"unsafe"
)

const benchNodes = 100_000

// benchPaths returns n distinct paths spread over 100 parent directories.
func benchPaths(n int) []string {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("/d%02d/node%07d", i%100, i)
	}
	return paths
}

// buildBench builds a tree of 100 directories and the given paths, each
// holding dataSize bytes.
func buildBench(tb testing.TB, paths []string, dataSize int) *Tree {
	tr := New(Options{})
	data := make([]byte, dataSize)
	tx := &Tx{Zxid: 1, Now: 1}
	for i := range 100 {
		mustCreate(tb, tr, Create{Path: fmt.Sprintf("/d%02d", i)}, tx)
	}
	for i, p := range paths {
		tx.Zxid = int64(i + 2)
		tx.Events = tx.Events[:0]
		if _, _, err := tr.Create(Create{Path: p, Data: data}, tx); err != nil {
			tb.Fatal(err)
		}
	}
	return tr
}

func BenchmarkCreate(b *testing.B) {
	paths := benchPaths(b.N)
	tr := buildBench(b, nil, 0)
	data := make([]byte, 100)
	tx := &Tx{}
	b.ReportAllocs()
	b.ResetTimer()
	for i, p := range paths {
		tx.Zxid = int64(i + 1000)
		tx.Events = tx.Events[:0]
		if _, _, err := tr.Create(Create{Path: p, Data: data}, tx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	paths := benchPaths(benchNodes)
	tr := buildBench(b, paths, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, _, err := tr.Get(paths[i%len(paths)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChildren(b *testing.B) {
	paths := benchPaths(benchNodes)
	tr := buildBench(b, paths, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		kids, _, err := tr.Children(fmt.Sprintf("/d%02d", i%100))
		if err != nil || len(kids) != benchNodes/100 {
			b.Fatal(err, len(kids))
		}
	}
}

func BenchmarkSetData(b *testing.B) {
	paths := benchPaths(benchNodes)
	tr := buildBench(b, paths, 100)
	data := make([]byte, 100)
	tx := &Tx{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		tx.Zxid = int64(i + 1_000_000)
		tx.Events = tx.Events[:0]
		if _, err := tr.SetData(paths[i%len(paths)], data, -1, tx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMulti(b *testing.B) {
	paths := benchPaths(benchNodes)
	tr := buildBench(b, paths, 100)
	data := make([]byte, 100)
	tx := &Tx{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		tx.Zxid = int64(i + 1_000_000)
		tx.Events = tx.Events[:0]
		p := paths[i%len(paths)]
		ops := []Op{{Type: OpCheck, Path: p, Version: -1}, {Type: OpSetData, Path: p, Data: data, Version: -1}}
		if _, err := tr.Multi(ops, tx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClone measures Clone alone, and Clone followed by the first
// write to the original (which pays for copying the shared btree path).
func BenchmarkClone(b *testing.B) {
	paths := benchPaths(benchNodes)
	tr := buildBench(b, paths, 100)
	b.Run("Clone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tr.Clone()
		}
	})
	b.Run("CloneThenWrite", func(b *testing.B) {
		tx := &Tx{}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = tr.Clone()
			tx.Zxid = int64(i + 1_000_000)
			tx.Events = tx.Events[:0]
			if _, err := tr.SetData(paths[i%len(paths)], nil, -1, tx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkWriteTo(b *testing.B) {
	tr := buildBench(b, benchPaths(benchNodes), 100)
	n, err := tr.WriteTo(io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := tr.Clone().WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory reports the live heap per znode for 100k znodes of 100
// bytes of data (paths of 16 bytes), and the overhead beyond path and data.
func BenchmarkMemory(b *testing.B) {
	paths := benchPaths(benchNodes)
	var total uint64
	for b.Loop() {
		before := heapInUse()
		tr := buildBench(b, paths, 100)
		after := heapInUse()
		runtime.KeepAlive(tr)
		total += after - before
	}
	perNode := float64(total) / float64(b.N) / benchNodes
	b.ReportMetric(perNode, "bytes/node")
	b.ReportMetric(perNode-100-float64(len(paths[0])), "overhead-bytes/node")
	b.ReportMetric(0, "ns/op")
}

// TestMemoryBudget checks that 100,000 znodes of 100 bytes fit in well under
// 60 MB of heap.
func TestMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100k znodes")
	}
	paths := benchPaths(benchNodes)
	before := heapInUse()
	tr := buildBench(t, paths, 100)
	after := heapInUse()
	runtime.KeepAlive(tr)
	used := after - before
	t.Logf("%d znodes: %d bytes of heap, %.0f bytes/node", tr.Len(), used, float64(used)/benchNodes)
	if used > 40<<20 {
		t.Fatalf("100k znodes of 100 bytes use %d bytes of heap", used)
	}
}

// TestNodeLayout: a node header stays in the runtime's 80-byte size class
// (one more word moves it to the 96-byte class: 1.6 MB more per 100k
// znodes), and a node's data and key share its one buffer, the data first.
func TestNodeLayout(t *testing.T) {
	if s := unsafe.Sizeof(node{}); s > 80 {
		t.Errorf("node header is %d bytes, want at most 80", s)
	}
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/a", Data: []byte("xyz")}, txAt(1))
	key, n := tr.lookup("/a")
	if key != keyOf("/a") || string(n.data()) != "xyz" {
		t.Fatalf("key %q data %q", key, n.data())
	}
	if unsafe.StringData(key) != (*byte)(unsafe.Add(unsafe.Pointer(n.buf), n.dataLen)) {
		t.Error("key does not follow the data in the node's buffer")
	}
}
