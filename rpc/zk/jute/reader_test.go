package jute

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
)

func TestPrimitivesRoundTrip(t *testing.T) {
	s := "zk/π"
	w := NewWriter([]byte{0xee}) // appends after what the slice holds
	w.Int(-2)
	w.Long(-3)
	w.Bool(true)
	w.Bool(false)
	w.Buffer([]byte("ab"))
	w.Buffer(nil)
	w.Buffer([]byte{})
	w.Ustring("/a/b")
	w.NullableUstring(nil)
	w.NullableUstring(&s)
	w.Ustrings([]string{"x", ""})
	w.Ustrings(nil)
	w.Ustrings([]string{})

	b := w.Bytes()
	if b[0] != 0xee {
		t.Fatalf("writer lost the bytes it was given: % x", b[:1])
	}
	r := NewReader(b[1:])
	if v := r.Int(); v != -2 {
		t.Errorf("Int = %d", v)
	}
	if v := r.Long(); v != -3 {
		t.Errorf("Long = %d", v)
	}
	if !r.Bool() || r.Bool() {
		t.Errorf("Bool round trip broken")
	}
	if v := r.Buffer(); string(v) != "ab" {
		t.Errorf("Buffer = %q", v)
	}
	if v := r.Buffer(); v != nil {
		t.Errorf("null Buffer = %#v, want nil", v)
	}
	if v := r.Buffer(); v == nil || len(v) != 0 {
		t.Errorf("empty Buffer = %#v, want empty non-nil", v)
	}
	if v := r.Ustring(); v != "/a/b" {
		t.Errorf("Ustring = %q", v)
	}
	if v := r.NullableUstring(); v != nil {
		t.Errorf("null NullableUstring = %q", *v)
	}
	if v := r.NullableUstring(); v == nil || *v != s {
		t.Errorf("NullableUstring = %v", v)
	}
	if v := r.Ustrings(); len(v) != 2 || v[0] != "x" || v[1] != "" {
		t.Errorf("Ustrings = %q", v)
	}
	if v := r.Ustrings(); v != nil {
		t.Errorf("null Ustrings = %#v", v)
	}
	if v := r.Ustrings(); v == nil || len(v) != 0 {
		t.Errorf("empty Ustrings = %#v", v)
	}
	if r.Err() != nil || r.Len() != 0 {
		t.Errorf("err %v, %d bytes left", r.Err(), r.Len())
	}
}

func TestPrimitiveEncodings(t *testing.T) {
	w := NewWriter(nil)
	w.Int(1)
	w.Long(-1)
	w.Bool(true)
	w.Buffer(nil)
	w.Ustring("a")
	w.Ustrings(nil)
	want := []byte{
		0, 0, 0, 1, // int 1, big-endian
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // long -1
		1,                      // true
		0xff, 0xff, 0xff, 0xff, // null buffer: length -1
		0, 0, 0, 1, 'a', // ustring "a"
		0xff, 0xff, 0xff, 0xff, // null vector: length -1
	}
	if !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("got % x\nwant % x", w.Bytes(), want)
	}
}

func TestBoolAnyNonZeroIsTrue(t *testing.T) {
	// Java's DataInput.readBoolean: any non-zero byte is true.
	r := NewReader([]byte{2, 0xff, 0})
	if !r.Bool() || !r.Bool() || r.Bool() {
		t.Fatal("non-zero bytes must read as true, zero as false")
	}
}

