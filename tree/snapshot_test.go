package tree

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"testing"
)

func snapshotBytes(t testing.TB, tr *Tree) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := tr.WriteTo(&b)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(b.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, b.Len())
	}
	return b.Bytes()
}

// buildSample makes a tree with every kind of node and non-trivial stats.
func buildSample(t testing.TB) *Tree {
	tr := New(Options{})
	tx := func(z int64) *Tx { return &Tx{Zxid: z, Now: 1_700_000_000_000 + z} }
	mustCreate(t, tr, Create{Path: "/a", Data: []byte("alpha")}, tx(1))
	mustCreate(t, tr, Create{Path: "/a/b", Data: bytes.Repeat([]byte{0, 1, 2}, 100)}, tx(2))
	mustCreate(t, tr, Create{Path: "/a/", Sequential: true, Kind: Ephemeral, Owner: 77}, tx(3))
	mustCreate(t, tr, Create{Path: "/c", Kind: Container}, tx(4))
	mustCreate(t, tr, Create{Path: "/c/t", Kind: TTL, TTL: 5000}, tx(5))
	mustCreate(t, tr, Create{Path: "/c/t/x"}, tx(6))
	mustCreate(t, tr, Create{Path: "/é"}, tx(7))
	mustCreate(t, tr, Create{Path: "/a-b"}, tx(8))
	mustCreate(t, tr, Create{Path: "/e", Kind: Ephemeral, Owner: -3}, tx(9))
	if _, err := tr.SetData("/a", []byte("beta"), 0, tx(10)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete("/a/b", -1, tx(11)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, tr, Create{Path: "/a/b"}, tx(12))
	return tr
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, tr := range []*Tree{New(Options{}), buildSample(t)} {
		b := snapshotBytes(t, tr)
		got, err := Read(bytes.NewReader(b), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if dump(got) != dump(tr) {
			t.Fatalf("round trip differs:\n%s\nwant\n%s", dump(got), dump(tr))
		}
		if !bytes.Equal(snapshotBytes(t, got), b) {
			t.Fatal("re-encoding differs")
		}
	}
	got, err := Read(bytes.NewReader(snapshotBytes(t, buildSample(t))), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if eph := got.EphemeralsOf(77); len(eph) != 1 || eph[0] != "/a/0000000001" {
		t.Fatalf("ephemeral index %q", eph)
	}
	if p, _ := got.ReapCandidates(1<<62, "", 10); len(p) != 0 {
		t.Fatalf("candidates %q", p)
	}
	if err := got.Delete("/c/t/x", -1, txAt(100)); err != nil {
		t.Fatal(err)
	}
	if p, _ := got.ReapCandidates(1<<62, "", 10); fmt.Sprint(p) != "[/c/t]" {
		t.Fatalf("candidates %q", p)
	}
	p, _ := mustCreate(t, got, Create{Path: "/a/", Sequential: true}, txAt(101))
	if p != "/a/0000000003" {
		t.Fatalf("sequence counter not restored: %q", p)
	}
}

func TestSnapshotDeterministic(t *testing.T) {
	// The same state reached by different insertion orders.
	a := New(Options{})
	b := New(Options{})
	tx := &Tx{Zxid: 5, Now: 50}
	paths := []string{"/x", "/x/1", "/x/2", "/y", "/y/z", "/a"}
	for _, p := range paths {
		mustCreate(t, a, Create{Path: p, Data: []byte(p)}, tx)
	}
	for _, p := range []string{"/a", "/y", "/x", "/x/2", "/y/z", "/x/1"} {
		mustCreate(t, b, Create{Path: p, Data: []byte(p)}, tx)
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("same state, different bytes")
	}
	// And through a multi on a clone.
	c := New(Options{}).Clone()
	var ops []Op
	for _, p := range paths {
		ops = append(ops, Op{Type: OpCreate, Path: p, Data: []byte(p)})
	}
	if _, err := c.Multi(ops, tx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, c)) {
		t.Fatal("multi: different bytes")
	}
	// Repeated encodings agree.
	s := buildSample(t)
	if !bytes.Equal(snapshotBytes(t, s), snapshotBytes(t, s)) {
		t.Fatal("two encodings of one tree differ")
	}
	if !bytes.Equal(snapshotBytes(t, s), snapshotBytes(t, buildSample(t))) {
		t.Fatal("two builds differ")
	}
}

func TestReadConsumesExactly(t *testing.T) {
	b := snapshotBytes(t, buildSample(t))
	r := bytes.NewReader(append(append([]byte{}, b...), "trailing"...))
	if _, err := Read(r, Options{}); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "trailing" {
		t.Fatalf("rest %q", rest)
	}
}

// reseal recomputes the body length and checksum of a hand-edited snapshot.
func reseal(b []byte) []byte {
	out := append([]byte{}, b...)
	binary.LittleEndian.PutUint64(out[len(snapMagic)+1:], uint64(len(out)-headerLen-4))
	binary.LittleEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], castagnoli))
	return out
}

