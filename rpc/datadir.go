package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/hashicorp/raft-wal/types"
)

// Nothing read back from disk is trusted unverified (DESIGN.md): before
// Raft reads a byte of the data dir, the server checks what it holds, and
// a server that finds damage it cannot prove harmless refuses to start,
// naming the file (and the offset where there is one), rather than serve
// or vote with it. This file holds what ties the data dir's parts
// together: its record of what it must hold, and the checks across the
// log, the stable store and the snapshots. Each store checks its own
// bytes: raft-wal every batch's CRC and every entry's index and term, the
// bolt stores each value's checksum (rpc/third_party/*/FORK.md),
// checkBoltFile bbolt's pages, checkSnapshots the snapshots.

// ErrDataDirDamaged means the data dir holds damage the server cannot
// prove harmless: a checksum that does not match, a file cut short, a file
// missing that it must hold, entries that do not follow each other. The
// message names the file, and the offset where there is one. The server
// refuses to start: rebuild it from the others (docs/operations.md,
// "A server that refuses its data dir").
var ErrDataDirDamaged = errors.New("rpc: data dir damaged")

// Damage found while the server runs is not yet turned into a clean stop:
// raft-boltdb checks each value's trailer on every GetLog and returns
// ErrCorrupt, and hashicorp/raft's processLogs panics on any GetLog error,
// so the server still stops without applying the entry, but with a panic's
// stack rather than through the Node's halt (issue 37, part 2).

// damaged wraps a store's own corruption error in ErrDataDirDamaged; other
// errors are returned as they are.
func damaged(err error) error {
	if err == nil || errors.Is(err, ErrDataDirDamaged) {
		return err
	}
	if errors.Is(err, types.ErrCorrupt) || errors.Is(err, raftboltdb.ErrCorrupt) || errors.Is(err, raft.ErrSnapshotCorrupt) {
		return fmt.Errorf("%w: %w", ErrDataDirDamaged, err)
	}
	return err
}

// recordFile is the data dir's record of what it holds (dataRecord).
const recordFile = "storage"

// dataRecord is what a data dir records it must hold, so that a part
// deleted whole is noticed: the Raft log store (which is created once) and
// the newest snapshot taken or installed. Without it, a dir whose wal/ or
// raft.db is gone looks new (the server would forget its term and vote),
// and one whose newest snapshot is gone, after that snapshot replaced the
// log, looks as if it never had those entries. It is rewritten, atomically,
// when either changes; it has a CRC-32C of its own.
type dataRecord struct {
	// Log is the log store, RaftLogWAL or RaftLogBolt; "" while there is
	// none (a restore writes only a snapshot).
	Log string
	// Snapshot is the newest snapshot's id ("term-index-msec"); "" if none.
	Snapshot string
}

const recordHeader = "coordd data dir record 1\n"

