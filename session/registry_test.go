package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func pw(b byte) []byte { return bytes.Repeat([]byte{b}, 16) }

func mustOpen(t testing.TB, r *Registry, id int64) {
	t.Helper()
	if err := r.Open(Info{ID: id, TimeoutMs: 1000 * id, Password: pw(byte(id))}); err != nil {
		t.Fatalf("Open(%d): %v", id, err)
	}
}

func TestRegistryOpenCloseGetList(t *testing.T) {
	r := NewRegistry()
	for _, id := range []int64{30, 10, 20} {
		mustOpen(t, r, id)
	}
	if r.Len() != 3 {
		t.Fatalf("Len = %d, want 3", r.Len())
	}
	info, ok := r.Get(20)
	if !ok || info.ID != 20 || info.TimeoutMs != 20000 || !bytes.Equal(info.Password, pw(20)) {
		t.Fatalf("Get(20) = %+v, %v", info, ok)
	}
	info.Password[0] ^= 0xff // callers' copies are theirs
	if err := r.CheckPassword(20, pw(20)); err != nil {
		t.Fatalf("password changed through Get's result: %v", err)
	}
	var ids []int64
	for _, s := range r.List() {
		ids = append(ids, s.ID)
	}
	if want := []int64{10, 20, 30}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("List ids = %v, want %v", ids, want)
	}
	if !r.Close(20) {
		t.Fatal("Close(20) = false")
	}
	if r.Close(20) {
		t.Fatal("second Close(20) = true")
	}
	if _, ok := r.Get(20); ok {
		t.Fatal("Get after Close found the session")
	}
	if r.Len() != 2 {
		t.Fatalf("Len = %d, want 2", r.Len())
	}
	if got := NewRegistry().List(); len(got) != 0 {
		t.Fatalf("empty List = %v", got)
	}
}

func TestRegistryOpenErrors(t *testing.T) {
	r := NewRegistry()
	mustOpen(t, r, 7)
	err := r.Open(Info{ID: 7, TimeoutMs: 1, Password: pw(1)})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate Open: %v, want ErrExists", err)
	}
	if info, _ := r.Get(7); info.TimeoutMs != 7000 {
		t.Fatalf("duplicate Open changed the session: %+v", info)
	}
	if err := r.Open(Info{ID: 8, Password: make([]byte, MaxPasswordLen+1)}); err == nil {
		t.Fatal("Open accepted an over-long password")
	}
	// The password is copied on Open.
	p := pw(9)
	if err := r.Open(Info{ID: 9, Password: p}); err != nil {
		t.Fatal(err)
	}
	p[0] = 0
	if err := r.CheckPassword(9, pw(9)); err != nil {
		t.Fatalf("Open kept the caller's slice: %v", err)
	}
}

