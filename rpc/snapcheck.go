package rpc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
)

// This file checks the data dir's snapshots before Raft restores one, and
// is the snapshot store as Raft then sees it.
//
// hashicorp/raft's file snapshot store checks a snapshot's state.bin
// against the CRC-64 in its meta.json when it opens it, but a meta.json
// that does not parse is skipped without a word, and Raft falls back from
// a snapshot it cannot restore to the next older one, whatever the log
// holds: an older snapshot and a log that starts after it make a state
// machine that never applies the entries in between. So, before Raft
// starts, checkSnapshots verifies the newest snapshot whole (its meta.json
// against its own checksum and its directory's name, its state.bin's size
// and CRC: the raft fork's FORK.md), and Raft is shown that one only. If
// it is damaged, an older intact one is used only where that provably
// loses nothing: when the log holds every entry from just after the older
// snapshot through the damaged one's last. Otherwise the start is refused.

// snapshotsDir is hashicorp/raft's FileSnapshotStore's directory in the
// data dir.
const snapshotsDir = "snapshots"

// snapshotChoice is what checkSnapshots decided.
type snapshotChoice struct {
	// chosen is the snapshot Raft restores, nil for none.
	chosen *raft.SnapshotMeta
	// hidden are the snapshots Raft is not shown: every other one there
	// was when the server started.
	hidden map[string]bool
	// damaged says what was wrong with a newer one that was passed over.
	damaged []string
}

// snapDir is one snapshot directory.
type snapDir struct {
	id          string
	term, index uint64
}

// listSnapshotDirs returns the snapshot directories of dir, newest first
// (as hashicorp/raft orders them: term, index, id). A directory that is not
// named as a snapshot is damage: nothing else is made there.
func listSnapshotDirs(dir string) ([]snapDir, error) {
	root := filepath.Join(dir, snapshotsDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rpc: %w", err)
	}
	var out []snapDir
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue // permTest, and snapshots a crash left unfinished
		}
		term, index, err := parseSnapshotID(e.Name())
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrDataDirDamaged, filepath.Join(root, e.Name()), err)
		}
		out = append(out, snapDir{id: e.Name(), term: term, index: index})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.term != b.term {
			return a.term > b.term
		}
		if a.index != b.index {
			return a.index > b.index
		}
		return a.id > b.id
	})
	return out, nil
}

// verifySnapshot reads snapshot id whole, as Raft will: its metadata
// checked, its state against its CRC.
func verifySnapshot(store raft.SnapshotStore, id string) (*raft.SnapshotMeta, error) {
	meta, rc, err := store.Open(id)
	if err != nil {
		return nil, err
	}
	rc.Close()
	return meta, nil
}

// removeUnfinishedSnapshots removes the snapshots a crash left unfinished
// (snapshots/*.tmp: the file snapshot store writes a snapshot there and
// renames it when it is whole). Nothing reads them, and they hold space,
// up to a snapshot's size each, for good: a server whose disk filled up
// should not keep what it cannot use. Called once the data dir is checked
// (a refused start changes nothing); what it cannot remove it leaves, and
// says so.
func removeUnfinishedSnapshots(dir string, log *slog.Logger) {
	tmps, err := filepath.Glob(filepath.Join(dir, snapshotsDir, "*.tmp"))
	if err != nil {
		return
	}
	for _, p := range tmps {
		if err := os.RemoveAll(p); err != nil {
			log.Warn("an unfinished snapshot could not be removed", "path", p, "err", err)
			continue
		}
		log.Info("removed a snapshot a crash left unfinished", "path", p)
	}
}

