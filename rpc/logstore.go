package rpc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"
)

// The Raft log stores a server can keep its log and stable store in
// (Config.RaftLog, coordd's --raft-log).
const (
	// RaftLogWAL is hashicorp/raft-wal: segment files appended and made
	// durable with one fsync per batch, in DataDir/wal, with its stable
	// store beside them (wal/wal-meta.db). The default for a new data dir.
	RaftLogWAL = "wal"
	// RaftLogBolt is hashicorp/raft-boltdb: one bbolt B+tree, DataDir/raft.db,
	// for log and stable store; a commit costs two fdatasyncs. Data dirs
	// made before coordd had the WAL hold this.
	RaftLogBolt = "bolt"
)

// DefaultRaftLog is the log store of a new data dir when Config.RaftLog is
// empty.
const DefaultRaftLog = RaftLogWAL

const (
	boltFile = "raft.db" // RaftLogBolt's file in the data dir
	walDir   = "wal"     // RaftLogWAL's directory in the data dir
)

// ErrRaftLogMismatch means the log store asked for is not the one the data
// dir holds. A server never converts a data dir from one to the other.
var ErrRaftLogMismatch = errors.New("rpc: data dir holds another raft log store")

// raftStore is a Raft log store and stable store in one, as both
// raft-boltdb and raft-wal are.
type raftStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// walSegmentSize is the size of one raft-wal segment file (raft-wal's
// default). A segment is preallocated at this size when it is created; an
// entry larger than what is left in it still goes in, and seals it.
const walSegmentSize = 64 << 20

// existingRaftLog reports which log store the data dir holds: "" if none.
// A dir with both is refused: no server makes one.
func existingRaftLog(dir string) (string, error) {
	has := func(name string) (bool, error) {
		_, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, os.ErrNotExist):
			return false, nil
		default:
			return false, fmt.Errorf("rpc: data dir: %w", err)
		}
	}
	bolt, err := has(boltFile)
	if err != nil {
		return "", err
	}
	w, err := has(walDir)
	if err != nil {
		return "", err
	}
	switch {
	case bolt && w:
		return "", fmt.Errorf("rpc: data dir %s holds both %s (raft-boltdb) and %s/ (raft-wal); coordd never makes both, so move the one not in use away", dir, boltFile, walDir)
	case bolt:
		return RaftLogBolt, nil
	case w:
		return RaftLogWAL, nil
	}
	return "", nil
}

// chooseRaftLog decides the log store for the data dir: the one it holds,
// else want, else DefaultRaftLog. A want that contradicts what the dir holds
// is refused with ErrRaftLogMismatch.
func chooseRaftLog(dir, want string) (string, error) {
	if err := checkRaftLog(want); err != nil {
		return "", err
	}
	have, err := existingRaftLog(dir)
	if err != nil {
		return "", err
	}
	switch {
	case have != "" && want != "" && have != want:
		return "", fmt.Errorf("%w: --raft-log %s, but %s holds a %s log (%s); start it with --raft-log %s or without the flag, or give this server a new, empty data dir",
			ErrRaftLogMismatch, want, dir, have, storeFile(have), have)
	case have != "":
		return have, nil
	case want != "":
		return want, nil
	}
	return DefaultRaftLog, nil
}

// checkRaftLog refuses a log store coordd does not know.
func checkRaftLog(kind string) error {
	switch kind {
	case "", RaftLogWAL, RaftLogBolt:
		return nil
	}
	return fmt.Errorf("rpc: unknown raft log store %q (%s or %s)", kind, RaftLogWAL, RaftLogBolt)
}

func storeFile(kind string) string {
	if kind == RaftLogBolt {
		return boltFile
	}
	return walDir + "/"
}

// openRaftStore opens the data dir's Raft log and stable store, of the kind
// chooseRaftLog decided.
//
// What it reads back is checked first (datadir.go): damage is
// ErrDataDirDamaged, naming the file.
func openRaftStore(dir, kind string, logger hclog.Logger) (raftStore, error) {
	switch kind {
	case RaftLogBolt:
		return openBoltStore(dir)
	case RaftLogWAL:
		return openWALStore(dir, logger, walOptions{})
	}
	return nil, fmt.Errorf("rpc: unknown raft log store %q", kind)
}

// openBoltStore opens raft.db in dir, its pages checked first
// (checkBoltFile) and its values by the store (the fork's checksums).
// Without the freelist on disk a commit writes one page fewer; bbolt
// rebuilds the freelist when it opens the file.
func openBoltStore(dir string) (*raftboltdb.BoltStore, error) {
	path := filepath.Join(dir, boltFile)
	if err := checkBoltFile(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	s, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true},
	})
	if err != nil {
		return nil, damaged(err)
	}
	return s, nil
}

