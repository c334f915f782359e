package rpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"
)

// The faults of a bad disk on a stopped server's data dir (issue 37): a
// flipped bit, a zeroed 4 KiB page, a file truncated or deleted, in each
// part the data dir holds. Each must be found when the server opens the
// dir, and refused with ErrDataDirDamaged naming the file (and the offset
// where there is one), except a torn tail: damage past the last batch the
// WAL made durable, which is what a crash leaves, and is dropped.

// Faults, applied to a file of a stopped server.

func flipBit(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// zeroPage zeroes the 4 KiB page that holds off.
func zeroPage(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 4096), off&^4095); err != nil {
		t.Fatal(err)
	}
}

func truncateTo(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

// wantDamaged fails unless err is ErrDataDirDamaged naming every one of
// names.
func wantDamaged(t *testing.T, err error, names ...string) {
	t.Helper()
	if !errors.Is(err, ErrDataDirDamaged) {
		t.Fatalf("opened: %v, want ErrDataDirDamaged", err)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Fatalf("the refusal does not name %q: %v", n, err)
		}
	}
	t.Logf("refused: %v", err)
}

// copyDir copies a data dir, sparsely (a WAL segment is mostly
// preallocated zeros).
func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		st, err := in.Stat()
		if err != nil {
			return err
		}
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		defer out.Close()
		buf := make([]byte, 64<<10)
		zero := make([]byte, len(buf))
		for off := int64(0); ; off += int64(len(buf)) {
			n, err := in.ReadAt(buf, off)
			if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
				if _, werr := out.WriteAt(buf[:n], off); werr != nil {
					return werr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		return out.Truncate(st.Size())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// openDataDir opens dir as NewNode does, up to Raft (prepareDataDir,
// openStorage; WAL segments of testSegmentSize), and closes it again.
func openDataDir(dir string) error {
	kind, rec, err := prepareDataDir(dir, "")
	if err != nil {
		return err
	}
	s, _, err := openStorage(dir, kind, rec, hclog.NewNullLogger(), slog.New(slog.DiscardHandler), walOptions{segmentSize: testSegmentSize})
	if err != nil {
		return err
	}
	return s.Close()
}

// logEntry is entry i of the test logs: of term 1 + i/100, with data that
// says its index, and words that look like a WAL commit frame's header (a
// 3, then zeros), one at each alignment, which a search for intact
// batches must see through.
func logEntry(i uint64) *raft.Log {
	data := []byte(fmt.Sprintf("entry %d %0150d ", i, i))
	data = append(data, bytes.Repeat([]byte("\x03\x00\x00\x00\x00\x00\x00\x00\x00"), 8)...)
	return &raft.Log{Index: i, Term: 1 + i/100, Type: raft.LogCommand, Data: data, AppendedAt: time.Unix(1700000000, 0).UTC()}
}

// fillStore appends entries first..last in batches of batch, and sets the
// stable store as Raft would at that point.
func fillStore(t testing.TB, s raftStore, first, last uint64, batch int) {
	t.Helper()
	for i := first; i <= last; i += uint64(batch) {
		var logs []*raft.Log
		for j := i; j < i+uint64(batch) && j <= last; j++ {
			logs = append(logs, logEntry(j))
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	term := logEntry(last).Term
	for k, v := range map[string]uint64{"CurrentTerm": term + 1, "LastVoteTerm": term + 1} {
		if err := s.SetUint64([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("server-2")); err != nil {
		t.Fatal(err)
	}
}

// checkLog fails unless s holds exactly entries first..last of logEntry.
func checkLog(t *testing.T, s raftStore, first, last uint64) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("the log holds %d..%d, want %d..%d", f, l, first, last)
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if want := logEntry(i); got.Index != i || got.Term != want.Term || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("entry %d reads back as index %d term %d %q", i, got.Index, got.Term, got.Data)
		}
	}
}

// boltValueAt returns the file offset of the value of key in bucket of
// the bbolt file at path, in the pages its newest meta page reaches.
func boltValueAt(t *testing.T, path string, bucket, key []byte) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	off := int64(-1)
	c := &boltChecker{r: f, size: st.Size(), onValue: func(b, k []byte, at int64) {
		if bytes.Equal(b, bucket) && bytes.Equal(k, key) {
			off = at
		}
	}}
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		t.Fatalf("%s: no value at %s/%s", path, bucket, key)
	}
	return off
}

// walSegments returns the WAL's segment files in dir, in order.
func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, walDir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(segs)
	return segs
}