// record encodes one snapshot record.
func record(path string, kind Kind, numChildren uint64, aux int64, data string) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(path)))
	b = append(b, path...)
	b = append(b, byte(kind))
	for range 7 {
		b = binary.AppendVarint(b, 1)
	}
	b = binary.AppendUvarint(b, numChildren)
	b = binary.AppendVarint(b, 0)
	b = binary.AppendVarint(b, aux)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

func snapshotOf(records ...[]byte) []byte {
	b := append([]byte(snapMagic), snapVersionV1)
	b = append(b, make([]byte, 8)...)
	for _, r := range records {
		b = append(b, r...)
	}
	return reseal(append(b, 0, 0, 0, 0))
}

func TestReadHandMade(t *testing.T) {
	root := func(n uint64) []byte { return record("/", Persistent, n, 0, "") }
	// Key order: the root's children come before the grandchildren.
	good := snapshotOf(root(2), record("/a", Persistent, 1, 0, "x"), record("/b", TTL, 0, 10, ""), record("/a/b", Ephemeral, 0, 5, ""))
	if tr, err := Read(bytes.NewReader(good), Options{}); err != nil {
		t.Fatal(err)
	} else if fmt.Sprint(tr.EphemeralsOf(5)) != "[/a/b]" {
		t.Fatal(tr.EphemeralsOf(5))
	}
	bad := map[string][]byte{
		"empty body":           snapshotOf(),
		"no root first":        snapshotOf(record("/a", Persistent, 0, 0, "")),
		"root ephemeral":       snapshotOf(record("/", Ephemeral, 0, 1, "")),
		"root aux":             snapshotOf(record("/", Persistent, 0, 1, "")),
		"duplicate root":       snapshotOf(root(0), root(0)),
		"missing parent":       snapshotOf(root(1), record("/a/b", Persistent, 0, 0, "")),
		"missing parent 2":     snapshotOf(root(1), record("/a", Persistent, 0, 0, ""), record("/b/c", Persistent, 0, 0, "")),
		"out of order":         snapshotOf(root(2), record("/b", Persistent, 0, 0, ""), record("/a", Persistent, 0, 0, "")),
		"duplicate":            snapshotOf(root(2), record("/a", Persistent, 0, 0, ""), record("/a", Persistent, 0, 0, "")),
		"depth-first order":    snapshotOf(root(2), record("/a", Persistent, 1, 0, ""), record("/a/b", Persistent, 0, 0, ""), record("/b", Persistent, 0, 0, "")),
		"child before parent":  snapshotOf(root(1), record("/a/b", Persistent, 0, 0, ""), record("/a", Persistent, 1, 0, "")),
		"invalid path":         snapshotOf(root(1), record("/a/", Persistent, 0, 0, "")),
		"relative path":        snapshotOf(root(1), record("/..", Persistent, 0, 0, "")),
		"too few children":     snapshotOf(root(2), record("/a", Persistent, 0, 0, "")),
		"too many children":    snapshotOf(root(0), record("/a", Persistent, 0, 0, "")),
		"leaf claims children": snapshotOf(root(1), record("/a", Persistent, 3, 0, "")),
		"shifted counts":       snapshotOf(root(2), record("/a", Persistent, 0, 0, ""), record("/b", Persistent, 1, 0, "")),
		"ephemeral parent":     snapshotOf(root(1), record("/a", Ephemeral, 1, 5, ""), record("/a/b", Persistent, 0, 0, "")),
		"ephemeral no owner":   snapshotOf(root(1), record("/a", Ephemeral, 0, 0, "")),
		"ttl zero":             snapshotOf(root(1), record("/a", TTL, 0, 0, "")),
		"ttl too big":          snapshotOf(root(1), record("/a", TTL, 0, 1<<40, "")),
		"persistent aux":       snapshotOf(root(1), record("/a", Persistent, 0, 4, "")),
		"container aux":        snapshotOf(root(1), record("/a", Container, 0, 4, "")),
		"bad kind":             snapshotOf(root(1), record("/a", Kind(9), 0, 0, "")),
		"data too large":       snapshotOf(root(1), record("/a", Persistent, 0, 0, "0123456789abcdefX")),
		"huge numChildren":     snapshotOf(root(1), record("/a", Persistent, 1<<40, 0, "")),
	}
	for name, b := range bad {
		_, err := Read(bytes.NewReader(b), Options{MaxDataSize: 16})
		if !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// Non-minimal varint.
	b := append([]byte{}, good[:headerLen]...)
	b = append(b, 0x81, 0x00, '/') // path length 1, written in two bytes
	b = append(b, record("/", Persistent, 0, 0, "")[2:]...)
	b = reseal(append(b, 0, 0, 0, 0))
	if _, err := Read(bytes.NewReader(b), Options{}); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("non-minimal varint: %v", err)
	}
}

