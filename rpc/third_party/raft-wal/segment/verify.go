// Copyright (c) HashiCorp, Inc
// SPDX-License-Identifier: MPL-2.0

package segment

// coordd: verification at rest. Every batch an append writes ends with a
// commit frame holding the CRC-32C of the batch; upstream checks it only
// for the tail segment's last batch, when it opens. Here every batch of
// every segment is read back and checked when the WAL opens, before
// anything is served from it, and a segment that does not verify is
// refused with the file and the offset. Only in the tail segment may the
// end be torn (a batch whose write a crash cut short): see recoverTail and
// findIntactBatch for how that is told from damage.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/hashicorp/raft-wal/types"
)

// CorruptError says where a segment file is damaged. It wraps
// types.ErrCorrupt.
type CorruptError struct {
	// Path is the segment file; Offset where the damage was found.
	Path   string
	Offset int64
	// Reason says what is wrong there.
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: offset %d: %s", e.Path, e.Offset, e.Reason)
}

// Unwrap returns types.ErrCorrupt.
func (e *CorruptError) Unwrap() error { return types.ErrCorrupt }

// EntryCheck is called for every entry of a batch that verified, in log
// order, with the entry's index (by its place in the segment) and the
// first bytes of its encoding (up to entryHeadLen); an error refuses the
// segment.
type EntryCheck func(info types.SegmentInfo, index uint64, head []byte) error

// entryHeadLen is how many bytes of each entry an EntryCheck sees: room
// for two varints (an index and a term).
const entryHeadLen = 2 * binary.MaxVarintLen64

// scanBufSize is the read buffer of a scan.
const scanBufSize = 1 << 20

// stopReason says why a scan stopped before the end of the written data.
type stopReason int

const (
	stopNone      stopReason = iota // at a seal, or nothing stopped it
	stopZeros                       // a frame header of zeros: nothing written here
	stopBadHeader                   // a frame header that is not one
	stopBadCRC                      // a commit frame whose CRC does not match its batch
	stopEOF                         // the file ends inside a frame
)

// scanned is what a scan of a segment file found.
type scanned struct {
	// header is the file header if it parses, else nil.
	header *types.SegmentInfo
	// offsets are the entry frames of the batches that verified.
	offsets []uint32
	// heads are their first bytes, for the EntryCheck.
	heads [][]byte
	// end is where the batches that verified end (after the last one's
	// commit frame); 0 if none did.
	end int64
	// lastCommit is the offset of the last verified commit frame, -1 if
	// none.
	lastCommit int64
	// indexStart is the offset of the index array of a seal that verified
	// (its index frame and commit came in one batch), 0 if none; index is
	// that array.
	indexStart uint64
	index      []uint32

	// stop is where reading stopped, why and, for a bad CRC, where the
	// batch that failed began.
	stop       int64
	why        stopReason
	whyText    string
	batchStart int64
}

