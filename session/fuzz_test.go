package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// withCRC appends the checksum ReadRegistry expects.
func withCRC(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func FuzzReadRegistry(f *testing.F) {
	f.Add(encode(f, NewRegistry()))
	f.Add(encode(f, buildRegistry(f, []int64{1, 2, 3})))
	r := NewRegistry()
	_ = r.Open(Info{ID: -1, TimeoutMs: 1 << 40, Password: pw(0xaa)})
	r.Record(-1, 1, []byte("a"))
	r.Record(-1, 9, nil)
	r.Ack(-1, 1)
	f.Add(encode(f, r))
	f.Add([]byte("CDSR\x01"))

	f.Fuzz(func(t *testing.T, data []byte) {
		// Both with the checksum and without, so mutated inputs reach the structure
		// checks rather than stopping at the checksum.
		for _, verify := range []bool{true, false} {
			got, err := readRegistry(bytes.NewReader(data), verify)
			if err != nil {
				if got != nil {
					t.Fatal("registry returned with an error")
				}
				continue
			}
			enc := encode(t, got)
			again, err := ReadRegistry(bytes.NewReader(enc))
			if err != nil {
				t.Fatalf("re-reading its own encoding: %v", err)
			}
			if !bytes.Equal(encode(t, again), enc) {
				t.Fatal("encode(read(encode(x))) != encode(x)")
			}
			// The encoding is canonical: what decodes is exactly what we would write.
			if !bytes.Equal(enc[:len(enc)-4], data[:len(enc)-4]) {
				t.Fatal("accepted a non-canonical encoding")
			}
		}
	})
}

// TestEncodingGolden pins the format: a change of bytes is a change of snapshot format.
func TestEncodingGolden(t *testing.T) {
	r := NewRegistry()
	_ = r.Open(Info{ID: 1, TimeoutMs: 2, Password: []byte{0xab}})
	r.Record(1, 3, []byte("x"))
	r.Ack(1, 3)
	got := encode(t, r)
	want := withCRC([]byte{'C', 'D', 'S', 'R', 1, 1, 2, 4, 1, 0xab, 6, 1, 6, 1, 'x'})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x, want %x", got, want)
	}
	if _, err := ReadRegistry(bytes.NewReader(got)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRegistry(bytes.NewReader(got[:len(got)-1])); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short checksum: %v", err)
	}
}
