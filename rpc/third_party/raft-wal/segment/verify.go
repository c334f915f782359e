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
	"sync"

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

// findIntactBatch looks in r, from offset from (where the damaged or torn
// batch begins) to the end of the written data, for a batch that is
// intact: a chain of frames from some 8-aligned offset to a commit frame
// whose CRC matches the bytes from that offset to it. It returns the
// batch's start and its commit frame's offset.
//
// A crash can only cut short the last batch written, the one whose fsync
// had not returned: everything written after it was never written. So an
// intact batch after the stop means the damage lies in batches already
// made durable and acknowledged, and the segment must be refused, not cut.
// Bytes left behind by an append that failed and was written over by a
// shorter one never form an intact batch: their batch's start was written
// over.
//
// Every 8-aligned offset is tried as a batch start, so that a batch is
// found after damage that took the commit frame before it too; words in
// entries' data that look like frame headers start chains as well, and
// those that reach a commit frame fail its CRC, having started in the
// wrong place. Each chain is followed once (end, computed backwards), and
// each start's CRC comes from running CRCs by crcShift, so the search is
// linear in the written data. In the common case, a clean or torn tail
// followed by the preallocated zeros, there is nothing after the stop but
// those zeros, and the search reads them and ends.
func findIntactBatch(r io.ReaderAt, from int64) (start, commit int64, ok bool, err error) {
	// Where the written data ends: the last word that is not zero.
	dataEnd := from
	buf := make([]byte, scanBufSize)
	var zeros [4096]byte
	for pos := from; ; {
		n, rerr := r.ReadAt(buf, pos)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, 0, false, rerr
		}
		chunk := buf[:n&^(frameHeaderLen-1)]
		for pg := 0; pg < len(chunk); pg += len(zeros) {
			page := chunk[pg:]
			if len(page) > len(zeros) {
				page = page[:len(zeros)]
			}
			if bytes.Equal(page, zeros[:len(page)]) {
				continue
			}
			for i := len(page) - frameHeaderLen; i >= 0; i -= frameHeaderLen {
				if binary.LittleEndian.Uint64(page[i:]) != 0 {
					dataEnd = pos + int64(pg+i+frameHeaderLen)
					break
				}
			}
		}
		pos += int64(len(chunk))
		if rerr != nil || n < len(buf) {
			break
		}
	}
	if dataEnd == from {
		return 0, 0, false, nil
	}
	region := make([]byte, dataEnd-from)
	if _, err := r.ReadAt(region, from); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, false, err
	}
	words := len(region) / frameHeaderLen

	// end[k]: where the chain of frames through word k ends, at a
	// commit-like word (its word index), or -1.
	end := make([]int32, words)
	for k := words - 1; k >= 0; k-- {
		h := region[k*frameHeaderLen:]
		end[k] = -1
		if h[1] != 0 || h[2] != 0 || h[3] != 0 {
			continue
		}
		switch h[0] {
		case FrameCommit:
			end[k] = int32(k)
		case FrameEntry, FrameIndex:
			l := int64(binary.LittleEndian.Uint32(h[4:]))
			if l > MaxEntrySize {
				continue
			}
			if next := int64(k) + (frameHeaderLen+l+int64(padLen(int(l))))/frameHeaderLen; next < int64(words) {
				end[k] = end[next]
			}
		}
	}
	// first(k) is the word a batch starting at word k has its first frame
	// at: the first batch of a segment covers its file header too.
	first := func(k int) int {
		if from == 0 && k == 0 {
			return fileHeaderLen / frameHeaderLen
		}
		return k
	}
	// The running CRC, from the region's start, at every word some chain
	// starts or ends at.
	need := make([]bool, words+1)
	chains := false
	for k := 0; k < words; k++ {
		if f := first(k); f < words && end[f] > int32(k) {
			need[k], need[end[f]] = true, true
			chains = true
		}
	}
	if !chains {
		return 0, 0, false, nil
	}
	running := make(map[int]uint32)
	var crc uint32
	last := 0
	for k := 0; k <= words; k++ {
		if need[k] {
			crc = crc32.Update(crc, castagnoliTable, region[last*frameHeaderLen:k*frameHeaderLen])
			last = k
			running[k] = crc
		}
	}
	for k := 0; k < words; k++ {
		f := first(k)
		if f >= words || end[f] <= int32(k) {
			continue
		}
		e := int(end[f])
		n := int64(e-k) * frameHeaderLen
		got := running[e] ^ crcShift(running[k], n)
		if got == binary.LittleEndian.Uint32(region[e*frameHeaderLen+4:]) {
			return from + int64(k)*frameHeaderLen, from + int64(e)*frameHeaderLen, true, nil
		}
	}
	return 0, 0, false, nil
}

// crcShift returns what CRC-32C crc becomes when n zero bytes follow its
// data, less the CRC of those zeros: crc(A+B) = crcShift(crc(A), len(B)) ^
// crc(B), as zlib's crc32_combine. It multiplies by x^(8n) modulo the
// polynomial, with an operator per power of two made once.
func crcShift(crc uint32, n int64) uint32 {
	shiftOnce.Do(makeShiftOps)
	for k := 0; n > 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			crc = gf2Times(&shiftOps[k], crc)
		}
	}
	return crc
}

var (
	shiftOnce sync.Once
	// shiftOps[k] multiplies a CRC by x^(8 * 2^k).
	shiftOps [63][32]uint32
)

func makeShiftOps() {
	// One zero bit: the reversed polynomial's step.
	var op [32]uint32
	op[0] = 0x82f63b78 // Castagnoli, reversed
	for i, row := 1, uint32(1); i < 32; i, row = i+1, row<<1 {
		op[i] = row
	}
	// Square it three times: one zero byte.
	for i := 0; i < 3; i++ {
		op = gf2Square(&op)
	}
	for k := range shiftOps {
		shiftOps[k] = op
		op = gf2Square(&op)
	}
}

func gf2Times(m *[32]uint32, v uint32) uint32 {
	var sum uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			sum ^= m[i]
		}
	}
	return sum
}

func gf2Square(m *[32]uint32) [32]uint32 {
	var sq [32]uint32
	for i := range sq {
		sq[i] = gf2Times(m, m[i])
	}
	return sq
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