// scanSegment reads the segment file r from its start, frame by frame,
// checking each batch's CRC, until a seal that verifies, the end of the
// written data, or a frame or batch that is not right.
func scanSegment(r io.ReaderAt) (*scanned, error) {
	s := &scanned{lastCommit: -1}
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, 1<<62), scanBufSize)

	var hdr [fileHeaderLen]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		s.stop, s.why, s.whyText = 0, stopEOF, "the file ends inside its header"
		return s, nil
	}
	if h, err := readFileHeader(hdr[:]); err == nil {
		s.header = h
	}
	crc := crc32.Update(0, castagnoliTable, hdr[:])
	pos := int64(fileHeaderLen)
	batchStart := int64(0)
	var pendOffsets []uint32
	var pendHeads [][]byte
	pendIndex := int64(-1)
	var pendIndexArr []uint32
	buf := make([]byte, 64<<10)

	stop := func(at int64, why stopReason, text string) (*scanned, error) {
		s.stop, s.why, s.whyText, s.batchStart = at, why, text, batchStart
		return s, nil
	}
	for {
		var fhb [frameHeaderLen]byte
		if _, err := io.ReadFull(br, fhb[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return stop(pos, stopEOF, "the file ends")
			}
			return nil, err
		}
		fh, err := readFrameHeader(fhb[:])
		if err != nil {
			return stop(pos, stopBadHeader, "not a frame header")
		}
		if fh.typ == FrameInvalid {
			return stop(pos, stopZeros, "zeros where a frame header belongs")
		}
		switch fh.typ {
		case FrameEntry, FrameIndex:
			if fh.typ == FrameEntry && fh.len > MaxEntrySize {
				return stop(pos, stopBadHeader, fmt.Sprintf("an entry frame of %d bytes, more than any entry", fh.len))
			}
			if entries := len(s.offsets) + len(pendOffsets); fh.typ == FrameIndex && int64(fh.len) != 4*int64(entries) {
				return stop(pos, stopBadHeader, fmt.Sprintf("an index frame of %d bytes for the %d entries before it", fh.len, entries))
			}
			crc = crc32.Update(crc, castagnoliTable, fhb[:])
			n := int64(fh.len) + int64(padLen(int(fh.len)))
			var head []byte
			var whole []byte
			if fh.typ == FrameIndex {
				whole = make([]byte, n)
			}
			for done := int64(0); done < n; {
				chunk := buf
				if whole != nil {
					chunk = whole[done:]
				}
				k := n - done
				if int64(len(chunk)) < k {
					k = int64(len(chunk))
				}
				if _, err := io.ReadFull(br, chunk[:k]); err != nil {
					if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
						return stop(pos, stopEOF, "the file ends inside a frame")
					}
					return nil, err
				}
				if done == 0 && fh.typ == FrameEntry {
					h := k
					if int64(fh.len) < h {
						h = int64(fh.len)
					}
					if h > entryHeadLen {
						h = entryHeadLen
					}
					head = append([]byte(nil), chunk[:h]...)
				}
				crc = crc32.Update(crc, castagnoliTable, chunk[:k])
				done += k
			}
			if fh.typ == FrameEntry {
				pendOffsets = append(pendOffsets, uint32(pos))
				pendHeads = append(pendHeads, head)
			} else {
				pendIndex = pos
				pendIndexArr = make([]uint32, fh.len/4)
				for i := range pendIndexArr {
					pendIndexArr[i] = binary.LittleEndian.Uint32(whole[4*i:])
				}
			}
			pos += frameHeaderLen + n
		case FrameCommit:
			if crc != fh.crc {
				return stop(pos, stopBadCRC, fmt.Sprintf("the batch from offset %d does not match its CRC", batchStart))
			}
			s.offsets = append(s.offsets, pendOffsets...)
			s.heads = append(s.heads, pendHeads...)
			pendOffsets, pendHeads = nil, nil
			s.lastCommit = pos
			pos += frameHeaderLen
			s.end = pos
			batchStart = pos
			crc = 0
			if pendIndex >= 0 {
				// A seal that verified: nothing is written after it.
				s.indexStart = uint64(pendIndex) + frameHeaderLen
				s.index = pendIndexArr
				s.stop = pos
				return s, nil
			}
		}
	}
}

// maxRuns bounds how many batch starts findIntactBatch tries for each
// commit frame it finds: the last few commit frames before it (the nearest
// first), so that a commit-like word inside an entry's data does not hide
// the batch start before it.
const maxRuns = 8

// findIntactBatch looks in r, from offset from (where the damaged or torn
// batch begins) to the end of the file, for a batch that is intact: a
// commit frame whose CRC matches the bytes from a batch start to it. A
// batch start is from itself, restart (when >= 0), or the offset after any
// earlier commit frame. It returns the batch's start and its commit frame's
// offset.
//
// A crash can only cut short the last batch written, the one whose fsync
// had not returned: everything written after it was never written. So an
// intact batch after the stop means the damage lies in batches already
// made durable and acknowledged, and the segment must be refused, not cut.
// Bytes left behind by an append that failed and was written over by a
// shorter one never form an intact batch: their batch's start was written
// over.
func findIntactBatch(r io.ReaderAt, from, restart int64) (start, commit int64, ok bool, err error) {
	type run struct {
		start int64
		crc   uint32
	}
	var runs []run
	add := func(at int64) {
		runs = append(runs, run{start: at})
		if len(runs) > maxRuns {
			runs = runs[1:]
		}
	}
	update := func(b []byte) {
		for i := range runs {
			runs[i].crc = crc32.Update(runs[i].crc, castagnoliTable, b)
		}
	}
	add(from)
	buf := make([]byte, scanBufSize)
	pos := from // the file offset of buf[0]; from is 8-aligned
	for {
		n, rerr := r.ReadAt(buf, pos)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, 0, false, rerr
		}
		chunk := buf[:n&^(frameHeaderLen-1)]
		last := 0
		// restartBefore starts the run at restart once the walk reaches
		// offset i of the chunk.
		restartBefore := func(i int) {
			if restart > from && restart >= pos+int64(last) && restart <= pos+int64(i) {
				k := int(restart - pos)
				update(chunk[last:k])
				last = k
				add(restart)
				restart = -1
			}
		}
		for i := 0; i+frameHeaderLen <= len(chunk); i += frameHeaderLen {
			// Skip to the next byte that may start a commit frame.
			j := bytes.IndexByte(chunk[i:], FrameCommit)
			if j < 0 {
				break
			}
			i += j &^ (frameHeaderLen - 1)
			if j&(frameHeaderLen-1) != 0 || i+frameHeaderLen > len(chunk) {
				continue
			}
			at := pos + int64(i)
			if chunk[i+1] != 0 || chunk[i+2] != 0 || chunk[i+3] != 0 {
				continue
			}
			restartBefore(i)
			update(chunk[last:i])
			last = i
			want := binary.LittleEndian.Uint32(chunk[i+4 : i+8])
			for j := len(runs) - 1; j >= 0; j-- {
				if runs[j].start < at && runs[j].crc == want {
					return runs[j].start, at, true, nil
				}
			}
			update(chunk[i : i+frameHeaderLen])
			last = i + frameHeaderLen
			add(at + frameHeaderLen)
		}
		restartBefore(len(chunk))
		update(chunk[last:])
		pos += int64(len(chunk))
		if rerr != nil || n < len(buf) {
			return 0, 0, false, nil
		}
	}
}

