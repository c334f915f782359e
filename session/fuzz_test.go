package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
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
	if _, err := r.AddIdentities(-1, []Identity{{"digest", "u:h"}, {"super", ""}}); err != nil {
		f.Fatal(err)
	}
	f.Add(encode(f, r))
	f.Add([]byte("CDSR\x01"))
	r.SetOwner(-1, "server-1")
	f.Add(encode(f, r))
	var v1 bytes.Buffer
	if _, err := r.writeTo(&v1, false); err != nil {
		f.Fatal(err)
	}
	f.Add(v1.Bytes())

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
			if bytes.HasPrefix(data, magicV1[:]) {
				// Read from version 1, whose owners are all "": its
				// canonical form is version 1's.
				var b bytes.Buffer
				if _, err := got.writeTo(&b, false); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b.Bytes()[:b.Len()-4], data[:b.Len()-4]) {
					t.Fatal("accepted a non-canonical version 1 encoding")
				}
				continue
			}
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
	_ = r.SetOwner(1, "s")
	got = encode(t, r)
	want := withCRC([]byte{'C', 'D', 'S', 'R', 2, 1, 2, 4, 1, 0xab, 1, 's', 6, 1, 6, 1, 'x'})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x, want %x", got, want)
	}
	if _, err := ReadRegistry(bytes.NewReader(got)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRegistry(bytes.NewReader(got[:len(got)-1])); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short checksum: %v", err)
	}

	// With an identity, version 3: each session ends with its identities.
	if _, err := r.AddIdentities(1, []Identity{{"d", "u"}}); err != nil {
		t.Fatal(err)
	}
	got = encode(t, r)
	want = withCRC([]byte{'C', 'D', 'S', 'R', 3, 1, 2, 4, 1, 0xab, 1, 's', 6, 1, 6, 1, 'x', 1, 1, 'd', 1, 'u'})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x, want %x", got, want)
	}
	back, err := ReadRegistry(bytes.NewReader(got))
	if err != nil || !slices.Equal(back.Identities(1), []Identity{{"d", "u"}}) {
		t.Fatalf("%v %v", back.Identities(1), err)
	}
	// Version 3 without any identity is not canonical.
	noIDs := withCRC([]byte{'C', 'D', 'S', 'R', 3, 1, 2, 4, 1, 0xab, 1, 's', 6, 1, 6, 1, 'x', 0})
	if _, err := ReadRegistry(bytes.NewReader(noIDs)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 3 without identities: %v", err)
	}
}

// TestIdentities: a session's identities are kept in the order added,
// without repeats, bounded, copied on write across a Clone, and dropped with
// the session.
func TestIdentities(t *testing.T) {
	r := buildRegistry(t, []int64{1, 2})
	if ok, err := r.AddIdentities(9, []Identity{{"d", "x"}}); ok || err != nil {
		t.Fatalf("unknown session: %v %v", ok, err)
	}
	a, b := Identity{"digest", "alice:h"}, Identity{"super", ""}
	if _, err := r.AddIdentities(1, []Identity{a, b, a}); err != nil {
		t.Fatal(err)
	}
	c := r.Clone()
	if _, err := r.AddIdentities(1, []Identity{{"digest", "bob:h"}, a}); err != nil {
		t.Fatal(err)
	}
	if got := r.Identities(1); !slices.Equal(got, []Identity{a, b, {"digest", "bob:h"}}) {
		t.Fatalf("identities %v", got)
	}
	if got := c.Identities(1); !slices.Equal(got, []Identity{a, b}) {
		t.Fatalf("the clone sees %v", got)
	}
	if r.Identities(2) != nil {
		t.Fatal("session 2 has identities")
	}
	long := Identity{"x", string(make([]byte, MaxIdentityLen))}
	if _, err := r.AddIdentities(2, []Identity{a, long}); err == nil || r.Identities(2) != nil {
		t.Fatalf("an identity over the bound: %v, %v", err, r.Identities(2))
	}
	var many []Identity
	for i := 0; i <= MaxIdentities; i++ {
		many = append(many, Identity{"d", fmt.Sprint(i)})
	}
	if _, err := r.AddIdentities(2, many); err == nil || r.Identities(2) != nil {
		t.Fatalf("more than MaxIdentities: %v", err)
	}
	back, err := ReadRegistry(bytes.NewReader(encode(t, r)))
	if err != nil || !slices.Equal(back.Identities(1), r.Identities(1)) {
		t.Fatalf("round trip: %v %v", back.Identities(1), err)
	}
	r.Close(1)
	if r.Identities(1) != nil {
		t.Fatal("a closed session keeps its identities")
	}
}

// TestReadVersion1: a registry written before sessions had owners (format
// version 1, as snapshots of earlier versions hold it) still reads, every
// owner "", and is written again as version 2.
func TestReadVersion1(t *testing.T) {
	v1 := withCRC([]byte{'C', 'D', 'S', 'R', 1, 1, 2, 4, 1, 0xab, 6, 1, 6, 1, 'x'})
	r, err := ReadRegistry(bytes.NewReader(v1))
	if err != nil {
		t.Fatal(err)
	}
	info, ok := r.Get(1)
	if !ok || info.TimeoutMs != 2 || !bytes.Equal(info.Password, []byte{0xab}) || info.Owner != "" {
		t.Fatalf("session read from version 1: %+v %v", info, ok)
	}
	if reply, ok := r.Reply(1, 3); !ok || string(reply) != "x" || r.Acked(1) != 3 {
		t.Fatalf("reply read from version 1: %q %v, floor %d", reply, ok, r.Acked(1))
	}
	want := withCRC([]byte{'C', 'D', 'S', 'R', 2, 1, 2, 4, 1, 0xab, 0, 6, 1, 6, 1, 'x'})
	if got := encode(t, r); !bytes.Equal(got, want) {
		t.Fatalf("written again = %x, want %x", got, want)
	}
}
