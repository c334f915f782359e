package rpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
)

// upstreamEncode encodes a log entry as upstream raft-boltdb does (a new
// handle per call, the old time format, which coordd uses).
func upstreamEncode(t *testing.T, l *raft.Log) []byte {
	t.Helper()
	var buf bytes.Buffer
	h := codec.MsgpackHandle{BasicHandle: codec.BasicHandle{TimeNotBuiltin: true}}
	if err := codec.NewEncoder(&buf, &h).Encode(l); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testLogs(first, n int) []*raft.Log {
	var logs []*raft.Log
	for i := first; i < first+n; i++ {
		logs = append(logs, &raft.Log{Index: uint64(i), Term: 3, Type: raft.LogCommand,
			Data: []byte(fmt.Sprintf("entry %d %0100d", i, i)), AppendedAt: time.Unix(1700000000, int64(i)).UTC()})
	}
	return logs
}

func openLogStore(t *testing.T, path string) *raftboltdb.BoltStore {
	t.Helper()
	s, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLogStoreKeepsUpstreamsFormat: coordd's raft-boltdb
// (rpc/third_party/raft-boltdb) stores each value as upstream encodes it,
// followed by a checksum trailer that upstream's decoder reads past; a
// store upstream wrote is upgraded when coordd first opens it (every value
// gets its trailer, and reads back as before); and after that, a value
// without its trailer is damage.
func TestLogStoreKeepsUpstreamsFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	logs := testLogs(1, 20)

	// A store as upstream writes it: its buckets, raw values.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("logs"))
		if err != nil {
			return err
		}
		for _, l := range logs {
			if err := b.Put(binary.BigEndian.AppendUint64(nil, l.Index), upstreamEncode(t, l)); err != nil {
				return err
			}
		}
		c, err := tx.CreateBucket([]byte("conf"))
		if err != nil {
			return err
		}
		return c.Put([]byte("CurrentTerm"), binary.BigEndian.AppendUint64(nil, 3))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s := openLogStore(t, path)
	if err := s.StoreLogs(testLogs(21, 1)); err != nil {
		t.Fatal(err)
	}
	for _, want := range append(logs, testLogs(21, 1)...) {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatal(err)
		}
		if got.Index != want.Index || got.Term != want.Term || !bytes.Equal(got.Data, want.Data) || !got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("entry %d read back as %+v, want %+v", want.Index, got, want)
		}
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 3 {
		t.Fatalf("CurrentTerm after the upgrade: %d, %v", term, err)
	}
	s.Close()

	// Every value is upstream's bytes and a trailer, which upstream's
	// decoder reads past; an entry put there without one is refused.
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		for _, l := range append(logs, testLogs(21, 1)...) {
			got, want := b.Get(binary.BigEndian.AppendUint64(nil, l.Index)), upstreamEncode(t, l)
			if !bytes.HasPrefix(got, want) || len(got) != len(want)+8 {
				return fmt.Errorf("entry %d: stored %x, want upstream's %x and a trailer", l.Index, got, want)
			}
			var back raft.Log
			if err := codec.NewDecoderBytes(got, &codec.MsgpackHandle{}).Decode(&back); err != nil || back.Index != l.Index {
				return fmt.Errorf("upstream's decoder reads entry %d as %+v: %v", l.Index, back, err)
			}
		}
		return b.Put(binary.BigEndian.AppendUint64(nil, 22), upstreamEncode(t, testLogs(22, 1)[0]))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raftboltdb.New(raftboltdb.Options{Path: path}); !errors.Is(err, raftboltdb.ErrCorrupt) {
		t.Fatalf("opening a store with an entry without its trailer: %v, want ErrCorrupt", err)
	}
}

