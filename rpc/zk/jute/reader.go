package jute

import "encoding/binary"

// Reader decodes jute's primitive types from a byte slice, as ZooKeeper's
// BinaryInputArchive does: big-endian ints and longs, one byte per boolean,
// and buffers, ustrings and vectors prefixed with a 4-byte length (-1 for
// null).
//
// The first error is sticky: once a read fails, every later read returns the
// zero value without consuming input and Err reports that first error, so a
// record's Decode can read all its fields and check once at the end. A
// Reader never panics, whatever the input, and never allocates more than
// the input can justify: a length larger than the bytes left is an error
// before anything is allocated. Decoded buffers and strings are copies; they
// never alias the input.
type Reader struct {
	b   []byte
	off int
	err error
}

// NewReader returns a Reader over b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Len returns the number of bytes not yet read.
func (r *Reader) Len() int { return len(r.b) - r.off }

// Err returns the first error met, or nil.
func (r *Reader) Err() error { return r.err }

func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// need reports whether n more bytes can be read for a field named what.
func (r *Reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if left := r.Len(); left < n {
		unit := "bytes"
		if n == 1 {
			unit = "byte"
		}
		r.fail(errorf(ErrTruncated, "%s needs %d %s, %d left", what, n, unit, left))
		return false
	}
	return true
}

// Int reads a jute int (4 bytes, big-endian).
func (r *Reader) Int() int32 {
	if !r.need(4, "int") {
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b[r.off:]))
	r.off += 4
	return v
}

// Long reads a jute long (8 bytes, big-endian).
func (r *Reader) Long() int64 {
	if !r.need(8, "long") {
		return 0
	}
	v := int64(binary.BigEndian.Uint64(r.b[r.off:]))
	r.off += 8
	return v
}

// Bool reads a jute boolean: one byte, true unless zero (as Java's
// DataInput.readBoolean).
func (r *Reader) Bool() bool {
	if !r.need(1, "boolean") {
		return false
	}
	v := r.b[r.off] != 0
	r.off++
	return v
}

// length reads a length prefix for a field of the given kind and checks that
// n elements of at least elemSize bytes each fit in the bytes left. It
// returns -1 for null and -2 after an error.
func (r *Reader) length(kind string, elemSize int) int {
	n := r.Int()
	if r.err != nil {
		return -2
	}
	if n == -1 {
		return -1
	}
	if n < 0 {
		r.fail(errorf(ErrBadLength, "negative %s length %d", kind, n))
		return -2
	}
	left := r.Len()
	if int64(n)*int64(elemSize) > int64(left) {
		if elemSize == 1 {
			r.fail(errorf(ErrBadLength, "%s length %d exceeds the %d bytes left", kind, n, left))
		} else {
			r.fail(errorf(ErrBadLength, "%s length %d (at least %d bytes each) exceeds the %d bytes left", kind, n, elemSize, left))
		}
		return -2
	}
	return int(n)
}

// Buffer reads a jute buffer: nil for null (length -1), otherwise a new
// slice, empty but not nil for length 0.
func (r *Reader) Buffer() []byte {
	n := r.length("buffer", 1)
	if n < 0 {
		return nil
	}
	v := make([]byte, n)
	copy(v, r.b[r.off:])
	r.off += n
	return v
}

// Ustring reads a jute ustring. Null (length -1) reads as "": a Go string
// cannot tell the two apart, and no field a ZooKeeper client sends gives
// them different meanings, except ReconfigRequest's (see NullableUstring).
// The bytes are returned as they are, without UTF-8 validation.
func (r *Reader) Ustring() string {
	n := r.length("ustring", 1)
	if n < 0 {
		return ""
	}
	v := string(r.b[r.off : r.off+n])
	r.off += n
	return v
}

// NullableUstring reads a jute ustring, returning nil for null.
func (r *Reader) NullableUstring() *string {
	n := r.length("ustring", 1)
	if n < 0 {
		return nil
	}
	v := string(r.b[r.off : r.off+n])
	r.off += n
	return &v
}

// VectorLen reads a vector's length prefix: -1 for null, otherwise the number
// of elements, checked against the bytes left on the assumption that each
// element takes at least minElemSize bytes (at least 1). After an error it
// returns -1, so a caller's loop over the elements does not run.
func (r *Reader) VectorLen(minElemSize int) int {
	n := r.length("vector", max(minElemSize, 1))
	if n < 0 {
		return -1
	}
	return n
}

// Ustrings reads a vector of ustrings: nil for null, otherwise a slice that
// is empty but not nil for length 0.
func (r *Reader) Ustrings() []string {
	n := r.VectorLen(4)
	if n < 0 {
		return nil
	}
	v := make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		v = append(v, r.Ustring())
	}
	if r.err != nil {
		return nil
	}
	return v
}

// Record decodes rec from the Reader unless an earlier read failed.
func (r *Reader) Record(rec Record) {
	if r.err == nil {
		r.fail(rec.Decode(r))
	}
}

// readVector reads a vector of records, each at least minSize bytes long:
// nil for null, otherwise a slice that is empty but not nil for length 0.
func readVector[T any, P interface {
	*T
	Record
}](r *Reader, minSize int) []T {
	n := r.VectorLen(minSize)
	if n < 0 {
		return nil
	}
	v := make([]T, n)
	for i := 0; i < n && r.err == nil; i++ {
		r.Record(P(&v[i]))
	}
	if r.err != nil {
		return nil
	}
	return v
}