// testSegmentSize is the WAL segment size of the tests here: small, so that
// a few hundred entries make sealed segments and a tail.
const testSegmentSize = 64 << 10

func openTestWAL(dir string) (raftStore, error) {
	return openWALStore(dir, hclog.NewNullLogger(), walOptions{segmentSize: testSegmentSize})
}

// TestWALDamageRefused: damage in an entry the WAL already made durable,
// in a sealed segment, in the tail segment before its last batch, or in
// wal-meta.db, is refused naming the file (and the offset, for segments);
// the found bug of issue 37 (64 bytes flipped at 40% of the tail's written
// part) among them. Upstream raft-wal checked only the tail's last batch,
// and a server replayed the damaged entry.
func TestWALDamageRefused(t *testing.T) {
	tmpl := t.TempDir()
	s, err := openTestWAL(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	const last = 600
	fillStore(t, s, 1, last, 20) // 230-byte entries in batches of 20: 3 sealed segments and a tail
	s.Close()
	segs := walSegments(t, tmpl)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want sealed ones and a tail", len(segs))
	}
	sealed, tail := segs[0], segs[len(segs)-1]
	meta := filepath.Join(tmpl, walDir, metadb.FileName)
	// tailWritten is where the tail's written data ends.
	tailWritten := func(path string) int64 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(bytes.TrimRight(b, "\x00")))
	}
	for _, c := range []struct {
		name   string
		damage func(dir string)
		file   func(dir string) string
		offset bool
	}{
		{"sealed segment: a flipped bit", func(d string) { flipBit(t, rel(d, tmpl, sealed), 5000) }, segFile(sealed), true},
		{"sealed segment: a zeroed page", func(d string) { zeroPage(t, rel(d, tmpl, sealed), 8192) }, segFile(sealed), true},
		{"sealed segment: its seal flipped", func(d string) {
			p := rel(d, tmpl, sealed)
			flipBit(t, p, tailWritten(p)-20)
		}, segFile(sealed), true},
		{"sealed segment: truncated", func(d string) { truncateTo(t, rel(d, tmpl, sealed), 30000) }, segFile(sealed), true},
		{"sealed segment: deleted", func(d string) { removeFile(t, rel(d, tmpl, sealed)) }, segFile(sealed), false},
		{"tail: 64 bytes flipped at 40% of its written part (the found bug)", func(d string) {
			p := rel(d, tmpl, tail)
			at := tailWritten(p) * 4 / 10
			for i := int64(0); i < 64; i++ {
				flipBit(t, p, at+i)
			}
		}, segFile(tail), true},
		{"tail: a flipped bit in its first batch", func(d string) { flipBit(t, rel(d, tmpl, tail), 100) }, segFile(tail), true},
		{"tail: its header flipped", func(d string) { flipBit(t, rel(d, tmpl, tail), 9) }, segFile(tail), true},
		{"tail: a zeroed page", func(d string) { zeroPage(t, rel(d, tmpl, tail), 4096) }, segFile(tail), true},
		{"tail: truncated", func(d string) { truncateTo(t, rel(d, tmpl, tail), tailWritten(rel(d, tmpl, tail))) }, segFile(tail), true},
		{"tail: deleted", func(d string) { removeFile(t, rel(d, tmpl, tail)) }, segFile(tail), false},
		{"wal-meta.db: the vote flipped", func(d string) {
			p := rel(d, tmpl, meta)
			flipBit(t, p, boltValueAt(t, p, []byte("stable"), []byte("LastVoteCand")))
		}, metaFile, false},
		{"wal-meta.db: the segment list flipped", func(d string) {
			p := rel(d, tmpl, meta)
			flipBit(t, p, boltValueAt(t, p, []byte("wal-meta"), []byte("m"))+30)
		}, metaFile, false},
		{"wal-meta.db: meta page 0 flipped", func(d string) { flipBit(t, rel(d, tmpl, meta), 40) }, metaFile, true},
		{"wal-meta.db: meta page 1 zeroed", func(d string) { zeroPage(t, rel(d, tmpl, meta), 4096) }, metaFile, true},
		{"wal-meta.db: the page of the buckets zeroed", func(d string) {
			p := rel(d, tmpl, meta)
			zeroPage(t, p, boltValueAt(t, p, []byte("stable"), []byte("CurrentTerm")))
		}, metaFile, true},
		{"wal-meta.db: truncated", func(d string) { truncateTo(t, rel(d, tmpl, meta), 8192) }, metaFile, true},
		{"wal-meta.db: deleted", func(d string) { removeFile(t, rel(d, tmpl, meta)) }, metaFile, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, tmpl, dir)
			c.damage(dir)
			_, err := openTestWAL(dir)
			names := []string{c.file(dir)}
			if c.offset {
				names = append(names, "offset ")
			}
			wantDamaged(t, err, names...)
		})
	}
}

