package session

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestLockDelays: records are kept by path (a record of the same path
// replaced), due in (until, path) order, independent across a Clone, and
// bounded in their path.
func TestLockDelays(t *testing.T) {
	r := NewRegistry()
	a := LockDelay{Path: "/locks/a/x-0001", Session: 7, Until: 300}
	b := LockDelay{Path: "/locks/b/x-0002", Session: 7, Until: 100}
	c := LockDelay{Path: "/locks/c/x-0003", Session: 9, Until: 100}
	for _, d := range []LockDelay{a, b, c} {
		if err := r.AddLockDelay(d); err != nil {
			t.Fatal(err)
		}
	}
	clone := r.Clone()
	steps := []struct {
		name    string
		do      func()
		due     int64
		wantDue []LockDelay
		wantLen int
	}{
		{"none due yet", func() {}, 99, nil, 3},
		{"earliest first, then by path", func() {}, 100, []LockDelay{b, c}, 3},
		{"all due", func() {}, 1000, []LockDelay{b, c, a}, 3},
		{"removed", func() {
			if !r.RemoveLockDelay(b.Path) || r.RemoveLockDelay(b.Path) {
				t.Fatal("RemoveLockDelay")
			}
		}, 1000, []LockDelay{c, a}, 2},
		{"replaced", func() {
			if err := r.AddLockDelay(LockDelay{Path: a.Path, Session: 8, Until: 50}); err != nil {
				t.Fatal(err)
			}
		}, 60, []LockDelay{{Path: a.Path, Session: 8, Until: 50}}, 2},
	}
	for _, s := range steps {
		s.do()
		if got := r.LockDelaysDue(s.due, 10); !slices.Equal(got, s.wantDue) {
			t.Errorf("%s: due at %d: %v, want %v", s.name, s.due, got, s.wantDue)
		}
		if r.LockDelays() != s.wantLen {
			t.Errorf("%s: %d records, want %d", s.name, r.LockDelays(), s.wantLen)
		}
	}
	if got := r.LockDelaysDue(1000, 1); len(got) != 1 || got[0].Path != a.Path {
		t.Errorf("limit 1: %v", got)
	}
	if got, ok := r.LockDelayOf(c.Path); !ok || got != c {
		t.Errorf("LockDelayOf(%s) = %v, %v", c.Path, got, ok)
	}
	if got := clone.ListLockDelays(); !slices.Equal(got, []LockDelay{a, b, c}) {
		t.Errorf("the clone sees %v", got)
	}
	for _, bad := range []string{"", "/" + strings.Repeat("x", MaxLockDelayPathLen)} {
		if err := r.AddLockDelay(LockDelay{Path: bad, Session: 1}); err == nil {
			t.Errorf("AddLockDelay of a %d-byte path: no error", len(bad))
		}
	}
	back, err := ReadRegistry(bytes.NewReader(encode(t, r)))
	if err != nil || !slices.Equal(back.ListLockDelays(), r.ListLockDelays()) {
		t.Fatalf("round trip: %v, %v", back.ListLockDelays(), err)
	}
}

// TestLockDelayEncoding pins the lock-delays' part of format version 4: a
// registry with a lock-delay and nothing else of level 2 is written in
// version 4, and records out of order or with an empty path are refused.
func TestLockDelayEncoding(t *testing.T) {
	r := NewRegistry()
	if err := r.AddLockDelay(LockDelay{Path: "/l/b", Session: 3, Until: 64}); err != nil {
		t.Fatal(err)
	}
	if err := r.AddLockDelay(LockDelay{Path: "/l/a", Session: -1, Until: 1}); err != nil {
		t.Fatal(err)
	}
	got := encode(t, r)
	want := withCRC([]byte{'C', 'D', 'S', 'R', 4, 0, 2, 4, '/', 'l', '/', 'a', 1, 2, 4, '/', 'l', '/', 'b', 6, 0x80, 1})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x, want %x", got, want)
	}
	back, err := ReadRegistry(bytes.NewReader(got))
	if err != nil || !slices.Equal(back.ListLockDelays(), r.ListLockDelays()) {
		t.Fatalf("round trip: %v, %v", back.ListLockDelays(), err)
	}
	for name, b := range map[string][]byte{
		"out of order":       {'C', 'D', 'S', 'R', 4, 0, 2, 4, '/', 'l', '/', 'b', 6, 0x80, 1, 4, '/', 'l', '/', 'a', 1, 2},
		"repeated":           {'C', 'D', 'S', 'R', 4, 0, 2, 4, '/', 'l', '/', 'a', 1, 2, 4, '/', 'l', '/', 'a', 1, 2},
		"empty path":         {'C', 'D', 'S', 'R', 4, 0, 1, 0, 1, 2},
		"nothing of level 2": {'C', 'D', 'S', 'R', 4, 0, 0},
		"truncated":          {'C', 'D', 'S', 'R', 4, 0, 1, 4, '/', 'l'},
	} {
		if _, err := ReadRegistry(bytes.NewReader(withCRC(b))); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Without lock-delays (nor epochs or digests) the registry is written
	// as before, in version 2.
	r.RemoveLockDelay("/l/a")
	r.RemoveLockDelay("/l/b")
	if got := encode(t, r); got[4] != 2 {
		t.Fatalf("an empty registry is written in version %d", got[4])
	}
}