// checkSnapshots decides which snapshot Raft restores (see above). first
// and last are the log's bounds (0, 0: empty); rec is the data dir's
// record (nil: none), whose snapshot must not be lost either.
func checkSnapshots(dir string, store raft.SnapshotStore, first, last uint64, rec *dataRecord, log *slog.Logger) (*snapshotChoice, error) {
	dirs, err := listSnapshotDirs(dir)
	if err != nil {
		return nil, err
	}
	ch := &snapshotChoice{hidden: map[string]bool{}}
	for _, d := range dirs {
		ch.hidden[d.id] = true
	}
	var newest *snapDir
	if len(dirs) > 0 {
		newest = &dirs[0]
	}
	for i, d := range dirs {
		meta, err := verifySnapshot(store, d.id)
		if err != nil {
			ch.damaged = append(ch.damaged, fmt.Sprintf("snapshot %s: %v", d.id, err))
			continue
		}
		if i > 0 && !(first > 0 && first <= meta.Index+1 && last >= newest.index) {
			return nil, fmt.Errorf("%w: %s; the older snapshot %s is intact, but the log (entries %d..%d) does not hold every entry from %d to %d, so falling back to it would lose entries",
				ErrDataDirDamaged, strings.Join(ch.damaged, "; "), d.id, first, last, meta.Index+1, newest.index)
		}
		ch.chosen = meta
		delete(ch.hidden, d.id)
		break
	}
	if ch.chosen == nil && len(ch.damaged) > 0 {
		// Every snapshot is damaged: the log alone must hold everything.
		if !(first == 1 && last >= newest.index) {
			return nil, fmt.Errorf("%w: %s", ErrDataDirDamaged, strings.Join(ch.damaged, "; "))
		}
	}
	if len(ch.damaged) > 0 {
		log.Warn("a damaged snapshot is passed over: the log holds every entry it held", "damaged", strings.Join(ch.damaged, "; "), "using", idOf(ch.chosen))
	}

	at := uint64(0)
	if ch.chosen != nil {
		at = ch.chosen.Index
	}
	if rec != nil && rec.Snapshot != "" {
		_, want, _ := parseSnapshotID(rec.Snapshot)
		if want > at && !(first > 0 && first <= at+1 && last >= want) {
			return nil, fmt.Errorf("%w: %s records snapshot %s, which is %s, and the log (entries %d..%d) does not hold its entries",
				ErrDataDirDamaged, filepath.Join(dir, recordFile), rec.Snapshot, missingOrDamaged(dir, rec.Snapshot), first, last)
		}
	}
	if first > at+1 {
		what := "no snapshot"
		if ch.chosen != nil {
			what = "the newest snapshot, " + ch.chosen.ID + ","
		}
		return nil, fmt.Errorf("%w: %s: the log starts at entry %d, and %s ends at %d: entries %d..%d are missing (a snapshot or a segment deleted)",
			ErrDataDirDamaged, dir, first, what, at, at+1, first-1)
	}
	return ch, nil
}

func idOf(m *raft.SnapshotMeta) string {
	if m == nil {
		return "none"
	}
	return m.ID
}

func missingOrDamaged(dir, id string) string {
	if _, err := os.Stat(filepath.Join(dir, snapshotsDir, id)); errors.Is(err, os.ErrNotExist) {
		return "missing"
	}
	return "damaged"
}

// checkedSnapshots is the snapshot store as Raft sees it: the snapshots
// checkSnapshots hid are not listed, and every snapshot made is written to
// the data dir's record once it is whole.
type checkedSnapshots struct {
	raft.SnapshotStore
	dir    string
	hidden map[string]bool

	mu  sync.Mutex // serializes record writes
	rec dataRecord
}

// List lists the snapshots, but those hidden.
func (s *checkedSnapshots) List() ([]*raft.SnapshotMeta, error) {
	all, err := s.SnapshotStore.List()
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, m := range all {
		if !s.hidden[m.ID] {
			out = append(out, m)
		}
	}
	return out, nil
}

// Open opens a snapshot, unless it is hidden.
func (s *checkedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if s.hidden[id] {
		return nil, nil, fmt.Errorf("rpc: snapshot %s was passed over at the start", id)
	}
	return s.SnapshotStore.Open(id)
}

// Create starts a snapshot whose completion is recorded.
func (s *checkedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, cf raft.Configuration, cfIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, cf, cfIndex, trans)
	if err != nil {
		return nil, err
	}
	return &recordedSink{SnapshotSink: sink, s: s}, nil
}

// recordedSink writes the data dir's record when its snapshot is whole:
// from then on, the data dir must hold it (or a newer one).
type recordedSink struct {
	raft.SnapshotSink
	s *checkedSnapshots
}

func (r *recordedSink) Close() error {
	if err := r.SnapshotSink.Close(); err != nil {
		return err
	}
	return r.s.record(r.ID())
}

// record makes id the record's snapshot, unless a newer one is there.
func (s *checkedSnapshots) record(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	term, index, err := parseSnapshotID(id)
	if err != nil {
		return err
	}
	if s.rec.Snapshot != "" {
		if t, i, err := parseSnapshotID(s.rec.Snapshot); err == nil && (t > term || (t == term && i > index)) {
			return nil
		}
	}
	next := s.rec
	next.Snapshot = id
	if err := writeDataRecord(s.dir, next); err != nil {
		return err
	}
	s.rec = next
	return nil
}