// rel returns path, a file of data dir from, in data dir to.
func rel(to, from, path string) string {
	r, err := filepath.Rel(from, path)
	if err != nil {
		panic(err)
	}
	return filepath.Join(to, r)
}

func segFile(path string) func(string) string {
	return func(string) string { return filepath.Base(path) }
}

func metaFile(string) string { return metadb.FileName }

// crashedWAL makes a WAL in a new dir as a server leaves it when killed
// just after an append: entries 1..600 written and the store closed and
// opened again (which records its tail), then entries 601..660 appended in
// three batches of 20, and no close. It returns the dir, the tail segment,
// where the batches written since the record start (601's), and where the
// last batch (641..660) starts and ends in it.
func crashedWAL(t *testing.T) (dir, tail string, unrecorded, start, end int64) {
	t.Helper()
	dir = t.TempDir()
	s, err := openTestWAL(dir)
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, s, 1, 600, 20)
	s.Close()
	if s, err = openTestWAL(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	segs := walSegments(t, dir)
	tail = segs[len(segs)-1]
	written := func() int64 {
		b, err := os.ReadFile(tail)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(bytes.TrimRight(b, "\x00")))
	}
	unrecorded = written()
	for first := uint64(601); first <= 641; first += 20 {
		start = written()
		var logs []*raft.Log
		for i := first; i < first+20; i++ {
			logs = append(logs, logEntry(i))
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	if end = written(); len(walSegments(t, dir)) != len(segs) || end <= start {
		t.Fatalf("the last batches did not go into the same tail segment (%d..%d)", start, end)
	}
	return dir, tail, unrecorded, start, end
}

// TestWALTornTailDropped: damage past the last batch the WAL made durable
// (a batch a crash cut short: its bytes half there, garbage, or its commit
// missing) is dropped on open, and only that batch, as before; TestWALCrash
// plays many more such tails.
func TestWALTornTailDropped(t *testing.T) {
	tmpl, tail, unrecorded, start, end := crashedWAL(t)
	r := rand.New(rand.NewPCG(37, 1))
	for _, c := range []struct {
		name string
		tear func(p string)
	}{
		{"its commit frame never written", func(p string) { zeroRange(t, p, end-8, end) }},
		{"its second half never written", func(p string) { zeroRange(t, p, (start+end)/2, end) }},
		{"a sector in its middle never written", func(p string) { zeroRange(t, p, (start+end)/2&^511, (start+end)/2&^511+512) }},
		{"garbage after a point", func(p string) {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			g := make([]byte, end-(start+end)/2)
			for i := range g {
				g[i] = byte(r.Uint32())
			}
			if _, err := f.WriteAt(g, (start+end)/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"a bit flipped in it", func(p string) { flipBit(t, p, start+100) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, tmpl, dir)
			c.tear(rel(dir, tmpl, tail))
			s, err := openTestWAL(dir)
			if err != nil {
				t.Fatalf("a torn last batch: %v", err)
			}
			defer s.Close()
			checkLog(t, s, 1, 640)
		})
	}
	// Damage before it is refused: in a batch written since the tail was
	// recorded, because an intact batch follows it; in a batch the record
	// covers, even when none does (here the boundary of the last recorded
	// batch and the next is zeroed, and all after it).
	for _, c := range []struct {
		name   string
		damage func(p string)
	}{
		{"a bit flipped in an earlier batch since the record", func(p string) { flipBit(t, p, unrecorded+100) }},
		{"a commit frame since the record zeroed", func(p string) { zeroRange(t, p, start-8, start) }},
		{"the recorded end zeroed, and all after it", func(p string) { zeroRange(t, p, unrecorded-16, end) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, tmpl, dir)
			c.damage(rel(dir, tmpl, tail))
			_, err := openTestWAL(dir)
			wantDamaged(t, err, filepath.Base(tail), "offset ")
		})
	}
}

func zeroRange(t *testing.T, path string, from, to int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, to-from), from); err != nil {
		t.Fatal(err)
	}
}