// TestLogStorePagesAreFull: the log's pages are filled before they split
// (rpc/third_party/raft-boltdb), not left half empty as with bbolt's default,
// which made raft.db, and its share of a server's memory, twice the size.
func TestLogStorePagesAreFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openLogStore(t, path)
	for first := 1; first <= 5000; first += 50 {
		if err := s.StoreLogs(testLogs(first, 50)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var st bbolt.BucketStats
	if err := db.View(func(tx *bbolt.Tx) error {
		st = tx.Bucket([]byte("logs")).Stats()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fill := float64(st.LeafInuse) / float64(st.LeafAlloc); fill < 0.8 {
		t.Fatalf("log leaf pages %.0f%% full (%d of %d bytes), want at least 80%%", 100*fill, st.LeafInuse, st.LeafAlloc)
	}
}

// TestChooseRaftLog: a data dir keeps the log store it holds, a new one
// takes the store asked for or the default, and asking for the other store
// than the one a dir holds is refused.
func TestChooseRaftLog(t *testing.T) {
	mk := func(files ...string) string {
		dir := t.TempDir()
		for _, f := range files {
			var err error
			if strings.HasSuffix(f, "/") {
				err = os.Mkdir(filepath.Join(dir, f), 0o700)
			} else {
				err = os.WriteFile(filepath.Join(dir, f), nil, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name  string
		dir   string
		want  string
		got   string
		error string
	}{
		{"new dir, default", mk(), "", DefaultRaftLog, ""},
		{"new dir with a server id", mk("server-id"), "", DefaultRaftLog, ""},
		{"missing dir", filepath.Join(t.TempDir(), "new"), RaftLogBolt, RaftLogBolt, ""},
		{"new dir, bolt", mk(), RaftLogBolt, RaftLogBolt, ""},
		{"new dir, wal", mk(), RaftLogWAL, RaftLogWAL, ""},
		{"bolt dir", mk("server-id", "raft.db"), "", RaftLogBolt, ""},
		{"bolt dir, bolt", mk("raft.db"), RaftLogBolt, RaftLogBolt, ""},
		{"bolt dir, wal", mk("raft.db"), RaftLogWAL, "", "--raft-log wal, but"},
		{"wal dir", mk("wal/"), "", RaftLogWAL, ""},
		{"wal dir, bolt", mk("wal/"), RaftLogBolt, "", "--raft-log bolt, but"},
		{"both", mk("raft.db", "wal/"), "", "", "holds both raft.db"},
		{"unknown", mk(), "rocksdb", "", `unknown raft log store "rocksdb"`},
	} {
		got, err := chooseRaftLog(tc.dir, tc.want)
		switch {
		case tc.error == "" && (err != nil || got != tc.got):
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.got)
		case tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)):
			t.Errorf("%s: %q, %v; want an error with %q", tc.name, got, err, tc.error)
		case strings.Contains(tc.error, "but") && !errors.Is(err, ErrRaftLogMismatch):
			t.Errorf("%s: %v is not ErrRaftLogMismatch", tc.name, err)
		}
	}
}

// TestRaftLogKeptOnRestart: a server restarted without --raft-log keeps the
// store its data dir holds, with its data; started with the other store it
// refuses, and changes nothing in the dir.
func TestRaftLogKeptOnRestart(t *testing.T) {
	for _, kind := range []string{RaftLogBolt, RaftLogWAL} {
		t.Run(kind, func(t *testing.T) {
			cfg := testConfig(t, "1")
			cfg.RaftLog = kind
			start := func(c Config) *Node {
				var n *Node
				startOver(t, func() (err error) {
					c.ClientAddr, c.PeerAddr = freeAddr(t), freeAddr(t)
					n, err = NewNode(c)
					return err
				})
				return n
			}
			n := start(cfg)
			waitLeader(t, n)
			s, _ := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 10000})
			if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/kept", Data: []byte(kind)}}}); r.Error != apipb.ErrorCode_OK {
				t.Fatalf("create: %v", r)
			}
			n.Close()

			other := RaftLogWAL
			if kind == RaftLogWAL {
				other = RaftLogBolt
			}
			list := func() []string {
				var names []string
				err := filepath.WalkDir(cfg.DataDir, func(p string, d os.DirEntry, err error) error {
					names = append(names, p)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return names
			}
			files := list()
			refused := cfg
			refused.RaftLog, refused.ClientAddr, refused.PeerAddr = other, freeAddr(t), freeAddr(t)
			if _, err := NewNode(refused); !errors.Is(err, ErrRaftLogMismatch) {
				t.Fatalf("started with --raft-log %s on a %s dir: %v, want ErrRaftLogMismatch", other, kind, err)
			}
			if after := list(); !slices.Equal(files, after) {
				t.Fatalf("the refused start changed the data dir: %v, then %v", files, after)
			}

			again := cfg
			again.RaftLog = ""
			n = start(again)
			defer n.Close()
			if got, _ := existingRaftLog(cfg.DataDir); got != kind {
				t.Fatalf("the data dir holds %q, want %q", got, kind)
			}
			waitFor(t, func() bool {
				var data []byte
				n.fsm.Read(func(v fsm.View) { data, _, _ = v.Tree.Get("/kept") })
				return string(data) == kind
			})
		})
	}
}

// failingMeta is raft-wal's metadata store with commits that fail once
// failing is set, as if the process stopped before each.
type failingMeta struct {
	types.MetaStore
	failing atomic.Bool
}

func (m *failingMeta) CommitState(s types.PersistentState) error {
	if m.failing.Load() {
		return errors.New("test: stopped before the commit")
	}
	return m.MetaStore.CommitState(s)
}

// TestWALFinishesRotationOnOpen: an append that fills a segment seals it,
// and raft-wal adds the next segment afterwards, in the background. If the
// process stops in between, the WAL must finish that on open: upstream
// raft-wal (v0.4.2) then failed every append with "segment is sealed"
// (rpc/third_party/raft-wal/FORK.md).
func TestWALFinishesRotationOnOpen(t *testing.T) {
	dir := t.TempDir()
	const size = 8 << 10
	meta := &failingMeta{MetaStore: &metadb.BoltMetaDB{}}
	if err := os.Mkdir(filepath.Join(dir, walDir), 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(filepath.Join(dir, walDir), wal.WithMetaStore(meta), wal.WithSegmentSize(size), wal.WithLogger(hclog.NewNullLogger()))
	if err != nil {
		t.Fatal(err)
	}
	meta.failing.Store(true)
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 1000)}
	}
	// Append until an append fails: the one after the sealing append,
	// which waits for the rotation, and its commit failed.
	var next uint64 = 1
	for ; next < 100; next++ {
		if err := w.StoreLog(entry(next)); err != nil {
			break
		}
	}
	if next == 1 || next == 100 {
		t.Fatalf("appending stopped at %d", next)
	}
	w.Close()

	s, err := openWALStore(dir, hclog.NewNullLogger(), walOptions{segmentSize: size})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(entry(next)); err != nil {
		t.Fatalf("append %d after reopening: %v", next, err)
	}
	s.Close()
	s, err = openWALStore(dir, hclog.NewNullLogger(), walOptions{segmentSize: size})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := uint64(1); i <= next; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, entry(i).Data) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
}

