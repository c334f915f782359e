// Package backup is the format of a coordd backup file (coordctl snapshot
// save, coordd restore): a header that says what the backup holds, the
// state machine's snapshot as the body, and a SHA-256 over everything
// before it, so that a corrupt or truncated file is refused before
// anything is restored from it. It knows the layout only: not the body's
// encoding (package fsm's), nor Raft, nor the network.
//
// The layout, integers big-endian:
//
//	"COORDBAK"        8 bytes, magic
//	version           uint32 (Version)
//	header length     uint32
//	header            apipb.BackupHeader, protobuf
//	body              the state machine's snapshot, to the trailer
//	"COORDEND"        8 bytes, end marker
//	body length       uint64
//	SHA-256           32 bytes, of every byte before the end marker
package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/rpc/apipb"
)

// Version is the format version this package writes and reads.
const Version = 1

var (
	magic     = [8]byte{'C', 'O', 'O', 'R', 'D', 'B', 'A', 'K'}
	endMarker = [8]byte{'C', 'O', 'O', 'R', 'D', 'E', 'N', 'D'}
)

const (
	prefixLen  = 8 + 4 + 4
	trailerLen = 8 + 8 + sha256.Size
	// maxHeader bounds the header read into memory.
	maxHeader = 1 << 20
)

// Errors of a file that is not a usable backup. Read's errors wrap one of
// them, with the detail.
var (
	// ErrNotBackup means the file does not start as a coordd backup.
	ErrNotBackup = errors.New("backup: not a coordd backup file")
	// ErrVersion means the file is of a format version this build does not
	// read.
	ErrVersion = errors.New("backup: unsupported format version")
	// ErrTruncated means the file ends before its end: it was cut short.
	ErrTruncated = errors.New("backup: truncated")
	// ErrCorrupt means the file's bytes are not those that were written:
	// the checksum or a length does not match.
	ErrCorrupt = errors.New("backup: corrupt")
)

// Writer writes a backup file: NewWriter writes the header, Write the
// body, Close the trailer.
type Writer struct {
	w    io.Writer
	sum  hash.Hash
	body uint64
	err  error
}

// NewWriter starts a backup file on w with header h.
func NewWriter(w io.Writer, h *apipb.BackupHeader) (*Writer, error) {
	hb, err := proto.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("backup: encoding the header: %w", err)
	}
	if len(hb) > maxHeader {
		return nil, fmt.Errorf("backup: header of %d bytes exceeds %d", len(hb), maxHeader)
	}
	bw := &Writer{w: w, sum: sha256.New()}
	var pre [prefixLen]byte
	copy(pre[:8], magic[:])
	binary.BigEndian.PutUint32(pre[8:], Version)
	binary.BigEndian.PutUint32(pre[12:], uint32(len(hb)))
	if err := bw.raw(pre[:]); err != nil {
		return nil, err
	}
	if err := bw.raw(hb); err != nil {
		return nil, err
	}
	return bw, nil
}

func (w *Writer) raw(p []byte) error {
	if w.err != nil {
		return w.err
	}
	w.sum.Write(p)
	if _, err := w.w.Write(p); err != nil {
		w.err = err
	}
	return w.err
}

// Write appends p to the body.
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.raw(p); err != nil {
		return 0, err
	}
	w.body += uint64(len(p))
	return len(p), nil
}

// Close writes the trailer (it does not close the underlying writer).
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	var tr [trailerLen]byte
	copy(tr[:8], endMarker[:])
	binary.BigEndian.PutUint64(tr[8:], w.body)
	copy(tr[16:], w.sum.Sum(nil))
	_, err := w.w.Write(tr[:])
	w.err = errors.New("backup: writer closed")
	return err
}

// Info is what a verified backup file says about itself.
type Info struct {
	Header   *apipb.BackupHeader
	Version  uint32
	Size     int64    // the whole file, bytes
	BodySize int64    // the state machine's snapshot, bytes
	Checksum [32]byte // SHA-256 of every byte before the end marker
}

