package tree

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// refValidatePath is ZooKeeper's PathUtils.validatePath transcribed
// literally: it works on UTF-16 code units, as Java does.
func refValidatePath(s string) bool {
	if len(s) > MaxPathLength || !utf8.ValidString(s) {
		return false
	}
	chars := utf16.Encode([]rune(s))
	if len(chars) == 0 || chars[0] != '/' {
		return false
	}
	if len(chars) == 1 {
		return true
	}
	if chars[len(chars)-1] == '/' {
		return false
	}
	lastc := uint16('/')
	for i := 1; i < len(chars); lastc, i = chars[i], i+1 {
		c := chars[i]
		switch {
		case c == 0:
			return false
		case c == '/' && lastc == '/':
			return false
		case c == '.' && lastc == '.':
			if chars[i-2] == '/' && (i+1 == len(chars) || chars[i+1] == '/') {
				return false
			}
		case c == '.':
			if chars[i-1] == '/' && (i+1 == len(chars) || chars[i+1] == '/') {
				return false
			}
		case c > 0 && c <= 0x1f, c >= 0x7f && c <= 0x9f, c >= 0xd800 && c <= 0xf8ff, c >= 0xfff0:
			return false
		}
	}
	return true
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{
		"/", "", "a", "/a", "/a/", "//", "/a/b", "/.", "/..", "/...", "/a/./b", "/a/../b",
		"/.a", "/a.", "/a\x00", "/\x7f", "/\u0085", "/\ud7ff", "/\ue000", "/\uf900", "/\ufff0",
		"/\U0001F600", "/\xff", "/p/..", "/日本語", "/a/b/c/d.e/..f",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidatePath(s)
		if want := refValidatePath(s); (err == nil) != want {
			t.Fatalf("ValidatePath(%q) = %v, reference says valid=%v", s, err, want)
		}
		if err != nil && !errors.Is(err, ErrBadArguments) {
			t.Fatalf("error %v does not wrap ErrBadArguments", err)
		}
		// A valid path can be created (given its parent) and found.
		if err == nil && s != "/" {
			tr := New(Options{})
			if _, _, err := tr.Create(Create{Path: s}, txAt(1)); err != nil && !errors.Is(err, ErrNoNode) {
				t.Fatalf("Create(%q): %v", s, err)
			} else if err == nil {
				if _, err := tr.Exists(s); err != nil {
					t.Fatalf("Exists(%q): %v", s, err)
				}
				kids, _, err := tr.Children(parentOf(s))
				if err != nil || len(kids) != 1 || parentOf(s)+"/"+kids[0] != s && "/"+kids[0] != s {
					t.Fatalf("Children(%q) = %q, %v", parentOf(s), kids, err)
				}
			}
		}
	})
}

// fuzzSnapshotSeeds returns valid snapshots to seed FuzzRead with.
func fuzzSnapshotSeeds(f *testing.F) [][]byte {
	seeds := [][]byte{snapshotBytes(f, New(Options{})), snapshotBytes(f, buildSample(f))}
	tr := New(Options{})
	tx := &Tx{Zxid: 1, Now: 2}
	mustCreate(f, tr, Create{Path: "/a", Kind: Container}, tx)
	mustCreate(f, tr, Create{Path: "/a/b", Kind: Ephemeral, Owner: 1}, tx)
	mustCreate(f, tr, Create{Path: "/t", Kind: TTL, TTL: 3, Data: []byte("d")}, tx)
	seeds = append(seeds, snapshotBytes(f, tr))
	// With ACLs: a version 2 snapshot.
	mustCreate(f, tr, Create{Path: "/r", ACL: []ACL{{Perms: PermRead, Scheme: "world", ID: "anyone"}}}, tx)
	mustCreate(f, tr, Create{Path: "/r/d", ACL: []ACL{{Perms: PermAll, Scheme: "digest", ID: "u:h"}, {Perms: PermRead, Scheme: "ip", ID: "10.0.0.0/8"}}}, tx)
	if _, err := tr.SetACL("/a", OpenACL(), -1, tx); err != nil {
		f.Fatal(err)
	}
	return append(seeds, snapshotBytes(f, tr))
}

func FuzzRead(f *testing.F) {
	for _, s := range fuzzSnapshotSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Add([]byte("garbage"), false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		if fix && len(data) >= headerLen+4 {
			// Repair magic, version, body length and checksum, so that
			// the fuzzer reaches the record decoder.
			data = append([]byte{}, data...)
			copy(data, snapMagic)
			if data[len(snapMagic)] != snapVersion {
				data[len(snapMagic)] = snapVersionV1
			}
			data = reseal(data)
		}
		r := bytes.NewReader(data)
		tr, err := Read(r, Options{MaxDataSize: 1 << 16})
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error %v does not wrap ErrBadSnapshot", err)
			}
			return
		}
		consumed := data[:len(data)-r.Len()]
		out := snapshotBytes(t, tr)
		if !bytes.Equal(out, consumed) {
			t.Fatalf("re-encoding differs from the input:\n%x\n%x", out, consumed)
		}
		tr2, err := Read(bytes.NewReader(out), Options{MaxDataSize: 1 << 16})
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if !bytes.Equal(snapshotBytes(t, tr2), out) || dump(tr2) != dump(tr) {
			t.Fatal("re-read differs")
		}
		// The indexes agree with the nodes.
		tr.nodes.Ascend(func(r rec) bool {
			p := pathOf(r.key())
			switch r.kind() {
			case Ephemeral:
				if !tr.eph.Has(ephItem{owner: r.node().aux, path: p}) {
					t.Fatalf("%q missing from the ephemeral index", p)
				}
			case Container, TTL:
				if !tr.reap.Has(p) {
					t.Fatalf("%q missing from the reap index", p)
				}
			}
			return true
		})
	})
}