// walOptions are what tests change in how the WAL is opened; the zero
// value is what a server uses.
type walOptions struct {
	segmentSize int       // 0: walSegmentSize
	vfs         types.VFS // nil: raft-wal's own (its package fs)
}

// walStore is the raft-wal store, with the time its segment writes and
// fsyncs took.
type walStore struct {
	*wal.WAL
	clock *syncClock
}

// storeWriteTime returns a function that reports the cumulative time s has
// spent writing appends to disk and syncing them (for the log's fsync
// metric), or nil if it does not say.
func storeWriteTime(s raftStore) func() time.Duration {
	switch s := s.(type) {
	case *raftboltdb.BoltStore:
		return boltWriteTime(s.Stats)
	case *walStore:
		return s.clock.total
	}
	return nil
}

// syncClock is a raft-wal file system that adds up the time its segment
// files spend in WriteAt and Sync: raft-wal writes a batch with one of
// each.
type syncClock struct {
	types.VFS
	ns atomic.Int64
}

func (c *syncClock) total() time.Duration { return time.Duration(c.ns.Load()) }

func (c *syncClock) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := c.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return clockedFile{f, c}, nil
}

func (c *syncClock) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := c.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return clockedFile{f, c}, nil
}

type clockedFile struct {
	types.WritableFile
	c *syncClock
}

func (f clockedFile) WriteAt(p []byte, off int64) (int, error) {
	start := time.Now()
	n, err := f.WritableFile.WriteAt(p, off)
	f.c.ns.Add(int64(time.Since(start)))
	return n, err
}

func (f clockedFile) Sync() error {
	start := time.Now()
	err := f.WritableFile.Sync()
	f.c.ns.Add(int64(time.Since(start)))
	return err
}

// openWALStore opens (or creates) the raft-wal log in dir/wal. Its stable
// store is raft-wal's own (wal-meta.db, bbolt), which also records the
// segments: the term and vote change only at elections, so they may cost a
// bbolt commit, and one file commits the log's shape and the vote together.
func openWALStore(dir string, logger hclog.Logger, o walOptions) (*walStore, error) {
	d := filepath.Join(dir, walDir)
	if err := os.MkdirAll(d, 0o750); err != nil {
		return nil, fmt.Errorf("rpc: raft log: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("rpc: raft log: %w", err)
	}
	if err := checkWALMeta(d); err != nil {
		return nil, err
	}
	size := walSegmentSize
	if o.segmentSize > 0 {
		size = o.segmentSize
	}
	var inner types.VFS = walfs.New()
	if o.vfs != nil {
		inner = o.vfs
	}
	clock := &syncClock{VFS: inner}
	var vfs types.VFS = clock
	w, err := wal.Open(d, wal.WithLogger(logger), wal.WithSegmentSize(size), wal.WithSegmentFiler(segment.NewFiler(d, vfs)))
	if err != nil {
		return nil, damaged(err)
	}
	if err := syncRecovered(d, vfs); err != nil {
		w.Close()
		return nil, fmt.Errorf("rpc: raft log: making the recovered log durable: %w", err)
	}
	// What it recovered is durable: a later open must recover as much.
	if err := w.RecordTail(); err != nil {
		w.Close()
		return nil, fmt.Errorf("rpc: raft log: %w", err)
	}
	return &walStore{WAL: w, clock: clock}, nil
}

// checkWALMeta checks wal-meta.db before raft-wal opens it: its pages
// (checkBoltFile), and that it is there at all when segments are: raft-wal
// would make a new, empty one, take the log for empty and delete every
// segment, and the server would forget its term and its vote.
func checkWALMeta(dir string) error {
	path := filepath.Join(dir, metadb.FileName)
	err := checkBoltFile(path)
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	segs, lerr := filepath.Glob(filepath.Join(dir, "*.wal"))
	if lerr != nil {
		return fmt.Errorf("rpc: raft log: %w", lerr)
	}
	if len(segs) > 0 {
		return fmt.Errorf("%w: %s is missing, and %d segment files are there (%s...): the log's shape, its term and its vote went with it",
			ErrDataDirDamaged, path, len(segs), filepath.Base(segs[0]))
	}
	return nil
}

// syncRecovered fsyncs every file of the WAL in dir. A process killed
// during an append leaves the batch's writes in the page cache, unsynced
// and unacknowledged, and the WAL's recovery, reading the files, takes them
// as part of the log. The server would then act on them (tell a leader it
// holds those entries, which counts them towards a commit), and a power
// failure afterwards could still lose them. So what recovery read is made
// durable before the store is used. TestWALCrash fails without it.
func syncRecovered(dir string, vfs types.VFS) error {
	names, err := vfs.ListDir(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".wal") {
			continue
		}
		f, err := vfs.OpenWriter(dir, name)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, metadb.FileName), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes a new entry in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