// Read checks the backup file r of size bytes (its magic, version, header,
// end marker, lengths and checksum, reading it whole once) and returns what
// it holds, and a reader of its body. An error wraps ErrNotBackup,
// ErrVersion, ErrTruncated or ErrCorrupt and says what is wrong.
func Read(r io.ReaderAt, size int64) (*Info, *io.SectionReader, error) {
	if size < prefixLen {
		if size >= 8 {
			var m [8]byte
			if _, err := r.ReadAt(m[:], 0); err == nil && m != magic {
				return nil, nil, fmt.Errorf("%w (it starts with %q)", ErrNotBackup, printable(m[:]))
			}
		}
		return nil, nil, fmt.Errorf("%w: %d bytes, shorter than any backup's header", ErrTruncated, size)
	}
	var pre [prefixLen]byte
	if _, err := r.ReadAt(pre[:], 0); err != nil {
		return nil, nil, fmt.Errorf("backup: reading the header: %w", err)
	}
	if [8]byte(pre[:8]) != magic {
		return nil, nil, fmt.Errorf("%w (it starts with %q)", ErrNotBackup, printable(pre[:8]))
	}
	info := &Info{Version: binary.BigEndian.Uint32(pre[8:]), Size: size}
	if info.Version != Version {
		return nil, nil, fmt.Errorf("%w %d (this build reads version %d)", ErrVersion, info.Version, Version)
	}
	hlen := int64(binary.BigEndian.Uint32(pre[12:]))
	if hlen > maxHeader {
		return nil, nil, fmt.Errorf("%w: a header of %d bytes", ErrCorrupt, hlen)
	}
	bodyStart := prefixLen + hlen
	if size < bodyStart+trailerLen {
		return nil, nil, fmt.Errorf("%w: %d bytes, but the header and end marker alone take %d", ErrTruncated, size, bodyStart+trailerLen)
	}
	var tr [trailerLen]byte
	if _, err := r.ReadAt(tr[:], size-trailerLen); err != nil {
		return nil, nil, fmt.Errorf("backup: reading the end marker: %w", err)
	}
	if [8]byte(tr[:8]) != endMarker {
		return nil, nil, fmt.Errorf("%w: no end marker in the last %d bytes (the file was cut short, or is corrupt)", ErrTruncated, trailerLen)
	}
	info.BodySize = size - trailerLen - bodyStart
	if want := binary.BigEndian.Uint64(tr[8:]); want != uint64(info.BodySize) {
		if want > uint64(info.BodySize) {
			return nil, nil, fmt.Errorf("%w: the body has %d of its %d bytes", ErrTruncated, info.BodySize, want)
		}
		return nil, nil, fmt.Errorf("%w: the body has %d bytes, the end marker says %d", ErrCorrupt, info.BodySize, want)
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(r, 0, size-trailerLen)); err != nil {
		return nil, nil, fmt.Errorf("backup: reading the file: %w", err)
	}
	copy(info.Checksum[:], sum.Sum(nil))
	if !bytes.Equal(info.Checksum[:], tr[16:]) {
		return nil, nil, fmt.Errorf("%w: SHA-256 %x, but the file says %x", ErrCorrupt, info.Checksum, tr[16:])
	}
	hb := make([]byte, hlen)
	if _, err := r.ReadAt(hb, prefixLen); err != nil {
		return nil, nil, fmt.Errorf("backup: reading the header: %w", err)
	}
	info.Header = &apipb.BackupHeader{}
	if err := proto.Unmarshal(hb, info.Header); err != nil {
		return nil, nil, fmt.Errorf("%w: undecodable header: %v", ErrCorrupt, err)
	}
	return info, io.NewSectionReader(r, bodyStart, info.BodySize), nil
}

// printable shows the first bytes of a file that is not a backup.
func printable(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '.'
		}
		out[i] = c
	}
	return string(out)
}
