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
	r.Record(-1, 1, 0, []byte("a"))
	r.Record(-1, 9, 0, nil)
	r.Ack(-1, 1)
	f.Add(encode(f, r))
	if _, err := r.AddIdentities(-1, []Identity{{"digest", "u:h"}, {"super", ""}}); err != nil {
		f.Fatal(err)
	}
	f.Add(encode(f, r))
	f.Add([]byte("CDSR\x01"))
	r.SetOwner(-1, "server-1")
	f.Add(encode(f, r))
	_ = r.SetEpoch(-1, 3)
	r.Advance(-1, 2)
	r.Record(-1, 10, 77, []byte("d"))
	f.Add(encode(f, r))
	_ = r.AddLockDelay(LockDelay{Path: "/locks/a", Session: 5, Until: 1000})
	_ = r.AddLockDelay(LockDelay{Path: "/locks/b", Session: -1, Until: 0})
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
	r.Record(1, 3, 0, []byte("x"))
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

	// With a connection epoch, version 4: each reply has its digest, each
	// session ends with its epoch and request number, and the sessions are
	// followed by the nodes kept for a lock-delay (none here;
	// TestLockDelayEncoding pins them).
	if err := r.SetEpoch(1, 9); err != nil {
		t.Fatal(err)
	}
	r.Advance(1, 2)
	got = encode(t, r)
	want = withCRC([]byte{'C', 'D', 'S', 'R', 4, 1, 2, 4, 1, 0xab, 1, 's', 6, 1, 6, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x', 1, 1, 'd', 1, 'u', 18, 4, 0})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x, want %x", got, want)
	}
	back, err = ReadRegistry(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	if e, q := back.Epoch(1); e != 9 || q != 2 {
		t.Fatalf("epoch %d, request %d after a round trip", e, q)
	}
	// Version 4 with neither an epoch nor a digest is not canonical; nor is a
	// request number without an epoch.
	for name, b := range map[string][]byte{
		"no epoch":            {'C', 'D', 'S', 'R', 4, 1, 2, 4, 1, 0xab, 1, 's', 6, 1, 6, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x', 0, 0, 0, 0},
		"number, no epoch":    {'C', 'D', 'S', 'R', 4, 1, 2, 4, 1, 0xab, 1, 's', 6, 1, 6, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x', 0, 0, 4, 0},
		"negative request no": {'C', 'D', 'S', 'R', 4, 1, 2, 4, 1, 0xab, 1, 's', 6, 1, 6, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x', 0, 18, 3, 0},
	} {
		if _, err := ReadRegistry(bytes.NewReader(withCRC(b))); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A digest alone makes version 4 too.
	d := NewRegistry()
	_ = d.Open(Info{ID: 1, TimeoutMs: 2, Password: []byte{0xab}})
	d.Record(1, 3, 0x0102030405060708, []byte("x"))
	got = encode(t, d)
	want = withCRC([]byte{'C', 'D', 'S', 'R', 4, 1, 2, 4, 1, 0xab, 0, 0, 1, 6, 1, 2, 3, 4, 5, 6, 7, 8, 1, 'x', 0, 0, 0, 0})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x, want %x", got, want)
	}
	if _, dg, ok := back.Reply(1, 3); !ok || dg != 0 {
		t.Fatalf("reply digest %x, %v", dg, ok)
	}
	back, err = ReadRegistry(bytes.NewReader(got))
	if _, dg, ok := back.Reply(1, 3); err != nil || !ok || dg != 0x0102030405060708 {
		t.Fatalf("reply digest %x, %v, %v", dg, ok, err)
	}
}

// TestEpochs: a session's connection epoch only moves forward, resets its
// request number, and the request number only moves forward within it.
func TestEpochs(t *testing.T) {
	r := NewRegistry()
	if err := r.SetEpoch(1, 5); !errors.Is(err, ErrUnknown) {
		t.Fatalf("SetEpoch of an unknown session: %v", err)
	}
	_ = r.Open(Info{ID: 1, TimeoutMs: 2, Password: []byte{1}})
	if e, q := r.Epoch(1); e != 0 || q != 0 {
		t.Fatalf("new session: epoch %d, request %d", e, q)
	}
	steps := []struct {
		epoch, advance int64 // 0: not called
		wantE, wantQ   int64
	}{
		{epoch: 1, wantE: 1},
		{advance: 3, wantE: 1, wantQ: 3},
		{advance: 2, wantE: 1, wantQ: 3}, // a lower number changes nothing
		{epoch: 1, wantE: 1, wantQ: 3},   // nor the same epoch
		{epoch: 7, wantE: 7, wantQ: 0},   // a new connection starts from 0
		{epoch: 4, wantE: 7, wantQ: 0},   // an older one changes nothing
		{advance: 1, wantE: 7, wantQ: 1},
	}
	for i, s := range steps {
		c := r.Clone() // the clone keeps what it saw
		e0, q0 := c.Epoch(1)
		if s.epoch != 0 {
			if err := r.SetEpoch(1, s.epoch); err != nil {
				t.Fatal(err)
			}
		}
		if s.advance != 0 {
			r.Advance(1, s.advance)
		}
		if e, q := r.Epoch(1); e != s.wantE || q != s.wantQ {
			t.Fatalf("step %d: epoch %d, request %d; want %d, %d", i, e, q, s.wantE, s.wantQ)
		}
		if e, q := c.Epoch(1); e != e0 || q != q0 {
			t.Fatalf("step %d: the clone changed", i)
		}
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
	if reply, _, ok := r.Reply(1, 3); !ok || string(reply) != "x" || r.Acked(1) != 3 {
		t.Fatalf("reply read from version 1: %q %v, floor %d", reply, ok, r.Acked(1))
	}
	want := withCRC([]byte{'C', 'D', 'S', 'R', 2, 1, 2, 4, 1, 0xab, 0, 6, 1, 6, 1, 'x'})
	if got := encode(t, r); !bytes.Equal(got, want) {
		t.Fatalf("written again = %x, want %x", got, want)
	}
}