func (r dataRecord) encode() []byte {
	b := []byte(recordHeader)
	b = fmt.Appendf(b, "log %s\nsnapshot %s\n", orDash(r.Log), orDash(r.Snapshot))
	return fmt.Appendf(b, "crc32c %08x\n", crc32.Checksum(b, castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// readDataRecord reads dir's record: nil if it has none (a new dir, or one
// made before the record).
func readDataRecord(dir string) (*dataRecord, error) {
	path := filepath.Join(dir, recordFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rpc: %w", err)
	}
	bad := func(why string) error { return fmt.Errorf("%w: %s: %s", ErrDataDirDamaged, path, why) }
	at := bytes.LastIndex(b, []byte("crc32c "))
	if at < 0 || !bytes.HasPrefix(b, []byte(recordHeader)) || !bytes.HasSuffix(b, []byte("\n")) {
		return nil, bad("not a data dir record")
	}
	sum, err := strconv.ParseUint(strings.TrimSpace(string(b[at+len("crc32c "):])), 16, 32)
	if err != nil || uint32(sum) != crc32.Checksum(b[:at], castagnoli) {
		return nil, bad("it does not match its checksum")
	}
	var r dataRecord
	for _, line := range strings.Split(strings.TrimSuffix(string(b[len(recordHeader):at]), "\n"), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if v == "-" {
			v = ""
		}
		switch {
		case ok && k == "log" && (v == "" || v == RaftLogWAL || v == RaftLogBolt):
			r.Log = v
		case ok && k == "snapshot":
			if _, _, err := parseSnapshotID(v); v != "" && err != nil {
				return nil, bad(err.Error())
			}
			r.Snapshot = v
		default:
			return nil, bad(fmt.Sprintf("line %q", line))
		}
	}
	return &r, nil
}

// writeDataRecord replaces dir's record with r, atomically and durably.
func writeDataRecord(dir string, r dataRecord) error {
	path := filepath.Join(dir, recordFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("rpc: %w", err)
	}
	_, err = f.Write(r.encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("rpc: writing %s: %w", path, err)
	}
	return nil
}

// parseSnapshotID returns the term and index a snapshot's id names.
func parseSnapshotID(id string) (term, index uint64, err error) {
	parts := strings.Split(id, "-")
	if len(parts) == 3 {
		term, err = strconv.ParseUint(parts[0], 10, 64)
		if err == nil {
			index, err = strconv.ParseUint(parts[1], 10, 64)
		}
		if err == nil {
			_, err = strconv.ParseInt(parts[2], 10, 64)
		}
		if err == nil {
			return term, index, nil
		}
	}
	return 0, 0, fmt.Errorf("%q is not a snapshot's name", id)
}

// checkRecordedLog refuses a data dir whose record names a log store it
// does not hold (have: existingRaftLog's answer).
func checkRecordedLog(dir string, rec *dataRecord, have string) error {
	if rec == nil || rec.Log == "" || rec.Log == have {
		return nil
	}
	if have == "" {
		return fmt.Errorf("%w: %s records a %s log (%s), and the data dir holds none: it was deleted, and with it the entries and the vote this server had",
			ErrDataDirDamaged, filepath.Join(dir, recordFile), rec.Log, storeFile(rec.Log))
	}
	return fmt.Errorf("%w: %s records a %s log (%s), but the data dir holds a %s log (%s)",
		ErrDataDirDamaged, filepath.Join(dir, recordFile), rec.Log, storeFile(rec.Log), have, storeFile(have))
}

// Raft's stable store keys (hashicorp/raft's raft.go).
var (
	keyCurrentTerm  = []byte("CurrentTerm")
	keyLastVoteTerm = []byte("LastVoteTerm")
)

// stableUint64 reads a uint64 of the stable store; a key never set is 0
// (raft-wal says 0, raft-boltdb ErrKeyNotFound).
func stableUint64(s raftStore, key []byte) (uint64, error) {
	v, err := s.GetUint64(key)
	if errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return 0, nil
	}
	return v, err
}

// checkTerms refuses a stable store that contradicts the log or the
// snapshot: Raft makes its current term durable before it votes in a term,
// appends an entry of a term, or installs a snapshot of one, so none of
// those may be of a later term than the current one. (A restored data dir
// is the exception: its snapshot, of term 1, comes before any term.)
func checkTerms(dir string, s raftStore, snap *raft.SnapshotMeta) error {
	cur, err := stableUint64(s, keyCurrentTerm)
	if err != nil {
		return damaged(err)
	}
	voted, err := stableUint64(s, keyLastVoteTerm)
	if err != nil {
		return damaged(err)
	}
	where := filepath.Join(dir, storeFile(kindOf(s)))
	if voted > cur {
		return fmt.Errorf("%w: %s: the stable store says this server voted in term %d, after its current term %d", ErrDataDirDamaged, where, voted, cur)
	}
	last, err := s.LastIndex()
	if err != nil {
		return damaged(err)
	}
	if last > 0 {
		var l raft.Log
		if err := s.GetLog(last, &l); err != nil {
			return damaged(err)
		}
		if l.Term > cur {
			return fmt.Errorf("%w: %s: the last entry (%d) is of term %d, after the current term %d the stable store holds", ErrDataDirDamaged, where, last, l.Term, cur)
		}
	}
	if snap != nil && cur != 0 && snap.Term > cur {
		return fmt.Errorf("%w: %s: the snapshot %s is of term %d, after the current term %d the stable store holds", ErrDataDirDamaged, where, snap.ID, snap.Term, cur)
	}
	return nil
}

// kindOf says which log store s is.
func kindOf(s raftStore) string {
	if _, ok := s.(*raftboltdb.BoltStore); ok {
		return RaftLogBolt
	}
	return RaftLogWAL
}

// prepareDataDir decides the data dir's log store (chooseRaftLog) and
// reads its record, refusing a dir whose record names a store it does not
// hold. It changes nothing.
func prepareDataDir(dir, want string) (string, *dataRecord, error) {
	kind, err := chooseRaftLog(dir, want)
	if err != nil {
		return "", nil, err
	}
	rec, err := readDataRecord(dir)
	if err != nil {
		return "", nil, err
	}
	have, err := existingRaftLog(dir)
	if err != nil {
		return "", nil, err
	}
	return kind, rec, checkRecordedLog(dir, rec, have)
}

// openStorage opens the data dir's log store and snapshot store and checks
// them across their parts before Raft reads them: which snapshot Raft may
// restore (checkSnapshots), the log continuing from it, the stable store's
// terms (checkTerms); then records what the dir holds. It returns the
// store, and the snapshot store Raft is to use. wo is how a WAL is opened
// (its zero value: as a server does).
func openStorage(dir, kind string, rec *dataRecord, hl hclog.Logger, log *slog.Logger, wo walOptions) (_ raftStore, _ *checkedSnapshots, err error) {
	var store raftStore
	if kind == RaftLogWAL {
		store, err = openWALStore(dir, hl.Named("wal"), wo)
	} else {
		store, err = openRaftStore(dir, kind, hl.Named("wal"))
	}
	if errors.Is(err, ErrDataDirDamaged) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, fmt.Errorf("rpc: opening raft store (%s) in %s: %w", kind, dir, err)
	}
	defer func() {
		if err != nil {
			store.Close()
		}
	}()
	files, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hl.Named("snapshot"))
	if err != nil {
		return nil, nil, fmt.Errorf("rpc: snapshot store: %w", err)
	}
	first, err := store.FirstIndex()
	if err != nil {
		return nil, nil, damaged(err)
	}
	last, err := store.LastIndex()
	if err != nil {
		return nil, nil, damaged(err)
	}
	ch, err := checkSnapshots(dir, files, first, last, rec, log)
	if err != nil {
		return nil, nil, damaged(err)
	}
	if err := checkTerms(dir, store, ch.chosen); err != nil {
		return nil, nil, err
	}
	next := dataRecord{Log: kind}
	if rec != nil {
		next.Snapshot = rec.Snapshot
	}
	if next.Snapshot == "" && ch.chosen != nil {
		next.Snapshot = ch.chosen.ID
	}
	if rec == nil || *rec != next {
		if err := writeDataRecord(dir, next); err != nil {
			return nil, nil, err
		}
	}
	removeUnfinishedSnapshots(dir, log)
	return store, &checkedSnapshots{SnapshotStore: files, dir: dir, hidden: ch.hidden, rec: next}, nil
}