// TestWALFlippedBitsNeverRead: of a server killed just after three
// appends, a bit flipped anywhere in the written part of any segment
// before the last batch is refused, naming the segment; one flipped in the
// last batch (a torn write, for all the WAL can tell) drops that batch and
// nothing else. The log never reads back other bytes than were written.
// 40 random bits, 30 before the last batch and 10 in it, each on a fresh
// copy.
func TestWALFlippedBitsNeverRead(t *testing.T) {
	tmpl, tail, _, start, end := crashedWAL(t)
	segs := walSegments(t, tmpl)
	written := map[string]int64{}
	for _, p := range segs {
		b, _ := os.ReadFile(p)
		written[p] = int64(len(bytes.TrimRight(b, "\x00")))
	}
	written[tail] = start
	r := rand.New(rand.NewPCG(37, 2))
	for i := range 40 {
		p, off := tail, start+r.Int64N(end-start)
		if i < 30 {
			p = segs[r.IntN(len(segs))]
			off = r.Int64N(written[p])
		}
		dir := t.TempDir()
		copyDir(t, tmpl, dir)
		flipBit(t, rel(dir, tmpl, p), off)
		s, err := openTestWAL(dir)
		if i < 30 {
			if !errors.Is(err, ErrDataDirDamaged) || !strings.Contains(err.Error(), filepath.Base(p)) {
				t.Fatalf("flip %d (%s at %d): %v, want a refusal naming the segment", i, filepath.Base(p), off, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("flip %d in the last batch (at %d): %v", i, off, err)
		}
		checkLog(t, s, 1, 640)
		s.Close()
		os.RemoveAll(dir)
	}
}

// newDataDir makes a data dir of a log store of kind as a server does
// (prepareDataDir, openStorage: the store and the dir's record), holding
// entries 1..600 and a stable store; the store is left open.
func newDataDir(t *testing.T, kind string) (string, raftStore, *checkedSnapshots) {
	t.Helper()
	dir := t.TempDir()
	k, rec, err := prepareDataDir(dir, kind)
	if err != nil {
		t.Fatal(err)
	}
	s, snaps, err := openStorage(dir, k, rec, hclog.NewNullLogger(), slog.New(slog.DiscardHandler), walOptions{segmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, s, 1, 600, 20)
	return dir, s, snaps
}

// TestBoltStoreDamageRefused: raft.db damaged in a value (an entry, a
// term, the vote, the record of the log), a key, a meta page, a page of the
// tree, cut short or deleted, is refused naming it. bbolt checksums only
// its meta pages, and falls back silently to the older one.
func TestBoltStoreDamageRefused(t *testing.T) {
	tmpl, s, _ := newDataDir(t, RaftLogBolt)
	s.Close()
	st, _ := os.Stat(filepath.Join(tmpl, boltFile))
	entry := func(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }
	for _, c := range []struct {
		name   string
		damage func(p string)
		offset bool
	}{
		{"an entry flipped", func(p string) { flipBit(t, p, boltValueAt(t, p, []byte("logs"), entry(300))+40) }, false},
		{"an entry's key flipped", func(p string) { flipBit(t, p, boltValueAt(t, p, []byte("logs"), entry(300))-1) }, false},
		{"the current term flipped", func(p string) { flipBit(t, p, boltValueAt(t, p, []byte("conf"), []byte("CurrentTerm"))+7) }, false},
		{"the vote flipped", func(p string) { flipBit(t, p, boltValueAt(t, p, []byte("conf"), []byte("LastVoteCand"))) }, false},
		{"the record of the log flipped", func(p string) { flipBit(t, p, boltValueAt(t, p, []byte("conf"), []byte("coordd.record"))) }, false},
		{"meta page 1 flipped", func(p string) { flipBit(t, p, 4096+30) }, true},
		{"the page of an entry zeroed", func(p string) { zeroPage(t, p, boltValueAt(t, p, []byte("logs"), entry(300))) }, true},
		{"the page of the stable store zeroed", func(p string) { zeroPage(t, p, boltValueAt(t, p, []byte("conf"), []byte("CurrentTerm"))) }, true},
		{"truncated", func(p string) { truncateTo(t, p, st.Size()/2) }, true},
		{"deleted", func(p string) { removeFile(t, p) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, tmpl, dir)
			c.damage(filepath.Join(dir, boltFile))
			names := []string{boltFile}
			if c.offset {
				names = append(names, "offset ")
			}
			wantDamaged(t, openDataDir(dir), names...)
		})
	}
	// The template itself opens.
	if err := openDataDir(tmpl); err != nil {
		t.Fatal(err)
	}
}

// TestBoltFlippedBitsNeverRead: a bit flipped anywhere in raft.db is
// refused, or changes nothing that is read back (unused bytes of a page, a
// free page): the log and the stable store read back as written. 40
// random bits, each on a fresh copy.
func TestBoltFlippedBitsNeverRead(t *testing.T) {
	tmpl, s, _ := newDataDir(t, RaftLogBolt)
	s.Close()
	st, err := os.Stat(filepath.Join(tmpl, boltFile))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(37, 3))
	const flips = 40
	refused := 0
	for i := range flips {
		off := r.Int64N(st.Size())
		dir := t.TempDir()
		copyDir(t, tmpl, dir)
		flipBit(t, filepath.Join(dir, boltFile), off)
		err := openDataDir(dir)
		if err != nil {
			if !errors.Is(err, ErrDataDirDamaged) || !strings.Contains(err.Error(), boltFile) {
				t.Fatalf("flip %d (at %d): %v", i, off, err)
			}
			refused++
			continue
		}
		s, err := openBoltStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		checkLog(t, s, 1, 600)
		if v, _ := s.Get([]byte("LastVoteCand")); string(v) != "server-2" {
			t.Fatalf("flip %d (at %d): the vote reads back as %q", i, off, v)
		}
		s.Close()
		os.RemoveAll(dir)
	}
	t.Logf("%d flipped bits: %d refused, %d harmless", flips, refused, flips-refused)
}

// TestDataDirRecord: a data dir records its log store and newest snapshot
// (datadir.go); a store deleted whole, which would make the dir look new
// (the server forgetting its term and vote), is refused, and so is a
// damaged record. A dir from before the record gets one.
func TestDataDirRecord(t *testing.T) {
	for _, kind := range []string{RaftLogWAL, RaftLogBolt} {
		t.Run(kind, func(t *testing.T) {
			tmpl, s, _ := newDataDir(t, kind)
			s.Close()
			for _, c := range []struct {
				name   string
				damage func(dir string)
				names  []string
			}{
				{"the store deleted", func(d string) { removeFile(t, filepath.Join(d, storeFile(kind))) }, []string{recordFile, storeFile(kind)}},
				{"the record flipped", func(d string) { flipBit(t, filepath.Join(d, recordFile), 30) }, []string{recordFile}},
			} {
				t.Run(c.name, func(t *testing.T) {
					dir := t.TempDir()
					copyDir(t, tmpl, dir)
					c.damage(dir)
					wantDamaged(t, openDataDir(dir), c.names...)
				})
			}
			// A dir without a record (made before it) opens, and gets one.
			dir := t.TempDir()
			copyDir(t, tmpl, dir)
			removeFile(t, filepath.Join(dir, recordFile))
			if err := openDataDir(dir); err != nil {
				t.Fatal(err)
			}
			if rec, err := readDataRecord(dir); err != nil || rec == nil || rec.Log != kind {
				t.Fatalf("the record after opening a dir without one: %+v, %v", rec, err)
			}
		})
	}
}

// TestStableStoreContradictionsRefused: a stable store whose vote is of a
// term after its current term, or whose current term is before the last
// entry's, cannot be what Raft wrote (it makes the term durable before it
// votes or appends in it), and is refused rather than trusted.
func TestStableStoreContradictionsRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		set  map[string]uint64
		want string
	}{
		{"a vote after the current term", map[string]uint64{"LastVoteTerm": 99}, "voted in term 99"},
		{"a current term before the last entry's", map[string]uint64{"CurrentTerm": 2, "LastVoteTerm": 2}, "of term 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, s, _ := newDataDir(t, RaftLogWAL)
			for k, v := range c.set {
				if err := s.SetUint64([]byte(k), v); err != nil {
					t.Fatal(err)
				}
			}
			s.Close()
			wantDamaged(t, openDataDir(dir), c.want)
		})
	}
}