func TestCheckPassword(t *testing.T) {
	r := NewRegistry()
	mustOpen(t, r, 1)
	mustOpen(t, r, 2)
	r.Close(2)
	tests := []struct {
		name string
		id   int64
		pw   []byte
		want error
	}{
		{"right", 1, pw(1), nil},
		{"wrong", 1, pw(2), ErrBadPassword},
		{"short", 1, pw(1)[:15], ErrBadPassword},
		{"empty", 1, nil, ErrBadPassword},
		{"unknown", 3, pw(3), ErrUnknown},
		{"closed", 2, pw(2), ErrUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := r.CheckPassword(tc.id, tc.pw)
			if tc.want == nil && err != nil || !errors.Is(err, tc.want) {
				t.Fatalf("CheckPassword = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReplyCache(t *testing.T) {
	type op struct {
		kind  string // record, ack, want, gone, floor
		id    int64
		xid   int64
		reply string
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"record and look up", []op{
			{kind: "record", id: 1, xid: 5, reply: "five"},
			{kind: "record", id: 1, xid: 6, reply: "six"},
			{kind: "want", id: 1, xid: 5, reply: "five"},
			{kind: "want", id: 1, xid: 6, reply: "six"},
			{kind: "gone", id: 1, xid: 7},
			{kind: "gone", id: 2, xid: 5}, // per session
			{kind: "floor", id: 1, xid: 0},
		}},
		{"first outcome stands", []op{
			{kind: "record", id: 1, xid: 5, reply: "first"},
			{kind: "record", id: 1, xid: 5, reply: "second"},
			{kind: "want", id: 1, xid: 5, reply: "first"},
		}},
		{"out of order record", []op{
			{kind: "record", id: 1, xid: 9, reply: "nine"},
			{kind: "record", id: 1, xid: 3, reply: "three"},
			{kind: "record", id: 1, xid: 6, reply: "six"},
			{kind: "ack", id: 1, xid: 4},
			{kind: "gone", id: 1, xid: 3},
			{kind: "want", id: 1, xid: 6, reply: "six"},
			{kind: "want", id: 1, xid: 9, reply: "nine"},
		}},
		{"ack drops below floor", []op{
			{kind: "record", id: 1, xid: 1, reply: "a"},
			{kind: "record", id: 1, xid: 2, reply: "b"},
			{kind: "record", id: 1, xid: 3, reply: "c"},
			{kind: "ack", id: 1, xid: 3},
			{kind: "gone", id: 1, xid: 1},
			{kind: "gone", id: 1, xid: 2},
			{kind: "want", id: 1, xid: 3, reply: "c"},
			{kind: "floor", id: 1, xid: 3},
		}},
		{"floor never goes down", []op{
			{kind: "ack", id: 1, xid: 10},
			{kind: "ack", id: 1, xid: 4},
			{kind: "floor", id: 1, xid: 10},
		}},
		{"record below floor ignored", []op{
			{kind: "ack", id: 1, xid: 10},
			{kind: "record", id: 1, xid: 9, reply: "late"},
			{kind: "gone", id: 1, xid: 9},
			{kind: "record", id: 1, xid: 10, reply: "ten"},
			{kind: "want", id: 1, xid: 10, reply: "ten"},
		}},
		{"empty reply is cached", []op{
			{kind: "record", id: 1, xid: 1, reply: ""},
			{kind: "want", id: 1, xid: 1, reply: ""},
		}},
		{"unknown session", []op{
			{kind: "record", id: 99, xid: 1, reply: "x"},
			{kind: "gone", id: 99, xid: 1},
			{kind: "ack", id: 99, xid: 5},
			{kind: "floor", id: 99, xid: 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			mustOpen(t, r, 1)
			mustOpen(t, r, 2)
			for i, o := range tc.ops {
				switch o.kind {
				case "record":
					r.Record(o.id, o.xid, 0, []byte(o.reply))
				case "ack":
					r.Ack(o.id, o.xid)
				case "want":
					got, _, ok := r.Reply(o.id, o.xid)
					if !ok || string(got) != o.reply {
						t.Fatalf("op %d: Reply(%d, %d) = %q, %v; want %q", i, o.id, o.xid, got, ok, o.reply)
					}
				case "gone":
					if got, _, ok := r.Reply(o.id, o.xid); ok {
						t.Fatalf("op %d: Reply(%d, %d) = %q, want none", i, o.id, o.xid, got)
					}
				case "floor":
					if got := r.Acked(o.id); got != o.xid {
						t.Fatalf("op %d: Acked(%d) = %d, want %d", i, o.id, got, o.xid)
					}
				}
			}
		})
	}
}

func TestReplyCacheCopiesAndCloseForgets(t *testing.T) {
	r := NewRegistry()
	mustOpen(t, r, 1)
	b := []byte("reply")
	r.Record(1, 1, 0, b)
	b[0] = 'X'
	if got, _, _ := r.Reply(1, 1); string(got) != "reply" {
		t.Fatalf("Record kept the caller's slice: %q", got)
	}
	r.Ack(1, 1)
	r.Close(1)
	mustOpen(t, r, 1)
	if _, _, ok := r.Reply(1, 1); ok || r.Acked(1) != 0 {
		t.Fatal("reopened session inherited the old reply cache")
	}
}

func TestReplyCacheCap(t *testing.T) {
	r := NewRegistry()
	mustOpen(t, r, 1)
	const extra = 10
	for xid := int64(1); xid <= MaxCachedReplies+extra; xid++ {
		r.Record(1, xid, 0, []byte(fmt.Sprint(xid)))
	}
	for xid := int64(1); xid <= extra; xid++ {
		if _, _, ok := r.Reply(1, xid); ok {
			t.Fatalf("xid %d still cached past the cap", xid)
		}
	}
	for xid := int64(extra + 1); xid <= MaxCachedReplies+extra; xid++ {
		if got, _, ok := r.Reply(1, xid); !ok || string(got) != fmt.Sprint(xid) {
			t.Fatalf("Reply(1, %d) = %q, %v", xid, got, ok)
		}
	}
	// An evicted write must be refused as stale, not applied again.
	if got := r.Acked(1); got != extra+1 {
		t.Fatalf("Acked = %d, want %d (floor raised past the evicted xids)", got, extra+1)
	}
	// Over-long replies are not cached and also raise the floor.
	r.Record(1, 5000, 0, make([]byte, MaxReplyLen+1))
	if _, _, ok := r.Reply(1, 5000); ok || r.Acked(1) != 5001 {
		t.Fatalf("over-long reply: cached=%v floor=%d", ok, r.Acked(1))
	}
}

// build applies ops to a fresh registry.
func buildRegistry(t testing.TB, order []int64) *Registry {
	r := NewRegistry()
	for _, id := range order {
		mustOpen(t, r, id)
		r.Record(id, 3, 0, []byte(fmt.Sprintf("r%d-3", id)))
		r.Record(id, 1, 0, []byte(fmt.Sprintf("r%d-1", id)))
		r.Record(id, 2, 0, []byte(fmt.Sprintf("r%d-2", id)))
		r.Ack(id, 2)
	}
	return r
}

func encode(t testing.TB, r *Registry) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := r.WriteTo(&b)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(b.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, b.Len())
	}
	return b.Bytes()
}

func TestCloneIsolation(t *testing.T) {
	orig := buildRegistry(t, []int64{1, 2, 3})
	before := encode(t, orig)
	c := orig.Clone()

	// Mutating the original leaves the clone as it was.
	mustOpen(t, orig, 4)
	orig.Close(1)
	orig.Record(2, 10, 0, []byte("new"))
	orig.Ack(3, 3)
	if got := encode(t, c); !bytes.Equal(got, before) {
		t.Fatal("clone changed when the original was mutated")
	}
	if _, _, ok := c.Reply(2, 10); ok {
		t.Fatal("clone sees a reply recorded on the original")
	}
	if _, _, ok := c.Reply(3, 2); !ok {
		t.Fatal("clone lost a reply acked on the original")
	}

	// Mutating the clone leaves the original as it is now.
	now := encode(t, orig)
	c.Close(2)
	mustOpen(t, c, 5)
	c.Record(3, 20, 0, []byte("clone"))
	c.Ack(1, 100)
	if got := encode(t, orig); !bytes.Equal(got, now) {
		t.Fatal("original changed when the clone was mutated")
	}
	// Clone of a clone, and further mutations after the clone on both sides.
	c2 := c.Clone()
	c.Record(3, 21, 0, []byte("c"))
	c2.Record(3, 21, 0, []byte("c2"))
	if a, _, _ := c.Reply(3, 21); string(a) != "c" {
		t.Fatalf("c sees %q", a)
	}
	if b, _, _ := c2.Reply(3, 21); string(b) != "c2" {
		t.Fatalf("c2 sees %q", b)
	}
	if _, _, ok := orig.Reply(3, 21); ok {
		t.Fatal("original sees a clone's reply")
	}
}

// TestCloneConcurrentEncode encodes a clone in another goroutine while the original
// keeps being mutated; -race catches sharing.
func TestCloneConcurrentEncode(t *testing.T) {
	r := NewRegistry()
	for id := int64(1); id <= 200; id++ {
		mustOpen(t, r, id)
		for xid := int64(1); xid <= 5; xid++ {
			r.Record(id, xid, 0, []byte("x"))
		}
	}
	for round := 0; round < 5; round++ {
		c := r.Clone()
		want := encode(t, c)
		var wg sync.WaitGroup
		var got []byte
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b bytes.Buffer
			if _, err := c.WriteTo(&b); err != nil {
				t.Error(err)
			}
			got = b.Bytes()
		}()
		for id := int64(1); id <= 200; id++ {
			switch id % 4 {
			case 0:
				r.Record(id, int64(10+round), 0, []byte("y"))
			case 1:
				r.Ack(id, int64(2+round))
			case 2:
				r.Close(id)
				mustOpen(t, r, id)
			case 3:
				mustOpen(t, r, 1000*int64(round+1)+id)
			}
		}
		wg.Wait()
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: concurrent encoding of the clone differs", round)
		}
	}
}