// TestWALOrphanOfTheFirstSegment: a segment's file is created before the
// metadata records it (rpc/third_party/raft-wal/FORK.md, part 6), so a
// process that stops in between leaves a file the metadata does not know.
// The next open, creating the log's first segment under the same id, must
// keep its new file: deleting it with the orphans lost every entry
// appended to it.
func TestWALOrphanOfTheFirstSegment(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, walDir)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	meta := &failingMeta{MetaStore: &metadb.BoltMetaDB{}}
	meta.failing.Store(true)
	if _, err := wal.Open(d, wal.WithMetaStore(meta), wal.WithLogger(hclog.NewNullLogger())); err == nil {
		t.Fatal("opened with a failing metadata commit")
	}
	meta.Close()
	if segs, _ := filepath.Glob(filepath.Join(d, "*.wal")); len(segs) != 1 {
		t.Fatalf("the failed open left %v", segs)
	}
	s, err := openWALStore(dir, hclog.NewNullLogger(), walOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(testLogs(1, 10)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = openWALStore(dir, hclog.NewNullLogger(), walOptions{})
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer s.Close()
	if last, err := s.LastIndex(); err != nil || last != 10 {
		t.Fatalf("the log ends at %d (%v), want 10", last, err)
	}
}

// TestWALHoldsTheLargestEntry: the WAL stores and reads back, after a
// restart too, the largest entry a server may write: a forwarded write of
// fsm.DataSizeCap bytes of data (peerMessageLimit). Upstream raft-wal wrote
// entries over 64 MiB but refused to read them back as corrupt
// (rpc/third_party/raft-wal/FORK.md).
func TestWALHoldsTheLargestEntry(t *testing.T) {
	dir := t.TempDir()
	s, err := openWALStore(dir, hclog.NewNullLogger(), walOptions{})
	if err != nil {
		t.Fatal(err)
	}
	big := &raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte("coordd"), peerMessageLimit/6+1)}
	if err := s.StoreLogs([]*raft.Log{big, {Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("after")}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = openWALStore(dir, hclog.NewNullLogger(), walOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var l raft.Log
	if err := s.GetLog(1, &l); err != nil || !bytes.Equal(l.Data, big.Data) {
		t.Fatalf("the %d-byte entry read back: %v", len(big.Data), err)
	}
	if err := s.GetLog(2, &l); err != nil || string(l.Data) != "after" {
		t.Fatalf("the entry after it: %q, %v", l.Data, err)
	}
}

// tornVFS is raft-wal's file system with writes that, once armed, write
// only the first half of what they are given and fail, as a disk that
// fills up or fails midway does.
type tornVFS struct {
	types.VFS
	armed *atomic.Bool
}

func (v tornVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	return tornFile{f, v.armed}, err
}

func (v tornVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	return tornFile{f, v.armed}, err
}

type tornFile struct {
	types.WritableFile
	armed *atomic.Bool
}

func (f tornFile) WriteAt(p []byte, off int64) (int, error) {
	if f.armed.Load() {
		n, _ := f.WritableFile.WriteAt(p[:len(p)/2], off)
		return n, errors.New("test: write failed midway")
	}
	return f.WritableFile.WriteAt(p, off)
}

// TestWALTornSeal: a tail truncation seals the tail segment by writing its
// index and a commit frame. When that write fails midway, the segment must
// stay open, in the process (a retried truncation writes a whole index)
// and after a restart (recovery must not take an index without its commit
// for a seal). Upstream raft-wal (v0.4.2) kept the failed seal in memory,
// so that the retry recorded the torn index, and took it on recovery too:
// entries then read back as corrupt (rpc/third_party/raft-wal/FORK.md).
func TestWALTornSeal(t *testing.T) {
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 100)}
	}
	check := func(s raftStore, last uint64) {
		t.Helper()
		if got, err := s.LastIndex(); err != nil || got != last {
			t.Fatalf("last index %d, %v; want %d", got, err, last)
		}
		for i := uint64(1); i <= last; i++ {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, entry(i).Data) {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
	}
	for _, retry := range []bool{true, false} {
		t.Run(fmt.Sprintf("retried=%v", retry), func(t *testing.T) {
			dir := t.TempDir()
			armed := new(atomic.Bool)
			s, err := openWALStore(dir, hclog.NewNullLogger(), walOptions{vfs: tornVFS{walfs.New(), armed}})
			if err != nil {
				t.Fatal(err)
			}
			var logs []*raft.Log
			for i := uint64(1); i <= 300; i++ {
				logs = append(logs, entry(i))
			}
			if err := s.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			if err := s.DeleteRange(251, 300); err == nil {
				t.Fatal("the truncation succeeded with its write failing")
			}
			armed.Store(false)
			if retry {
				// As a follower does when the leader sends the entries again.
				if err := s.DeleteRange(251, 300); err != nil {
					t.Fatal(err)
				}
				if err := s.StoreLog(entry(251)); err != nil {
					t.Fatal(err)
				}
				check(s, 251)
			}
			s.Close()
			s, err = openWALStore(dir, hclog.NewNullLogger(), walOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			last := uint64(300)
			if retry {
				last = 251
			}
			check(s, last)
			if err := s.StoreLog(entry(last + 1)); err != nil {
				t.Fatalf("append after reopening: %v", err)
			}
			check(s, last+1)
			// Once more, so that sealed segments are read from disk.
			s.Close()
			s, err = openWALStore(dir, hclog.NewNullLogger(), walOptions{})
			if err != nil {
				t.Fatal(err)
			}
			check(s, last+1)
		})
	}
}

// TestStoreWriteTime: both stores say how long their appends spent writing
// and syncing, which the log's fsync metric records.
func TestStoreWriteTime(t *testing.T) {
	for _, kind := range []string{RaftLogWAL, RaftLogBolt} {
		s, err := openRaftStore(t.TempDir(), kind, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		wt := storeWriteTime(s)
		if wt == nil {
			t.Fatalf("%s: no write time", kind)
		}
		before := wt()
		if err := s.StoreLogs(testLogs(1, 10)); err != nil {
			t.Fatal(err)
		}
		if after := wt(); after <= before {
			t.Errorf("%s: write time %v after an append, %v before", kind, after, before)
		}
		s.Close()
	}
}

// TestWALCompactedEntriesAreGone: entries a snapshot compacted away (the
// head of the log deleted) are no longer in the log, even while their bytes
// remain in a segment that still holds newer ones, in the tail segment and
// in a sealed one, and after a restart. Upstream raft-wal read them back
// from the segment, so a leader replayed every entry a restarted follower
// had missed, 140 000 of them in 5 s, instead of sending its snapshot
// (rpc/third_party/raft-wal/FORK.md).
func TestWALCompactedEntriesAreGone(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
	}{{"tail segment", 0}, {"sealed segment", 4 << 10}} {
		t.Run(c.name, func(t *testing.T) { testCompactedEntriesAreGone(t, walOptions{segmentSize: c.size}) })
	}
}

func testCompactedEntriesAreGone(t *testing.T, opts walOptions) {
	dir := t.TempDir()
	s, err := openWALStore(dir, hclog.NewNullLogger(), opts)
	if err != nil {
		t.Fatal(err)
	}
	// One entry per append, as a leader under a light load writes them, so
	// that small segments fill and are sealed along the way.
	for _, l := range testLogs(1, 100) {
		if err := s.StoreLogs([]*raft.Log{l}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		var l raft.Log
		for _, i := range []uint64{1, 30, 59} {
			if err := s.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("%s: entry %d, compacted away, read back: %v (index %d)", when, i, err, l.Index)
			}
		}
		for _, i := range []uint64{60, 100} {
			if err := s.GetLog(i, &l); err != nil || l.Index != i {
				t.Fatalf("%s: entry %d: index %d, %v", when, i, l.Index, err)
			}
		}
		if first, err := s.FirstIndex(); err != nil || first != 60 {
			t.Fatalf("%s: first index %d, %v", when, first, err)
		}
	}
	if err := s.DeleteRange(1, 59); err != nil {
		t.Fatal(err)
	}
	check("after the deletion")
	s.Close()
	if s, err = openWALStore(dir, hclog.NewNullLogger(), opts); err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	check("after a restart")
}