func TestReaderErrors(t *testing.T) {
	be := func(v int32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	tests := []struct {
		name string
		in   []byte
		read func(r *Reader)
		want error
		msg  string
	}{
		{"short int", []byte{1, 2, 3}, func(r *Reader) { r.Int() }, ErrTruncated,
			"jute: int needs 4 bytes, 3 left"},
		{"short long", []byte{1, 2, 3, 4}, func(r *Reader) { r.Long() }, ErrTruncated,
			"jute: long needs 8 bytes, 4 left"},
		{"empty bool", nil, func(r *Reader) { r.Bool() }, ErrTruncated,
			"jute: boolean needs 1 byte, 0 left"},
		{"buffer over input", append(be(1000000), make([]byte, 12)...), func(r *Reader) { r.Buffer() }, ErrBadLength,
			"jute: buffer length 1000000 exceeds the 12 bytes left"},
		{"negative buffer", be(-5), func(r *Reader) { r.Buffer() }, ErrBadLength,
			"jute: negative buffer length -5"},
		{"ustring over input", append(be(3), 'a', 'b'), func(r *Reader) { r.Ustring() }, ErrBadLength,
			"jute: ustring length 3 exceeds the 2 bytes left"},
		{"negative ustring", be(-2), func(r *Reader) { r.Ustring() }, ErrBadLength,
			"jute: negative ustring length -2"},
		{"vector over input", append(be(0x7fffffff), 0, 0, 0, 0), func(r *Reader) { r.Ustrings() }, ErrBadLength,
			"jute: vector length 2147483647 (at least 4 bytes each) exceeds the 4 bytes left"},
		{"negative vector", be(-7), func(r *Reader) { r.Ustrings() }, ErrBadLength,
			"jute: negative vector length -7"},
		{"ustring in vector truncated", append(be(1), be(5)...), func(r *Reader) { r.Ustrings() }, ErrBadLength,
			"jute: ustring length 5 exceeds the 0 bytes left"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(tc.in)
			tc.read(r)
			if !errors.Is(r.Err(), tc.want) {
				t.Fatalf("err = %v, want %v", r.Err(), tc.want)
			}
			if r.Err().Error() != tc.msg {
				t.Errorf("message %q, want %q", r.Err(), tc.msg)
			}
		})
	}
}

func TestReaderErrorIsSticky(t *testing.T) {
	r := NewReader([]byte{0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8})
	_ = r.Buffer() // 9 announced, 8 left
	first := r.Err()
	if first == nil {
		t.Fatal("want an error")
	}
	// Later reads return zero values, consume nothing and keep the first error.
	if r.Int() != 0 || r.Long() != 0 || r.Bool() || r.Ustring() != "" || r.Buffer() != nil || r.Ustrings() != nil {
		t.Error("reads after an error must return zero values")
	}
	if r.Err() != first {
		t.Errorf("err changed to %v", r.Err())
	}
	if r.Len() != 8 {
		t.Errorf("%d bytes left, want 8: the failed read consumed the payload", r.Len())
	}
}

// A length prefix claims more than the input holds: the reader must refuse it
// before allocating anything of that size.
func TestReaderDoesNotAllocateOnClaims(t *testing.T) {
	inputs := [][]byte{
		{0x7f, 0xff, 0xff, 0xff, 1, 2, 3},             // buffer of 2 GiB
		{0x7f, 0xff, 0xff, 0xff},                      // vector of 2^31-1 strings
		{0x00, 0x10, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0}, // vector of 1 Mi ACLs, 7 bytes left
	}
	decoders := []func(r *Reader){
		func(r *Reader) { r.Buffer() },
		func(r *Reader) { r.Ustrings() },
		func(r *Reader) { readVector[ACL](r, aclMinSize) },
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i, in := range inputs {
		r := NewReader(in)
		decoders[i](r)
		if !errors.Is(r.Err(), ErrBadLength) {
			t.Errorf("input %d: err = %v, want ErrBadLength", i, r.Err())
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<10 {
		t.Fatalf("decoding three tiny inputs allocated %d bytes", d)
	}
}

func TestDecodedBytesDoNotAliasInput(t *testing.T) {
	in := []byte{0, 0, 0, 2, 'h', 'i'}
	v := NewReader(in).Buffer()
	in[4] = 'X'
	if string(v) != "hi" {
		t.Fatalf("buffer aliases the input: %q", v)
	}
}

func TestFrameMarks(t *testing.T) {
	w := NewWriter([]byte("pre"))
	mark := w.BeginFrame()
	w.Int(7)
	w.Ustring("ab")
	w.EndFrame(mark)
	want := []byte{'p', 'r', 'e', 0, 0, 0, 10, 0, 0, 0, 7, 0, 0, 0, 2, 'a', 'b'}
	if !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("got % x, want % x", w.Bytes(), want)
	}
}
