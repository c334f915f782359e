package tree

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

// show tells null data from empty data.
func show(b []byte) string {
	if b == nil {
		return "null"
	}
	return "[" + string(b) + "]"
}

// TestNullAndEmptyData: as in ZooKeeper, null data (nil) and empty data
// (a non-nil empty slice) are kept apart and read back as written, through
// Create, SetData and Multi and through a snapshot; both have DataLength 0;
// the root's data is empty.
func TestNullAndEmptyData(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/null"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/empty", Data: []byte{}}, txAt(2))
	mustCreate(t, tr, Create{Path: "/x", Data: []byte("x")}, txAt(3))
	mustCreate(t, tr, Create{Path: "/set-null", Data: []byte("x")}, txAt(4))
	mustCreate(t, tr, Create{Path: "/set-empty"}, txAt(5))
	if _, err := tr.SetData("/set-null", nil, -1, txAt(6)); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.SetData("/set-empty", []byte{}, -1, txAt(7)); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Multi([]Op{
		{Type: OpCreate, Path: "/m-null"},
		{Type: OpCreate, Path: "/m-empty", Data: []byte{}},
		{Type: OpSetData, Path: "/x", Data: []byte{}},
	}, txAt(8)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/": "[]", "/null": "null", "/empty": "[]", "/x": "[]", "/set-null": "null", "/set-empty": "[]",
		"/m-null": "null", "/m-empty": "[]",
	}
	check := func(tr *Tree, what string) {
		t.Helper()
		for p, w := range want {
			d, st, err := tr.Get(p)
			if err != nil {
				t.Fatal(err)
			}
			if show(d) != w || st.DataLength != 0 {
				t.Errorf("%s: %s: data %s, length %d; want %s, 0", what, p, show(d), st.DataLength, w)
			}
		}
	}
	check(tr, "tree")
	check(tr.Clone(), "clone")

	var buf bytes.Buffer
	if _, err := tr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Read(bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(back, "snapshot")
	var again bytes.Buffer
	if _, err := back.WriteTo(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("the snapshot of a read snapshot differs")
	}
}

// TestSnapshotWithoutNullData: a tree with no null data is written as
// before null data was kept (no record has the null flag), so a snapshot
// from before reads back with every node's data empty, not null.
func TestSnapshotWithoutNullData(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/a", Data: []byte{}}, txAt(1))
	mustCreate(t, tr, Create{Path: "/a/b", Data: []byte("b")}, txAt(2))
	var buf bytes.Buffer
	if _, err := tr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	for i, c := range buf.Bytes()[headerLen:] {
		// Every kind byte of this snapshot is Persistent (0); only a
		// kind byte could carry the flag.
		if c == nullFlag {
			t.Fatalf("byte %d of a snapshot without null data is the null flag", headerLen+i)
		}
	}
	back, err := Read(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := back.Get("/a"); d == nil || len(d) != 0 {
		t.Fatalf("/a: %s, want []", show(d))
	}
}

// TestSnapshotNullWithData: a record flagged null that carries data is
// refused.
func TestSnapshotNullWithData(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/a", Data: []byte("z")}, txAt(1))
	var buf bytes.Buffer
	if _, err := tr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// /a's record: uvarint 2, "/a", then its kind byte.
	i := bytes.Index(b[headerLen:], []byte{2, '/', 'a'})
	if i < 0 {
		t.Fatal("no record of /a")
	}
	b[headerLen+i+3] |= nullFlag
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	if _, err := Read(bytes.NewReader(b), Options{}); !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "null data of 1 bytes") {
		t.Fatalf("null with data: %v", err)
	}
}
