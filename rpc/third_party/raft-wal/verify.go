// Copyright (c) HashiCorp, Inc
// SPDX-License-Identifier: MPL-2.0

package wal

// coordd: checks of the log's shape when the WAL opens, beside the
// segments' own (segment/verify.go).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"

	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// tailRecordKey is the stable store's key of the tail record: the tail
// segment's id and the offset its committed batches reach (16 bytes,
// little-endian), as of the last RecordTail or clean Close.
//
// An append is made durable by its own fsync and by nothing else, so, in
// the tail segment, damage to the last batches written cannot be told from
// the torn write a crash leaves (segment.recoverTail drops what follows the
// last batch that verifies, when no intact batch comes after it). The
// record tells them apart for everything written before it: recovery must
// reach at least that far, or the segment is refused.
var tailRecordKey = []byte("coordd.tail")

// checkSegments refuses metadata that does not describe one log without
// gaps: segment ids unique and below the next id, only the last segment
// unsealed, each segment starting where the one before it ends (the first
// may start later, MinIndex, after compaction), and no sealed segment
// ending before it starts.
func checkSegments(p types.PersistentState) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, "wal-meta.db", fmt.Sprintf(format, args...))
	}
	seen := map[uint64]bool{}
	for i, si := range p.Segments {
		name := segment.FileName(si)
		if seen[si.ID] || (p.NextSegmentID != 0 && si.ID >= p.NextSegmentID) {
			return bad("segment %s: its id is used twice or not below the next id %d", name, p.NextSegmentID)
		}
		seen[si.ID] = true
		if si.BaseIndex == 0 || si.MinIndex < si.BaseIndex {
			return bad("segment %s: first index %d, base index %d", name, si.MinIndex, si.BaseIndex)
		}
		if i > 0 && si.MinIndex != si.BaseIndex {
			return bad("segment %s: only the first segment may start after its base index (%d, not %d)", name, si.MinIndex, si.BaseIndex)
		}
		if si.SealTime.IsZero() {
			if i != len(p.Segments)-1 {
				return bad("segment %s: unsealed, but not the last", name)
			}
			continue
		}
		if si.IndexStart == 0 || si.MaxIndex+1 < si.MinIndex {
			return bad("segment %s: sealed, with entries %d..%d and its index at offset %d", name, si.MinIndex, si.MaxIndex, si.IndexStart)
		}
		if i+1 < len(p.Segments) {
			if next := p.Segments[i+1]; next.BaseIndex != si.MaxIndex+1 {
				return bad("segment %s ends at entry %d, the next (%s) starts at %d", name, si.MaxIndex, segment.FileName(next), next.BaseIndex)
			}
		}
	}
	return nil
}

// entryCheck returns a segment.EntryCheck for the WAL's BinaryCodec: each
// entry the log holds (from the first segment's MinIndex, up to each sealed
// segment's MaxIndex) must encode its own index, follow the entry before
// it, and have a term no lower than that entry's. The codec writes the
// index and the term first, as varints.
func entryCheck() segment.EntryCheck {
	var lastIndex, lastTerm uint64
	return func(info types.SegmentInfo, index uint64, head []byte) error {
		if index < info.MinIndex || (!info.SealTime.IsZero() && index > info.MaxIndex) {
			return nil // compacted away, or cut off by a tail truncation
		}
		idx, n := binary.Uvarint(head)
		if n <= 0 {
			return fmt.Errorf("entry %d does not decode", index)
		}
		term, m := binary.Uvarint(head[n:])
		if m <= 0 {
			return fmt.Errorf("entry %d does not decode", index)
		}
		switch {
		case idx != index:
			return fmt.Errorf("entry %d holds index %d", index, idx)
		case lastIndex != 0 && index != lastIndex+1:
			return fmt.Errorf("entry %d follows entry %d", index, lastIndex)
		case term < lastTerm:
			return fmt.Errorf("entry %d has term %d, after an entry of term %d", index, term, lastTerm)
		}
		lastIndex, lastTerm = index, term
		return nil
	}
}

// committer is a segment writer that says where its committed batches end.
type committer interface {
	CommittedOffset() uint64
}

// RecordTail records how far the tail segment's committed batches reach
// (tailRecordKey), so that a later Open refuses a tail that recovers less.
// Call it once what Open recovered is durable; Close calls it too.
func (w *WAL) RecordTail() error {
	if err := w.checkClosed(); err != nil {
		return err
	}
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	w.awaitRotationLocked()
	return w.recordTailLocked()
}

func (w *WAL) recordTailLocked() error {
	s := w.loadState()
	info := s.getTailInfo()
	c, ok := s.tail.(committer)
	if info == nil || !ok {
		return nil
	}
	v := binary.LittleEndian.AppendUint64(nil, info.ID)
	v = binary.LittleEndian.AppendUint64(v, c.CommittedOffset())
	if old, err := w.metaDB.GetStable(tailRecordKey); err == nil && bytes.Equal(old, v) {
		return nil // as recorded: nothing to write
	}
	return w.metaDB.SetStable(tailRecordKey, v)
}

// checkTailRecord refuses a recovered tail si that reaches less far than
// the tail record says it did.
func (w *WAL) checkTailRecord(si types.SegmentInfo, sw types.SegmentWriter) error {
	v, err := w.metaDB.GetStable(tailRecordKey)
	if err != nil || v == nil {
		return err
	}
	c, ok := sw.(committer)
	if len(v) != 16 {
		return fmt.Errorf("%w: wal-meta.db: the tail record is %d bytes", ErrCorrupt, len(v))
	}
	id, off := binary.LittleEndian.Uint64(v), binary.LittleEndian.Uint64(v[8:])
	if !ok || id != si.ID || c.CommittedOffset() >= off {
		return nil
	}
	return &segment.CorruptError{Path: filepath.Join(w.dir, segment.FileName(si)), Offset: int64(c.CommittedOffset()), Reason: fmt.Sprintf(
		"its batches verify only up to here, but they reached offset %d when the WAL last opened or closed: entries already written are damaged", off)}
}