// snapshotDataDir makes a data dir (newDataDir) with two snapshots, at
// entries 300 and 500; with compacted, the log then keeps entries 401..600
// only, as after Raft's compaction, so that the older snapshot no longer
// meets the log. It returns the dir and the two snapshots' ids.
func snapshotDataDir(t *testing.T, compacted bool) (string, string, string) {
	t.Helper()
	dir, s, snaps := newDataDir(t, RaftLogWAL)
	defer s.Close()
	_, trans := raft.NewInmemTransport("")
	cf := raft.Configuration{Servers: []raft.Server{{ID: "1", Address: "127.0.0.1:1"}}}
	var ids []string
	for _, at := range []uint64{300, 500} {
		sink, err := snaps.Create(raft.SnapshotVersionMax, at, logEntry(at).Term, cf, 1, trans)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Write(bytes.Repeat([]byte(fmt.Sprintf("the state at %d. ", at)), 2000)); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sink.ID())
	}
	if compacted {
		if err := s.DeleteRange(1, 400); err != nil {
			t.Fatal(err)
		}
	}
	return dir, ids[0], ids[1]
}

// openedSnapshot opens dir (openDataDir's way) and returns the snapshot
// Raft would restore: "" for none.
func openedSnapshot(t *testing.T, dir string) (string, error) {
	t.Helper()
	kind, rec, err := prepareDataDir(dir, "")
	if err != nil {
		return "", err
	}
	s, snaps, err := openStorage(dir, kind, rec, hclog.NewNullLogger(), slog.New(slog.DiscardHandler), walOptions{segmentSize: testSegmentSize})
	if err != nil {
		return "", err
	}
	defer s.Close()
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return "", err
	}
	if len(list) != 1 {
		t.Fatalf("Raft is shown %d snapshots", len(list))
	}
	return list[0].ID, nil
}