// checkEntries passes every entry of s to check (the first is
// info.BaseIndex), and turns its refusal into a CorruptError at the entry.
func checkEntries(path string, info types.SegmentInfo, s *scanned, check EntryCheck) error {
	if check == nil {
		return nil
	}
	for i, h := range s.heads {
		if err := check(info, info.BaseIndex+uint64(i), h); err != nil {
			return &CorruptError{Path: path, Offset: int64(s.offsets[i]), Reason: err.Error()}
		}
	}
	return nil
}

// readsAt reports whether r holds a byte at offset off.
func readsAt(r io.ReaderAt, off int64) (bool, error) {
	var b [1]byte
	n, err := r.ReadAt(b[:], off)
	if n == 1 {
		return true, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return false, nil
	}
	return false, err
}

// verifySealed checks a sealed segment whole: its size, its header
// against info, every batch's CRC, the seal's index against the entries
// found and the metadata, and each entry in MinIndex..MaxIndex (check).
func verifySealed(path string, info types.SegmentInfo, r io.ReaderAt, check EntryCheck) error {
	corrupt := func(at int64, format string, args ...any) error {
		return &CorruptError{Path: path, Offset: at, Reason: fmt.Sprintf(format, args...)}
	}
	if err := checkSize(path, info, r); err != nil {
		return err
	}
	s, err := scanSegment(r)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if s.header == nil {
		return corrupt(0, "the file header is damaged")
	}
	if err := validateFileHeader(*s.header, info); err != nil {
		return corrupt(0, "%v", err)
	}
	if s.indexStart == 0 {
		return corrupt(s.stop, "%s, before the seal the metadata records (sealed segment)", s.whyText)
	}
	if s.indexStart != info.IndexStart {
		return corrupt(int64(s.indexStart)-frameHeaderLen, "the seal's index is at offset %d, the metadata says %d", s.indexStart, info.IndexStart)
	}
	if len(s.index) != len(s.offsets) {
		return corrupt(int64(s.indexStart)-frameHeaderLen, "the seal's index lists %d entries, the segment holds %d", len(s.index), len(s.offsets))
	}
	for i := range s.index {
		if s.index[i] != s.offsets[i] {
			return corrupt(int64(s.indexStart)+4*int64(i), "the seal's index puts entry %d at offset %d, it is at %d", info.BaseIndex+uint64(i), s.index[i], s.offsets[i])
		}
	}
	if n := uint64(len(s.offsets)); info.MaxIndex < info.BaseIndex || info.MaxIndex-info.BaseIndex >= n || info.MinIndex < info.BaseIndex {
		return corrupt(int64(s.indexStart)-frameHeaderLen, "the segment holds entries %d..%d, the metadata says %d..%d", info.BaseIndex, info.BaseIndex+n-1, info.MinIndex, info.MaxIndex)
	}
	return checkEntries(path, info, s, check)
}

// checkSize refuses a segment file shorter than its size limit: segment
// files are created at that size (preallocated), and grow only, so a
// shorter one was cut.
func checkSize(path string, info types.SegmentInfo, r io.ReaderAt) error {
	if info.SizeLimit == 0 {
		return nil
	}
	ok, err := readsAt(r, int64(info.SizeLimit)-1)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !ok {
		return &CorruptError{Path: path, Offset: int64(info.SizeLimit), Reason: fmt.Sprintf("the file is shorter than the %d bytes it was created with: truncated", info.SizeLimit)}
	}
	return nil
}
