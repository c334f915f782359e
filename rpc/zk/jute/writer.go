package jute

import "encoding/binary"

// Writer appends jute encodings to a byte slice, as ZooKeeper's
// BinaryOutputArchive writes them. Writing never fails.
type Writer struct {
	b []byte
}

// NewWriter returns a Writer that appends to b (after its len(b) bytes), so
// a caller can reuse a buffer with NewWriter(buf[:0]).
func NewWriter(b []byte) *Writer { return &Writer{b: b} }

// Bytes returns the bytes written, including those b held when the Writer
// was made.
func (w *Writer) Bytes() []byte { return w.b }

// Len returns len(w.Bytes()).
func (w *Writer) Len() int { return len(w.b) }

// Int writes a jute int (4 bytes, big-endian).
func (w *Writer) Int(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }

// Long writes a jute long (8 bytes, big-endian).
func (w *Writer) Long(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }

// Bool writes a jute boolean: one byte, 1 or 0.
func (w *Writer) Bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// Buffer writes a jute buffer: length -1 for nil, otherwise the length and
// the bytes (an empty non-nil slice is length 0).
func (w *Writer) Buffer(v []byte) {
	if v == nil {
		w.Int(-1)
		return
	}
	w.Int(int32(len(v)))
	w.b = append(w.b, v...)
}

// Ustring writes a jute ustring: the length in bytes, then the bytes.
func (w *Writer) Ustring(s string) {
	w.Int(int32(len(s)))
	w.b = append(w.b, s...)
}

// NullableUstring writes a jute ustring, length -1 for nil.
func (w *Writer) NullableUstring(s *string) {
	if s == nil {
		w.Int(-1)
		return
	}
	w.Ustring(*s)
}

// VectorLen writes a vector's length prefix; -1 stands for null.
func (w *Writer) VectorLen(n int) { w.Int(int32(n)) }

// Ustrings writes a vector of ustrings, length -1 for nil.
func (w *Writer) Ustrings(v []string) {
	if v == nil {
		w.Int(-1)
		return
	}
	w.nonNullUstrings(v)
}

// nonNullUstrings writes a vector of ustrings, nil as an empty vector.
func (w *Writer) nonNullUstrings(v []string) {
	w.VectorLen(len(v))
	for _, s := range v {
		w.Ustring(s)
	}
}

// Record writes rec's encoding.
func (w *Writer) Record(rec Encoder) { rec.Encode(w) }

// BeginFrame reserves a frame's 4-byte length prefix and returns its
// position, for EndFrame.
func (w *Writer) BeginFrame() int {
	mark := len(w.b)
	w.b = append(w.b, 0, 0, 0, 0)
	return mark
}

// EndFrame fills in the length prefix reserved at mark with the number of
// bytes written since.
func (w *Writer) EndFrame(mark int) {
	binary.BigEndian.PutUint32(w.b[mark:], uint32(len(w.b)-mark-4))
}

// writeVector writes a vector of records: length -1 for nil when nullable,
// otherwise the length and each record.
func writeVector[T any, P interface {
	*T
	Encoder
}](w *Writer, v []T, nullable bool) {
	if v == nil && nullable {
		w.Int(-1)
		return
	}
	w.VectorLen(len(v))
	for i := range v {
		P(&v[i]).Encode(w)
	}
}