// TestSnapshotDamageRefused: the newest snapshot damaged (its state or its
// metadata flipped, zeroed, cut or deleted, or the whole snapshot deleted)
// is refused naming the file, when the log no longer holds the entries
// since the older snapshot: hashicorp/raft fell back to the older one
// without a word (or skipped a meta.json it could not parse), and the
// state machine then missed those entries. Where the log does hold them,
// the server falls back to the older snapshot, or to none, which loses
// nothing; damage to a snapshot older than an intact one is harmless (it
// is never read) and is passed over.
func TestSnapshotDamageRefused(t *testing.T) {
	tmpl, _, newest := snapshotDataDir(t, true)
	state := filepath.Join(snapshotsDir, newest, "state.bin")
	meta := filepath.Join(snapshotsDir, newest, "meta.json")
	for _, c := range []struct {
		name   string
		damage func(dir string)
		names  []string
	}{
		{"its state flipped", func(d string) { flipBit(t, filepath.Join(d, state), 30000) }, []string{state}},
		{"a page of its state zeroed", func(d string) { zeroPage(t, filepath.Join(d, state), 8192) }, []string{state}},
		{"its state truncated", func(d string) { truncateTo(t, filepath.Join(d, state), 10000) }, []string{state}},
		{"its state deleted (the metadata without its data)", func(d string) { removeFile(t, filepath.Join(d, state)) }, []string{state}},
		{"its metadata flipped", func(d string) { flipBit(t, filepath.Join(d, meta), 60) }, []string{meta}},
		{"its metadata's index changed", func(d string) { replaceIn(t, filepath.Join(d, meta), `"Index":500`, `"Index":501`) }, []string{meta}},
		{"its metadata truncated", func(d string) { truncateTo(t, filepath.Join(d, meta), 100) }, []string{meta}},
		{"its metadata deleted", func(d string) { removeFile(t, filepath.Join(d, meta)) }, []string{meta}},
		{"deleted whole", func(d string) { removeFile(t, filepath.Join(d, snapshotsDir, newest)) }, []string{newest}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, tmpl, dir)
			c.damage(dir)
			_, err := openedSnapshot(t, dir)
			wantDamaged(t, err, c.names...)
		})
	}

	t.Run("the log holds what the older one lacks", func(t *testing.T) {
		tmpl, older, newest := snapshotDataDir(t, false)
		for _, c := range []struct {
			name   string
			damage func(dir string)
			want   string
		}{
			{"the newest damaged: the older one", func(d string) { flipBit(t, filepath.Join(d, snapshotsDir, newest, "state.bin"), 30000) }, older},
			{"the newest deleted: the older one", func(d string) { removeFile(t, filepath.Join(d, snapshotsDir, newest)) }, older},
			{"both damaged: none, the log from entry 1", func(d string) {
				flipBit(t, filepath.Join(d, snapshotsDir, newest, "state.bin"), 30000)
				flipBit(t, filepath.Join(d, snapshotsDir, older, "meta.json"), 60)
			}, ""},
			{"the older damaged: the newest", func(d string) { flipBit(t, filepath.Join(d, snapshotsDir, older, "state.bin"), 30000) }, newest},
		} {
			t.Run(c.name, func(t *testing.T) {
				dir := t.TempDir()
				copyDir(t, tmpl, dir)
				c.damage(dir)
				got, err := openedSnapshot(t, dir)
				if err != nil || got != c.want {
					t.Fatalf("Raft restores %q (%v), want %q", got, err, c.want)
				}
			})
		}
	})
}