func TestWriteToDeterministic(t *testing.T) {
	a := buildRegistry(t, []int64{1, 2, 3, 4, 5})
	b := buildRegistry(t, []int64{5, 3, 1, 4, 2})
	// A third one reaching the same state through a detour and a clone.
	c := NewRegistry()
	mustOpen(t, c, 99)
	c = buildRegistry(t, []int64{4, 2}).Clone()
	for _, id := range []int64{5, 1, 3} {
		mustOpen(t, c, id)
		r := c.Clone() // forces copy-on-write on later changes
		_ = r
		c.Record(id, 1, 0, []byte(fmt.Sprintf("r%d-1", id)))
		c.Record(id, 2, 0, []byte(fmt.Sprintf("r%d-2", id)))
		c.Record(id, 3, 0, []byte(fmt.Sprintf("r%d-3", id)))
		c.Ack(id, 2)
	}
	ea, eb, ec := encode(t, a), encode(t, b), encode(t, c)
	if !bytes.Equal(ea, eb) || !bytes.Equal(ea, ec) {
		t.Fatal("same state, different bytes")
	}
	if !bytes.Equal(ea, encode(t, a)) {
		t.Fatal("encoding twice differs")
	}
}

func TestRoundTrip(t *testing.T) {
	r := buildRegistry(t, []int64{3, 1, 2})
	_ = r.Open(Info{ID: -5, TimeoutMs: -1}) // extremes survive too
	_ = r.Open(Info{ID: 1 << 62, TimeoutMs: 1 << 40, Password: []byte{}})
	r.Record(1<<62, 3, 0, bytes.Repeat([]byte{7}, 3*chunk+5)) // long reply, read in chunks
	r.Ack(-5, -10)
	enc := encode(t, r)

	for _, name := range []string{"bytes.Reader", "plain reader"} {
		t.Run(name, func(t *testing.T) {
			var rd io.Reader = bytes.NewReader(enc)
			if name == "plain reader" {
				rd = struct{ io.Reader }{rd} // hides io.ByteReader
			}
			got, err := ReadRegistry(rd)
			if err != nil {
				t.Fatalf("ReadRegistry: %v", err)
			}
			if !reflect.DeepEqual(got.List(), r.List()) {
				t.Fatalf("List differs:\n got %+v\nwant %+v", got.List(), r.List())
			}
			if !bytes.Equal(encode(t, got), enc) {
				t.Fatal("re-encoding differs")
			}
			if a, b := got.Acked(-5), r.Acked(-5); a != b {
				t.Fatalf("Acked = %d, want %d", a, b)
			}
			if rp, _, ok := got.Reply(1<<62, 3); !ok || len(rp) != 3*chunk+5 {
				t.Fatalf("long reply: %d bytes, %v", len(rp), ok)
			}
			// The decoded registry is fully usable.
			got.Record(1, 50, 0, []byte("z"))
			mustOpen(t, got, 77)
		})
	}
}

