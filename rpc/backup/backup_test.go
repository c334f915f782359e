package backup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/rpc/apipb"
)

func sample(t testing.TB, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, &apipb.BackupHeader{Index: 42, Term: 3, Znodes: 7, ServerId: "2",
		Members: []*apipb.BackupMember{{Id: "1", PeerAddress: "127.0.0.1:2888", Voter: true}}})
	if err != nil {
		t.Fatal(err)
	}
	// The body in pieces, as a stream writes it.
	for len(body) > 0 {
		n := min(len(body), 3)
		if _, err := w.Write(body[:n]); err != nil {
			t.Fatal(err)
		}
		body = body[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	body := []byte("the state machine's snapshot")
	file := sample(t, body)
	info, r, err := Read(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("body %q, %v", got, err)
	}
	if info.Header.Index != 42 || info.Header.Term != 3 || info.Header.Znodes != 7 || len(info.Header.Members) != 1 ||
		info.Size != int64(len(file)) || info.BodySize != int64(len(body)) || info.Version != Version {
		t.Fatalf("info %+v", info)
	}
}

// TestRefused: a truncated file (cut anywhere), a changed byte (anywhere),
// another file, another version: each is refused with its sentinel.
func TestRefused(t *testing.T) {
	file := sample(t, bytes.Repeat([]byte("body"), 20))
	read := func(b []byte) error {
		_, _, err := Read(bytes.NewReader(b), int64(len(b)))
		return err
	}
	for n := 0; n < len(file); n++ {
		if err := read(file[:n]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("cut to %d of %d bytes: %v, want ErrTruncated", n, len(file), err)
		}
	}
	for i := 16; i < len(file); i++ {
		bad := append([]byte(nil), file...)
		bad[i] ^= 0x20
		err := read(bad)
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("byte %d changed: %v, want ErrCorrupt (or ErrTruncated, for the end marker)", i, err)
		}
	}
	if err := read([]byte("hello, this is some other file entirely")); !errors.Is(err, ErrNotBackup) {
		t.Fatalf("another file: %v", err)
	}
	v2 := append([]byte(nil), file...)
	binary.BigEndian.PutUint32(v2[8:], 2)
	if err := read(v2); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 2: %v", err)
	}
}

// FuzzRead: no input makes Read panic, and what it accepts is what a
// Writer wrote.
func FuzzRead(f *testing.F) {
	f.Add(sample(f, []byte("x")))
	f.Add([]byte("COORDBAK"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, body, err := Read(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		got, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, info.Header)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(got)
		w.Close()
		again, _, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil || !proto.Equal(again.Header, info.Header) {
			t.Fatalf("re-encoding an accepted file: %v", err)
		}
	})
}