// replaceIn replaces old by new, once, in the file at path.
func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s holds no %q: %s", path, old, b)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dirContents returns every file under dir with its bytes.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRefusedStartChangesNothing: a start refused for damage found after
// the log store opened (a snapshot's) leaves every file of the data dir as
// it was, with either store: nothing is written before the checks pass.
func TestRefusedStartChangesNothing(t *testing.T) {
	for _, kind := range []string{RaftLogWAL, RaftLogBolt} {
		t.Run(kind, func(t *testing.T) {
			dir, s, snaps := newDataDir(t, kind)
			_, trans := raft.NewInmemTransport("")
			sink, err := snaps.Create(raft.SnapshotVersionMax, 500, logEntry(500).Term, raft.Configuration{Servers: []raft.Server{{ID: "1", Address: "127.0.0.1:1"}}}, 1, trans)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sink.Write([]byte("the state at 500")); err != nil {
				t.Fatal(err)
			}
			if err := sink.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(1, 400); err != nil {
				t.Fatal(err)
			}
			s.Close()
			flipBit(t, filepath.Join(dir, snapshotsDir, sink.ID(), "state.bin"), 3)
			before := dirContents(t, dir)
			wantDamaged(t, openDataDir(dir), "state.bin")
			after := dirContents(t, dir)
			for p, b := range before {
				if after[p] != b {
					t.Errorf("the refused start changed %s", p)
				}
			}
			if len(after) != len(before) {
				t.Errorf("the refused start left %d files, there were %d", len(after), len(before))
			}
		})
	}
}