func TestReadRegistryStopsAtItsEnd(t *testing.T) {
	enc := encode(t, buildRegistry(t, []int64{1, 2}))
	tail := []byte("tree bytes follow")
	for _, name := range []string{"bytes.Reader", "plain reader"} {
		t.Run(name, func(t *testing.T) {
			var rd io.Reader = bytes.NewReader(append(append([]byte(nil), enc...), tail...))
			if name == "plain reader" {
				rd = struct{ io.Reader }{rd}
			}
			if _, err := ReadRegistry(rd); err != nil {
				t.Fatal(err)
			}
			rest := make([]byte, 100)
			n, _ := rd.Read(rest)
			if !bytes.Equal(rest[:n], tail) {
				t.Fatalf("after the registry: %q, want %q", rest[:n], tail)
			}
		})
	}
}

func TestReadRegistryRejects(t *testing.T) {
	valid := encode(t, buildRegistry(t, []int64{1, 2, 3}))

	for n := 0; n < len(valid); n++ {
		if _, err := ReadRegistry(bytes.NewReader(valid[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: err = %v, want ErrCorrupt", n, err)
		}
	}
	for i := range valid {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			b := append([]byte(nil), valid...)
			b[i] ^= flip
			if _, err := ReadRegistry(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d ^ %#x: err = %v, want ErrCorrupt", i, flip, err)
			}
		}
	}

	// Structural violations, with a valid checksum so the structure check is what fires.
	// Version 1's layout (no owners), which ReadRegistry still reads.
	hdr := func(rest ...byte) []byte { return withCRC(append(magicV1[:len(magicV1):len(magicV1)], rest...)) }
	hdr2 := func(rest ...byte) []byte { return withCRC(append(magicV2[:len(magicV2):len(magicV2)], rest...)) }
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"bad magic", withCRC([]byte("XDSR\x01\x00"))},
		{"bad version", withCRC([]byte("CDSR\x03\x00"))},
		{"owner too long", hdr2(1, 2, 2, 0, 0xff, 0x01)},
		{"owner truncated", hdr2(1, 2, 2, 0, 4, 's')},
		{"huge count, no data", hdr(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{"varint overflow", hdr(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02)},
		{"non-minimal varint", hdr(0x80, 0x00)},
		{"password too long", hdr(1, 2, 2, MaxPasswordLen+1)},
		{"huge reply length", hdr(1, 2, 2, 0, 0, 1, 2, 0xff, 0xff, 0xff, 0xff, 0x0f)},
		{"too many replies", hdr(1, 2, 2, 0, 0, 0x81, 0x08)}, // 1025
		{"sessions out of order", hdr(2, 4, 2, 0, 0, 0, 2, 2, 0, 0, 0)},
		{"duplicate session", hdr(2, 2, 2, 0, 0, 0, 2, 2, 0, 0, 0)},
		{"reply below floor", hdr(1, 2, 2, 0, 4, 1, 2, 0)},
		{"replies out of order", hdr(1, 2, 2, 0, 0, 2, 4, 0, 2, 0)},
		{"missing checksum", append(magicV1[:len(magicV1):len(magicV1)], 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadRegistry(bytes.NewReader(tc.b)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
	// Sanity: the helper makes acceptable input when the structure is right.
	if _, err := ReadRegistry(bytes.NewReader(hdr(1, 2, 2, 0, 0, 1, 2, 1, 'x'))); err != nil {
		t.Fatalf("hand-made valid input: %v", err)
	}
}

func TestReadRegistryPassesReaderErrors(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := ReadRegistry(errReader{boom})
	if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want the reader's error", err)
	}
	_, err = buildRegistry(t, []int64{1}).WriteTo(errWriter{boom})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteTo err = %v, want the writer's error", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }

// TestSetOwner: the owner is set on open and by SetOwner, copied on write
// (a clone keeps the old one), and refused for an unknown session or an
// over-long name.
func TestSetOwner(t *testing.T) {
	r := NewRegistry()
	if err := r.Open(Info{ID: 1, TimeoutMs: 2, Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	c := r.Clone()
	if err := r.SetOwner(1, "b"); err != nil {
		t.Fatal(err)
	}
	if info, _ := r.Get(1); info.Owner != "b" {
		t.Fatalf("owner %q, want b", info.Owner)
	}
	if info, _ := c.Get(1); info.Owner != "a" {
		t.Fatalf("the clone's owner %q, want a", info.Owner)
	}
	if err := r.SetOwner(2, "b"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("SetOwner of an unknown session: %v", err)
	}
	long := strings.Repeat("x", MaxOwnerLen+1)
	if err := r.SetOwner(1, long); err == nil {
		t.Fatal("an owner over MaxOwnerLen accepted")
	}
	if err := r.Open(Info{ID: 3, Owner: long}); err == nil {
		t.Fatal("a session opened with an owner over MaxOwnerLen")
	}
}

// TestOwner: Owner reports the owner of an open session, and false for
// one that is not open.
func TestOwner(t *testing.T) {
	r := NewRegistry()
	if err := r.Open(Info{ID: 7, TimeoutMs: 4000, Password: []byte("pw"), Owner: "2"}); err != nil {
		t.Fatal(err)
	}
	if o, ok := r.Owner(7); !ok || o != "2" {
		t.Fatalf("Owner(7) = %q, %v; want 2, true", o, ok)
	}
	if err := r.SetOwner(7, "3"); err != nil {
		t.Fatal(err)
	}
	if o, ok := r.Owner(7); !ok || o != "3" {
		t.Fatalf("Owner(7) after SetOwner = %q, %v; want 3, true", o, ok)
	}
	r.Close(7)
	if _, ok := r.Owner(7); ok {
		t.Fatal("Owner of a closed session reports it open")
	}
}