func TestReadRejectsCorruption(t *testing.T) {
	good := snapshotBytes(t, buildSample(t))
	if _, err := Read(bytes.NewReader(good), Options{}); err != nil {
		t.Fatal(err)
	}
	// Every truncation fails.
	for i := range len(good) {
		if _, err := Read(bytes.NewReader(good[:i]), Options{}); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	// Every single-bit flip fails (CRC-32C detects all of them).
	for i := range len(good) {
		for bit := range 8 {
			b := append([]byte{}, good...)
			b[i] ^= 1 << bit
			if _, err := Read(bytes.NewReader(b), Options{}); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("flip at %d bit %d: %v", i, bit, err)
			}
		}
	}
	// Bad header fields.
	for name, mutate := range map[string]func([]byte){
		"magic":   func(b []byte) { b[0] = 'X' },
		"version": func(b []byte) { b[len(snapMagic)] = 2 },
		"huge body length": func(b []byte) {
			binary.LittleEndian.PutUint64(b[len(snapMagic)+1:], 1<<63)
		},
		"long body length": func(b []byte) {
			binary.LittleEndian.PutUint64(b[len(snapMagic)+1:], 1<<40)
		},
	} {
		b := append([]byte{}, good...)
		mutate(b)
		if _, err := Read(bytes.NewReader(b), Options{}); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Read(bytes.NewReader(nil), Options{}); !errors.Is(err, ErrBadSnapshot) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("empty input: %v", err)
	}
	// A data limit smaller than the snapshot's data is refused.
	if _, err := Read(bytes.NewReader(good), Options{MaxDataSize: 3}); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("data limit: %v", err)
	}
	// Reader errors are passed on.
	boom := errors.New("boom")
	if _, err := Read(io.MultiReader(bytes.NewReader(good[:100]), errReader{boom}), Options{}); !errors.Is(err, boom) {
		t.Errorf("reader error: %v", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.after {
		n := w.after
		w.after = 0
		return n, errors.New("disk full")
	}
	w.after -= len(p)
	return len(p), nil
}

func TestWriteToError(t *testing.T) {
	tr := buildSample(t)
	n, err := tr.WriteTo(&failWriter{after: 10})
	if err == nil || n != 10 {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

func TestSnapshotLargeData(t *testing.T) {
	tr := New(Options{MaxDataSize: 200 << 10})
	for i := range 5 {
		mustCreate(t, tr, Create{Path: fmt.Sprintf("/big%d", i), Data: bytes.Repeat([]byte{byte(i)}, 150<<10)}, txAt(int64(i+1)))
	}
	b := snapshotBytes(t, tr)
	got, err := Read(bytes.NewReader(b), Options{MaxDataSize: 200 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if dump(got) != dump(tr) {
		t.Fatal("differs")
	}
	// Through a reader that returns one byte at a time.
	got, err = Read(io.LimitReader(oneByteReader{bytes.NewReader(b)}, int64(len(b))), Options{MaxDataSize: 200 << 10})
	if err != nil || dump(got) != dump(tr) {
		t.Fatal(err)
	}
}

type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// TestSnapshotYields: encoding and decoding a snapshot yield the processor
// every yieldEvery records, in each of WriteTo's passes over the tree and
// in Read, so that a server with one processor goes on answering
// heartbeats and pings while it writes or installs a large snapshot.
func TestSnapshotYields(t *testing.T) {
	tr := New(Options{})
	tx := &Tx{}
	const n = 4 * yieldEvery
	for i := range n {
		tx.Zxid, tx.Events = int64(i+1), tx.Events[:0]
		if _, _, err := tr.Create(Create{Path: fmt.Sprintf("/n%06d", i), Data: []byte("x")}, tx); err != nil {
			t.Fatal(err)
		}
	}
	yields := 0
	saved := gosched
	gosched = func() { yields++ }
	defer func() { gosched = saved }()
	var buf bytes.Buffer
	if _, err := tr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	// Two passes over n+1 records.
	if want := 2 * (n + 1) / yieldEvery; yields < want {
		t.Errorf("WriteTo yielded %d times, want at least %d", yields, want)
	}
	yields = 0
	if _, err := Read(&buf, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := (n + 1) / yieldEvery; yields < want {
		t.Errorf("Read yielded %d times, want at least %d", yields, want)
	}
}