// TestWALMetaUpgraded: a wal-meta.db written before its checksums (no
// trailers, no record of its keys: made here by taking them off) opens,
// with its segment list and stable store as they were, and is upgraded:
// afterwards every value has its trailer again.
func TestWALMetaUpgraded(t *testing.T) {
	dir := t.TempDir()
	s, err := openTestWAL(dir)
	if err != nil {
		t.Fatal(err)
	}
	fillStore(t, s, 1, 300, 20)
	s.Close()
	path := filepath.Join(dir, walDir, metadb.FileName)
	strip := func(tx *bbolt.Tx) error {
		if err := tx.Bucket([]byte(metadb.MetaBucket)).Delete([]byte(metadb.RecordKey)); err != nil {
			return err
		}
		for _, name := range []string{metadb.MetaBucket, metadb.StableBucket} {
			b := tx.Bucket([]byte(name))
			var keys, vals [][]byte
			if err := b.ForEach(func(k, v []byte) error {
				if len(v) < 8 || string(v[len(v)-8:len(v)-4]) != "cdc1" {
					return fmt.Errorf("%s/%s has no trailer", name, k)
				}
				keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v[:len(v)-8]))
				return nil
			}); err != nil {
				return err
			}
			for i := range keys {
				if err := b.Put(keys[i], vals[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(strip)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the upgrade, then a plain open
		s, err := openTestWAL(dir)
		if err != nil {
			t.Fatal(err)
		}
		checkLog(t, s, 1, 300)
		if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != logEntry(300).Term+1 {
			t.Fatalf("CurrentTerm %d, %v", term, err)
		}
		s.Close()
	}
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte(metadb.MetaBucket)).Get([]byte(metadb.RecordKey)) == nil {
			return errors.New("no record of its keys")
		}
		for _, name := range []string{metadb.MetaBucket, metadb.StableBucket} {
			if err := tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
				if len(v) < 8 || string(v[len(v)-8:len(v)-4]) != "cdc1" {
					return fmt.Errorf("%s/%s has no trailer", name, k)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after the upgrade: %v", err)
	}
}

// TestUnfinishedSnapshotsRemoved: a snapshot a crash left unfinished
// (snapshots/ID.tmp, with what it had written) is removed when the data
// dir opens, once it is found sound; nothing else read it, and it held its
// space for good.
func TestUnfinishedSnapshotsRemoved(t *testing.T) {
	dir := t.TempDir()
	if err := openDataDir(dir); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, snapshotsDir, "2-100-1795856214583.tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "state.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := openDataDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unfinished snapshot is still there: %v", err)
	}
}
