package tree

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strconv"
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

// memShape is a tree shape for the memory figures: n znodes of dataSize
// bytes at the paths path(i) (whose parents are created first).
type memShape struct {
	name     string
	dataSize int
	path     func(i int) string
}

var memShapes = []memShape{
	// 100 parents, paths of 16 bytes.
	{"flat", 100, func(i int) string { return fmt.Sprintf("/d%02d/node%07d", i%100, i) }},
	// One parent holding every znode.
	{"one-parent", 100, func(i int) string { return fmt.Sprintf("/p/n%07d", i) }},
	// A replication queue's paths as ClickHouse keeps them: 75 bytes.
	{"deep", 100, func(i int) string {
		return fmt.Sprintf("/clickhouse/tables/01/default/events_local/replicas/r%d/queue/queue-%010d", i%3, i)
	}},
	// No data: the overhead alone.
	{"empty", 0, func(i int) string { return fmt.Sprintf("/d%02d/node%07d", i%100, i) }},
}

// build builds the shape's tree of n znodes.
func (s memShape) build(tb testing.TB, n int) *Tree {
	tr := New(Options{})
	data := make([]byte, s.dataSize)
	tx := &Tx{}
	zxid := int64(0)
	var mk func(p string)
	mk = func(p string) {
		if _, err := tr.Exists(p); err == nil {
			return
		}
		if parent := parentOf(p); parent != "/" {
			mk(parent)
		}
		zxid++
		tx.Zxid, tx.Now, tx.Events = zxid, zxid, tx.Events[:0]
		if _, _, err := tr.Create(Create{Path: p}, tx); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range n {
		p := s.path(i)
		if parent := parentOf(p); i < 100 && parent != "/" {
			mk(parent)
		}
		zxid++
		tx.Zxid, tx.Now, tx.Events = zxid, zxid, tx.Events[:0]
		if _, _, err := tr.Create(Create{Path: p, Data: data}, tx); err != nil {
			tb.Fatal(err)
		}
	}
	return tr
}

// memoryPerNode returns the live heap per znode of the shape's tree of n
// znodes, and the mean length of their paths.
func (s memShape) memoryPerNode(tb testing.TB, n int) (perNode, pathLen float64) {
	before := heapInUse()
	tr := s.build(tb, n)
	after := heapInUse()
	runtime.KeepAlive(tr)
	var paths int
	for i := range n {
		paths += len(s.path(i))
	}
	return float64(after-before) / float64(n), float64(paths) / float64(n)
}

// BenchmarkMemory reports the live heap per znode of 100 000 znodes of
// each shape, and what it takes beyond the data, and beyond the data and
// the path.
func BenchmarkMemory(b *testing.B) {
	for _, s := range memShapes {
		b.Run(s.name, func(b *testing.B) {
			var perNode, pathLen float64
			for b.Loop() {
				perNode, pathLen = s.memoryPerNode(b, benchNodes)
			}
			b.ReportMetric(perNode, "bytes/node")
			b.ReportMetric(perNode-float64(s.dataSize), "beyond-data")
			b.ReportMetric(perNode-float64(s.dataSize)-pathLen, "beyond-data+path")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestMemoryBudget checks that a znode of 100 bytes of data, with a path
// of 16 bytes below one of 100 parents, takes at most 200 bytes of heap
// (100 000 of them; 272 bytes each before records).
func TestMemoryBudget(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds 100k znodes: not in -short, nor with the race detector")
	}
	perNode, _ := memShapes[0].memoryPerNode(t, benchNodes)
	t.Logf("%.0f bytes/node", perNode)
	if perNode > 200 {
		t.Fatalf("a znode of 100 bytes takes %.0f bytes of heap, want at most 200", perNode)
	}
}

// TestMultiLeavesNoHoles: znodes loaded by multis of 100 creates (as
// clients load them) leave the heap without holes: the spans in use hold
// little more than the live objects. When a multi cloned the tree for its
// rollback, every later write copied the btree nodes it touched, and the
// copies left 60 bytes of holes per znode between live ones (243 bytes in
// use per znode for 183 live), memory a server keeps but cannot use.
func TestMultiLeavesNoHoles(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds 100k znodes: not in -short, nor with the race detector")
	}
	tr := New(Options{})
	tx := &Tx{Zxid: 1}
	for d := range 100 {
		mustCreate(t, tr, Create{Path: fmt.Sprintf("/d%03d", d)}, tx)
	}
	data := make([]byte, 100)
	const n = 100_000
	ops := make([]Op, 100)
	for b := range n / 100 {
		for i := range ops {
			k := b*100 + i
			ops[i] = Op{Type: OpCreate, Path: fmt.Sprintf("/d%03d/n%08d", k%100, k), Data: data}
		}
		tx.Zxid++
		tx.Events = tx.Events[:0]
		if _, err := tr.Multi(ops, tx); err != nil {
			t.Fatal(err)
		}
	}
	ops = nil
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	runtime.KeepAlive(tr)
	live, inUse := float64(m.HeapAlloc)/n, float64(m.HeapInuse)/n
	t.Logf("%.0f bytes live per znode, %.0f in use", live, inUse)
	if inUse > live*1.1 {
		t.Errorf("%.0f bytes of heap in use per znode for %.0f live: holes", inUse, live)
	}
}

// TestRecordLayout: a record decodes to the header, key and data it was
// made of, whichever groups its header needs; a plain leaf's header is 32
// bytes (prefix and base group) and its key and data follow it in the
// same allocation; data over maxInline makes a big record.
func TestRecordLayout(t *testing.T) {
	leaf := node{czxid: 7, mzxid: 7, pzxid: 7, ctime: 9, mtime: 9}
	for _, tc := range []struct {
		name   string
		n      node
		data   []byte
		header int
	}{
		{"root", node{}, []byte{}, 16},
		{"leaf", leaf, make([]byte, 100), 32},
		{"null", leaf, nil, 32},
		{"modified", node{czxid: 7, mzxid: 8, pzxid: 7, ctime: 9, mtime: 10, version: 1}, []byte("x"), 48},
		{"created and set in one multi", node{czxid: 7, mzxid: 7, pzxid: 7, ctime: 9, mtime: 9, version: 1}, []byte("x"), 32},
		{"parent", node{czxid: 7, mzxid: 7, pzxid: 12, ctime: 9, mtime: 9, cversion: 3, numChildren: 1, seq: 2}, []byte("x"), 56},
		{"ephemeral", node{czxid: 7, mzxid: 7, pzxid: 7, ctime: 9, mtime: 9, aux: -5, kind: Ephemeral}, []byte("x"), 40},
		{"everything", node{czxid: -1 << 63, mzxid: 1<<63 - 1, pzxid: 3, ctime: -4, mtime: 5, aux: MaxTTL, kind: TTL, version: -1 << 31, cversion: 1<<31 - 1, numChildren: 7, seq: -1, acl: maxACLRef}, []byte("x"), 80},
		{"big", leaf, make([]byte, maxInline+1), 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := keyOf("/some/node")
			r := makeRec(&tc.n, key, tc.data)
			if got := r.node(); got != tc.n {
				t.Errorf("header %+v, want %+v", got, tc.n)
			}
			if r.key() != key || !bytes.Equal(r.data(), tc.data) || (r.data() == nil) != (tc.data == nil) || r.isNull() != (tc.data == nil) {
				t.Errorf("key %q data %q, want %q %q", r.key(), r.data(), key, tc.data)
			}
			if int(r.dataLen()) != len(tc.data) || r.kind() != tc.n.kind || r.aclRef() != tc.n.acl {
				t.Errorf("dataLen %d kind %v acl %d", r.dataLen(), r.kind(), r.aclRef())
			}
			if got := hdrLen(r.flags()); got != tc.header {
				t.Errorf("header of %d bytes, want %d", got, tc.header)
			}
			big := len(tc.data) > maxInline
			if (r.flags()&flagBig != 0) != big {
				t.Errorf("big %v, want %v", r.flags()&flagBig != 0, big)
			}
			if !big && len(tc.data) > 0 {
				// Header, key, data: one allocation.
				if want := unsafe.Add(unsafe.Pointer(r.p), tc.header+len(key)); unsafe.Pointer(&r.data()[0]) != want {
					t.Error("the data does not follow the key in the record")
				}
			}
			// A new header on the same key and data.
			m := tc.n
			m.numChildren++
			m.pzxid++
			w := r.with(&m)
			if w.node() != m || w.key() != key || !bytes.Equal(w.data(), tc.data) || w.isNull() != r.isNull() {
				t.Errorf("with: %+v %q %q", w.node(), w.key(), w.data())
			}
		})
	}
}

// TestCreateAllocations: creating a znode allocates its record, the probe
// that looks its parent up and the parent's next record, and nothing per
// byte of data beyond the record.
func TestCreateAllocations(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/p"}, txAt(1))
	data := make([]byte, 100)
	tx := &Tx{Events: make([]Event, 0, 2)}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		tx.Zxid, tx.Events = int64(i+1), tx.Events[:0]
		if _, _, err := tr.Create(Create{Path: "/p/n" + strconv.Itoa(i), Data: data}, tx); err != nil {
			t.Fatal(err)
		}
	})
	// Besides those three: the path built here, the Stat's ACL lookups
	// cost none; btree nodes split now and then.
	if allocs > 5 {
		t.Errorf("%.1f allocations per create", allocs)
	}
}
