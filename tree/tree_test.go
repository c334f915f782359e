package tree

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func txAt(zxid int64) *Tx { return &Tx{Zxid: zxid, Now: 1000 * zxid} }

func mustCreate(t testing.TB, tr *Tree, c Create, tx *Tx) (string, Stat) {
	t.Helper()
	p, st, err := tr.Create(c, tx)
	if err != nil {
		t.Fatalf("Create(%+v): %v", c, err)
	}
	return p, st
}

func mustStat(t testing.TB, tr *Tree, path string) Stat {
	t.Helper()
	st, err := tr.Exists(path)
	if err != nil {
		t.Fatalf("Exists(%q): %v", path, err)
	}
	return st
}

// dump renders the whole state, indexes included, for comparisons.
func dump(tr *Tree) string {
	var b strings.Builder
	tr.nodes.Ascend(func(r rec) bool {
		fmt.Fprintf(&b, "%q %+v seq=%d data=%q acl=%v\n", pathOf(r.key()), tr.stat(r), r.node().seq, r.data(), tr.aclOf(r))
		return true
	})
	tr.eph.Ascend(func(e ephItem) bool {
		fmt.Fprintf(&b, "eph %d %q\n", e.owner, e.path)
		return true
	})
	tr.reap.Ascend(func(p string) bool {
		fmt.Fprintf(&b, "reap %q\n", p)
		return true
	})
	tr.acls.byRef.Ascend(func(a aclItem) bool {
		fmt.Fprintf(&b, "acl %v aversion %d refs %d\n", a.e.acl, a.e.aversion, a.refs)
		return true
	})
	fmt.Fprintf(&b, "max %d\n", tr.maxData)
	return b.String()
}

func TestNew(t *testing.T) {
	tr := New(Options{})
	if tr.Len() != 1 {
		t.Fatalf("Len = %d", tr.Len())
	}
	if tr.MaxDataSize() != DefaultMaxDataSize {
		t.Fatalf("MaxDataSize = %d", tr.MaxDataSize())
	}
	if New(Options{MaxDataSize: 10}).MaxDataSize() != 10 {
		t.Fatal("MaxDataSize option ignored")
	}
	data, st, err := tr.Get("/")
	if err != nil || data == nil || len(data) != 0 || st != (Stat{}) { // empty, not null, as ZooKeeper's root
		t.Fatalf("Get(/) = %q, %+v, %v", data, st, err)
	}
	kids, st, err := tr.Children("/")
	if err != nil || len(kids) != 0 || st != (Stat{}) {
		t.Fatalf("Children(/) = %q, %+v, %v", kids, st, err)
	}
}

func TestValidatePath(t *testing.T) {
	valid := []string{
		"/", "/a", "/a/b", "/a.b", "/.a", "/a.", "/...", "/a/.../b", "/ä/日本",
		"/a b", "/\u00a0", "/\uf900", "/\uffef", "/-0000000001", "/zookeeper",
	}
	invalid := []string{
		"", "a", "a/b", "/a/", "//", "/a//b", "/.", "/..", "/a/.", "/a/..", "/./a", "/../a",
		"/a\x00b", "/\x01", "/\x1f", "/\x7f", "/\u0080", "/\u009f", "/\ud7ff\ue000",
		"/\uf8ff", "/\ufff0", "/\uffff", "/\U0001F600", "/\xff", "/a\xc3", "/\xed\xa0\x80",
		"/" + strings.Repeat("x", MaxPathLength),
	}
	for _, p := range valid {
		if err := ValidatePath(p); err != nil {
			t.Errorf("ValidatePath(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range invalid {
		err := ValidatePath(p)
		if !errors.Is(err, ErrBadArguments) {
			t.Errorf("ValidatePath(%q) = %v, want ErrBadArguments", p, err)
		}
	}
	// "/\ud7ff\ue000": U+D7FF is fine but U+E000 is in the private use area.
	if err := ValidatePath("/\ud7ff"); err != nil {
		t.Errorf("U+D7FF rejected: %v", err)
	}
	if err := ValidatePath("/" + strings.Repeat("x", MaxPathLength-1)); err != nil {
		t.Errorf("max length path rejected: %v", err)
	}
	if err := ValidatePath("/a/"); err == nil || !strings.Contains(err.Error(), "end with /") {
		t.Errorf("error does not give the reason: %v", err)
	}
}

func TestCreateErrors(t *testing.T) {
	tr := New(Options{MaxDataSize: 8})
	mustCreate(t, tr, Create{Path: "/p"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/e", Kind: Ephemeral, Owner: 7}, txAt(2))
	before := dump(tr)
	tests := []struct {
		name string
		c    Create
		want error
	}{
		{"empty path", Create{Path: ""}, ErrBadArguments},
		{"relative", Create{Path: "p"}, ErrBadArguments},
		{"trailing slash", Create{Path: "/p/"}, ErrBadArguments},
		{"dot", Create{Path: "/p/."}, ErrBadArguments},
		{"root", Create{Path: "/"}, ErrNodeExists},
		{"exists", Create{Path: "/p"}, ErrNodeExists},
		{"no parent", Create{Path: "/x/y"}, ErrNoNode},
		{"no parent seq", Create{Path: "/x/y", Sequential: true}, ErrNoNode},
		{"ephemeral parent", Create{Path: "/e/c"}, ErrNoChildrenForEphemerals},
		{"ephemeral parent seq", Create{Path: "/e/", Sequential: true}, ErrNoChildrenForEphemerals},
		{"ephemeral child of ephemeral", Create{Path: "/e/c", Kind: Ephemeral, Owner: 7}, ErrNoChildrenForEphemerals},
		{"data too large", Create{Path: "/q", Data: make([]byte, 9)}, ErrBadArguments},
		{"ephemeral without owner", Create{Path: "/q", Kind: Ephemeral}, ErrBadArguments},
		{"persistent with owner", Create{Path: "/q", Owner: 1}, ErrBadArguments},
		{"container with owner", Create{Path: "/q", Kind: Container, Owner: 1}, ErrBadArguments},
		{"ttl with owner", Create{Path: "/q", Kind: TTL, TTL: 5, Owner: 1}, ErrBadArguments},
		{"ttl zero", Create{Path: "/q", Kind: TTL}, ErrBadArguments},
		{"ttl negative", Create{Path: "/q", Kind: TTL, TTL: -1}, ErrBadArguments},
		{"ttl 2^40", Create{Path: "/q", Kind: TTL, TTL: 1 << 40}, ErrBadArguments},
		{"persistent with ttl", Create{Path: "/q", TTL: 5}, ErrBadArguments},
		{"ephemeral with ttl", Create{Path: "/q", Kind: Ephemeral, Owner: 1, TTL: 5}, ErrBadArguments},
		{"unknown kind", Create{Path: "/q", Kind: 9}, ErrBadArguments},
		{"seq bad prefix", Create{Path: "/p//", Sequential: true}, ErrBadArguments},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tx := txAt(10)
			p, st, err := tr.Create(tc.c, tx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if p != "" || st != (Stat{}) || len(tx.Events) != 0 {
				t.Fatalf("failed create returned %q %+v events %v", p, st, tx.Events)
			}
			if dump(tr) != before {
				t.Fatal("failed create changed the tree")
			}
		})
	}
	// Boundary values that are valid.
	mustCreate(t, tr, Create{Path: "/ttl1", Kind: TTL, TTL: 1}, txAt(11))
	mustCreate(t, tr, Create{Path: "/ttlmax", Kind: TTL, TTL: MaxTTL}, txAt(12))
	mustCreate(t, tr, Create{Path: "/full", Data: make([]byte, 8)}, txAt(13))
}

func TestCreateStat(t *testing.T) {
	tr := New(Options{})
	p, st := mustCreate(t, tr, Create{Path: "/a", Data: []byte("hello")}, &Tx{Zxid: 5, Now: 500})
	want := Stat{Czxid: 5, Mzxid: 5, Pzxid: 5, Ctime: 500, Mtime: 500, DataLength: 5}
	if p != "/a" || st != want {
		t.Fatalf("Create = %q %+v, want %+v", p, st, want)
	}
	if got := mustStat(t, tr, "/a"); got != want {
		t.Fatalf("Exists = %+v", got)
	}
	root := mustStat(t, tr, "/")
	if root.Cversion != 1 || root.NumChildren != 1 || root.Pzxid != 5 || root.Mzxid != 0 || root.Version != 0 {
		t.Fatalf("root after create: %+v", root)
	}
	_, st = mustCreate(t, tr, Create{Path: "/a/e", Kind: Ephemeral, Owner: 42}, &Tx{Zxid: 6, Now: 600})
	if st.EphemeralOwner != 42 || st.Kind != Ephemeral || st.TTL != 0 || st.DataLength != 0 {
		t.Fatalf("ephemeral stat %+v", st)
	}
	_, st = mustCreate(t, tr, Create{Path: "/a/t", Kind: TTL, TTL: 99}, &Tx{Zxid: 7, Now: 700})
	if st.EphemeralOwner != 0 || st.Kind != TTL || st.TTL != 99 {
		t.Fatalf("ttl stat %+v", st)
	}
	_, st = mustCreate(t, tr, Create{Path: "/a/c", Kind: Container}, &Tx{Zxid: 8, Now: 800})
	if st.EphemeralOwner != 0 || st.Kind != Container || st.TTL != 0 {
		t.Fatalf("container stat %+v", st)
	}
	a := mustStat(t, tr, "/a")
	wantA := Stat{Czxid: 5, Mzxid: 5, Pzxid: 8, Ctime: 500, Mtime: 500, Cversion: 3, NumChildren: 3, DataLength: 5}
	if a != wantA {
		t.Fatalf("/a = %+v, want %+v", a, wantA)
	}
	// The tree keeps its own copy of the data.
	buf := []byte("xyz")
	mustCreate(t, tr, Create{Path: "/b", Data: buf}, txAt(9))
	buf[0] = 'Q'
	if d, _, _ := tr.Get("/b"); string(d) != "xyz" {
		t.Fatalf("data aliased caller's slice: %q", d)
	}
	if tr.Len() != 6 {
		t.Fatalf("Len = %d", tr.Len())
	}
}

func TestDelete(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/a"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/a/b"}, txAt(2))
	if _, err := tr.SetData("/a/b", []byte("x"), -1, txAt(3)); err != nil {
		t.Fatal(err)
	}
	before := dump(tr)
	tests := []struct {
		name    string
		path    string
		version int32
		want    error
	}{
		{"invalid", "/a/", -1, ErrBadArguments},
		{"root", "/", -1, ErrBadArguments},
		{"no node", "/x", -1, ErrNoNode},
		{"bad version", "/a/b", 0, ErrBadVersion},
		{"bad version 2", "/a/b", 2, ErrBadVersion},
		{"not empty", "/a", -1, ErrNotEmpty},
		{"not empty with version", "/a", 0, ErrNotEmpty},
	}
	for _, tc := range tests {
		tx := txAt(4)
		err := tr.Delete(tc.path, tc.version, tx)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if len(tx.Events) != 0 || dump(tr) != before {
			t.Errorf("%s: failed delete changed something", tc.name)
		}
	}
	tx := &Tx{Zxid: 9, Now: 9000}
	if err := tr.Delete("/a/b", 1, tx); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Exists("/a/b"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Exists after delete: %v", err)
	}
	a := mustStat(t, tr, "/a")
	want := Stat{Czxid: 1, Mzxid: 1, Pzxid: 9, Ctime: 1000, Mtime: 1000, Cversion: 2, NumChildren: 0}
	if a != want {
		t.Fatalf("/a = %+v, want %+v", a, want)
	}
	wantEv := []Event{{Type: EventNodeDeleted, Path: "/a/b", Zxid: 9}, {Type: EventNodeChildrenChanged, Path: "/a", Zxid: 9}}
	if !reflect.DeepEqual(withoutACL(tx.Events), wantEv) {
		t.Fatalf("events %v", tx.Events)
	}
	if err := tr.Delete("/a", -1, txAt(10)); err != nil {
		t.Fatal(err)
	}
	root := mustStat(t, tr, "/")
	if root.Cversion != 2 || root.NumChildren != 0 || root.Pzxid != 10 {
		t.Fatalf("root %+v", root)
	}
	if tr.Len() != 1 {
		t.Fatalf("Len = %d", tr.Len())
	}
}

func TestSetData(t *testing.T) {
	tr := New(Options{MaxDataSize: 4})
	mustCreate(t, tr, Create{Path: "/a", Data: []byte("1")}, &Tx{Zxid: 1, Now: 100})
	mustCreate(t, tr, Create{Path: "/a/c"}, &Tx{Zxid: 2, Now: 200})
	before := dump(tr)
	for _, tc := range []struct {
		name    string
		path    string
		data    []byte
		version int32
		want    error
	}{
		{"invalid", "a", nil, -1, ErrBadArguments},
		{"no node", "/b", nil, -1, ErrNoNode},
		{"bad version", "/a", nil, 1, ErrBadVersion},
		{"too large", "/a", []byte("12345"), -1, ErrBadArguments},
	} {
		tx := txAt(3)
		st, err := tr.SetData(tc.path, tc.data, tc.version, tx)
		if !errors.Is(err, tc.want) || st != (Stat{}) {
			t.Errorf("%s: %+v, %v; want %v", tc.name, st, err, tc.want)
		}
		if len(tx.Events) != 0 || dump(tr) != before {
			t.Errorf("%s: failed setData changed something", tc.name)
		}
	}
	old, _, _ := tr.Get("/a")
	tx := &Tx{Zxid: 5, Now: 555}
	st, err := tr.SetData("/a", []byte("abcd"), 0, tx)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{Czxid: 1, Mzxid: 5, Pzxid: 2, Ctime: 100, Mtime: 555, Version: 1, Cversion: 1, NumChildren: 1, DataLength: 4}
	if st != want {
		t.Fatalf("SetData stat %+v, want %+v", st, want)
	}
	if string(old) != "1" {
		t.Fatalf("old slice mutated: %q", old)
	}
	if !reflect.DeepEqual(withoutACL(tx.Events), []Event{{Type: EventNodeDataChanged, Path: "/a", Zxid: 5}}) {
		t.Fatalf("events %v", tx.Events)
	}
	// The parent's pzxid and cversion are untouched by a child's data change.
	if _, err := tr.SetData("/a/c", []byte("x"), -1, txAt(6)); err != nil {
		t.Fatal(err)
	}
	if got := mustStat(t, tr, "/a"); got != want {
		t.Fatalf("parent changed by child setData: %+v", got)
	}
	st, err = tr.SetData("/a", nil, 1, txAt(7))
	if err != nil || st.Version != 2 || st.DataLength != 0 {
		t.Fatalf("%+v %v", st, err)
	}
	if d, _, _ := tr.Get("/a"); d != nil {
		t.Fatalf("empty data = %q", d)
	}
}

func TestVersionWraps(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/a"}, txAt(1))
	r := tr.lookup("/a")
	m := r.node()
	m.version = 1<<31 - 1
	tr.nodes.ReplaceOrInsert(r.with(&m))
	st, err := tr.SetData("/a", nil, 1<<31-1, txAt(2))
	if err != nil || st.Version != -1<<31 {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := tr.SetData("/a", nil, -1<<31, txAt(3)); err != nil {
		t.Fatal(err)
	}
}

func TestSequential(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/p"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/p/a"}, txAt(2))
	if err := tr.Delete("/p/a", -1, txAt(3)); err != nil {
		t.Fatal(err)
	}
	p, _ := mustCreate(t, tr, Create{Path: "/p/s-", Sequential: true}, txAt(4))
	if p != "/p/s-0000000001" {
		t.Fatalf("got %q", p)
	}
	if st := mustStat(t, tr, "/p"); st.Cversion != 3 {
		t.Fatalf("cversion %d", st.Cversion)
	}
	// Failed creates do not advance the counter.
	mustCreate(t, tr, Create{Path: "/p/x"}, txAt(5))
	if _, _, err := tr.Create(Create{Path: "/p/x"}, txAt(6)); !errors.Is(err, ErrNodeExists) {
		t.Fatal(err)
	}
	if _, _, err := tr.Create(Create{Path: "/p/s-", Sequential: true, Kind: TTL}, txAt(6)); !errors.Is(err, ErrBadArguments) {
		t.Fatal(err)
	}
	if _, _, err := tr.Create(Create{Path: "/p/x/", Sequential: true}, txAt(6)); err != nil {
		t.Fatal(err) // /p/x/0000000000: a different parent
	}
	p, _ = mustCreate(t, tr, Create{Path: "/p/", Sequential: true}, txAt(7))
	if p != "/p/0000000003" {
		t.Fatalf("got %q", p)
	}
	// A name taken by hand makes the sequential create fail, without advancing.
	mustCreate(t, tr, Create{Path: "/p/0000000005"}, txAt(8))
	if _, _, err := tr.Create(Create{Path: "/p/", Sequential: true}, txAt(9)); !errors.Is(err, ErrNodeExists) {
		t.Fatalf("want NodeExists, got %v", err)
	}
	p, _ = mustCreate(t, tr, Create{Path: "/p/s", Sequential: true, Kind: Ephemeral, Owner: 3}, txAt(10))
	if p != "/p/s0000000005" {
		t.Fatalf("got %q", p)
	}
	p, _ = mustCreate(t, tr, Create{Path: "/p/t", Sequential: true, Kind: TTL, TTL: 10}, txAt(11))
	if p != "/p/t0000000006" {
		t.Fatalf("got %q", p)
	}
	// Re-creating the parent restarts the count.
	for _, name := range []string{"/p/x/0000000000", "/p/x", "/p/s-0000000001", "/p/0000000003", "/p/0000000005", "/p/s0000000005", "/p/t0000000006"} {
		if err := tr.Delete(name, -1, txAt(12)); err != nil {
			t.Fatal(name, err)
		}
	}
	if err := tr.Delete("/p", -1, txAt(13)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, tr, Create{Path: "/p"}, txAt(14))
	p, _ = mustCreate(t, tr, Create{Path: "/p/", Sequential: true}, txAt(15))
	if p != "/p/0000000000" {
		t.Fatalf("got %q", p)
	}
	// Under the root.
	p, _ = mustCreate(t, tr, Create{Path: "/", Sequential: true}, txAt(16))
	if p != "/0000000002" {
		t.Fatalf("got %q", p)
	}
	p, _ = mustCreate(t, tr, Create{Path: "/r", Sequential: true}, txAt(17))
	if p != "/r0000000003" {
		t.Fatalf("got %q", p)
	}
	// Path of a sequential prefix is validated with a digit appended.
	for _, bad := range []string{"/p//", "p", "", "/p/\x00"} {
		if _, _, err := tr.Create(Create{Path: bad, Sequential: true}, txAt(18)); !errors.Is(err, ErrBadArguments) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// "/p/." + digits is a fine name.
	if p, _ = mustCreate(t, tr, Create{Path: "/p/.", Sequential: true}, txAt(19)); p != "/p/.0000000001" {
		t.Fatalf("got %q", p)
	}
}

func TestChildren(t *testing.T) {
	tr := New(Options{})
	names := []string{"b", "a", "B", "a0", "a-", "é", "~", "z", "0", "aa"}
	mustCreate(t, tr, Create{Path: "/p"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/p0"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/p-"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/p0/x"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/p-/x"}, txAt(1))
	for i, n := range names {
		mustCreate(t, tr, Create{Path: "/p/" + n}, txAt(int64(i+2)))
		mustCreate(t, tr, Create{Path: "/p/" + n + "/deeper"}, txAt(int64(i+2)))
	}
	got, st, err := tr.Children("/p")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0", "B", "a", "a-", "a0", "aa", "b", "z", "~", "é"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Children = %q, want %q", got, want)
	}
	if st.NumChildren != int32(len(names)) {
		t.Fatalf("NumChildren %d", st.NumChildren)
	}
	got, _, _ = tr.Children("/")
	if !reflect.DeepEqual(got, []string{"p", "p-", "p0"}) {
		t.Fatalf("root children %q", got)
	}
	got, _, _ = tr.Children("/p/a")
	if !reflect.DeepEqual(got, []string{"deeper"}) {
		t.Fatalf("/p/a children %q", got)
	}
	if got, _, err := tr.Children("/p/a/deeper"); err != nil || len(got) != 0 {
		t.Fatalf("leaf children %q %v", got, err)
	}
	for _, missing := range []string{"/q", "", "p", "/p/", "//", "/p/a\x00b"} {
		if _, _, err := tr.Children(missing); !errors.Is(err, ErrNoNode) {
			t.Errorf("Children(%q) = %v", missing, err)
		}
		if _, _, err := tr.Get(missing); !errors.Is(err, ErrNoNode) {
			t.Errorf("Get(%q) = %v", missing, err)
		}
		if _, err := tr.Exists(missing); !errors.Is(err, ErrNoNode) {
			t.Errorf("Exists(%q) = %v", missing, err)
		}
	}
}

func TestEphemeralsOf(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/a"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/a/z", Kind: Ephemeral, Owner: 5}, txAt(2))
	mustCreate(t, tr, Create{Path: "/a/b", Kind: Ephemeral, Owner: 5}, txAt(3))
	mustCreate(t, tr, Create{Path: "/x", Kind: Ephemeral, Owner: 5}, txAt(4))
	mustCreate(t, tr, Create{Path: "/y", Kind: Ephemeral, Owner: 6}, txAt(5))
	mustCreate(t, tr, Create{Path: "/m", Kind: Ephemeral, Owner: -1}, txAt(6))
	mustCreate(t, tr, Create{Path: "/n", Kind: Ephemeral, Owner: 1<<63 - 1}, txAt(6))
	if got := tr.EphemeralsOf(5); !reflect.DeepEqual(got, []string{"/a/b", "/a/z", "/x"}) {
		t.Fatalf("EphemeralsOf(5) = %q", got)
	}
	if got := tr.EphemeralsOf(6); !reflect.DeepEqual(got, []string{"/y"}) {
		t.Fatalf("EphemeralsOf(6) = %q", got)
	}
	if got := tr.EphemeralsOf(-1); !reflect.DeepEqual(got, []string{"/m"}) {
		t.Fatalf("EphemeralsOf(-1) = %q", got)
	}
	if got := tr.EphemeralsOf(1<<63 - 1); !reflect.DeepEqual(got, []string{"/n"}) {
		t.Fatalf("EphemeralsOf(max) = %q", got)
	}
	if got := tr.EphemeralsOf(0); got != nil {
		t.Fatalf("EphemeralsOf(0) = %q", got)
	}
	if got := tr.EphemeralsOf(7); got != nil {
		t.Fatalf("EphemeralsOf(7) = %q", got)
	}
	// Closing session 5: delete all its ephemerals in one transaction.
	tx := txAt(10)
	for _, p := range tr.EphemeralsOf(5) {
		if err := tr.Delete(p, -1, tx); err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.EphemeralsOf(5); got != nil {
		t.Fatalf("after close: %q", got)
	}
	if a, r := mustStat(t, tr, "/a"), mustStat(t, tr, "/"); a.Pzxid != 10 || r.Pzxid != 10 || a.Cversion != 4 {
		t.Fatalf("parents %+v %+v", a, r)
	}
	if len(tx.Events) != 6 {
		t.Fatalf("events %v", tx.Events)
	}
}

// withoutACL returns the events with their ACLs dropped, for tests about
// what changed (the ACLs events carry have tests of their own).
func withoutACL(evs []Event) []Event {
	out := make([]Event, len(evs))
	for i, e := range evs {
		e.ACL = nil
		out[i] = e
	}
	return out
}

func TestEvents(t *testing.T) {
	tr := New(Options{})
	tx := &Tx{Zxid: 3}
	mustCreate(t, tr, Create{Path: "/a"}, tx)
	mustCreate(t, tr, Create{Path: "/a/", Sequential: true}, tx)
	if _, err := tr.SetData("/a", nil, -1, tx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete("/a/0000000000", -1, tx); err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Type: EventNodeCreated, Path: "/a", Zxid: 3},
		{Type: EventNodeChildrenChanged, Path: "/", Zxid: 3},
		{Type: EventNodeCreated, Path: "/a/0000000000", Zxid: 3},
		{Type: EventNodeChildrenChanged, Path: "/a", Zxid: 3},
		{Type: EventNodeDataChanged, Path: "/a", Zxid: 3},
		{Type: EventNodeDeleted, Path: "/a/0000000000", Zxid: 3},
		{Type: EventNodeChildrenChanged, Path: "/a", Zxid: 3},
	}
	if !reflect.DeepEqual(withoutACL(tx.Events), want) {
		t.Fatalf("events\n%v\nwant\n%v", tx.Events, want)
	}
}

func TestReap(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/c", Kind: Container}, &Tx{Zxid: 1, Now: 100})
	mustCreate(t, tr, Create{Path: "/t", Kind: TTL, TTL: 50}, &Tx{Zxid: 2, Now: 100})
	mustCreate(t, tr, Create{Path: "/p"}, &Tx{Zxid: 3, Now: 100})

	notReapable := func(err error) {
		t.Helper()
		if !errors.Is(err, ErrNotReapable) {
			t.Fatalf("err = %v, want ErrNotReapable", err)
		}
	}
	snapshot := dump(tr)
	// A container never used is kept.
	tx := &Tx{Zxid: 4, Now: 1 << 50}
	notReapable(tr.ReapContainer("/c", tx))
	notReapable(tr.ReapContainer("/p", tx))
	notReapable(tr.ReapContainer("/t", tx))
	notReapable(tr.ReapTTL("/c", tx))
	notReapable(tr.ReapTTL("/p", tx))
	err := tr.ReapTTL("/nope", tx)
	notReapable(err)
	if !errors.Is(err, ErrNoNode) {
		t.Fatalf("missing node: %v", err)
	}
	// TTL: Mtime+TTL < now; 150 is not past 150.
	notReapable(tr.ReapTTL("/t", &Tx{Zxid: 4, Now: 150}))
	if len(tx.Events) != 0 || dump(tr) != snapshot {
		t.Fatal("failed reap changed something")
	}
	if got, next := tr.ReapCandidates(150, "", 10); len(got) != 0 || next != "" {
		t.Fatalf("candidates at 150: %q %q", got, next)
	}
	if got, _ := tr.ReapCandidates(151, "", 10); !reflect.DeepEqual(got, []string{"/t"}) {
		t.Fatalf("candidates at 151: %q", got)
	}
	// setData keeps a TTL node alive; a child does too.
	if _, err := tr.SetData("/t", []byte("x"), -1, &Tx{Zxid: 5, Now: 140}); err != nil {
		t.Fatal(err)
	}
	notReapable(tr.ReapTTL("/t", &Tx{Zxid: 6, Now: 151}))
	mustCreate(t, tr, Create{Path: "/t/k"}, &Tx{Zxid: 7, Now: 160})
	notReapable(tr.ReapTTL("/t", &Tx{Zxid: 8, Now: 1000}))
	if got, _ := tr.ReapCandidates(1000, "", 10); len(got) != 0 {
		t.Fatalf("candidates: %q", got)
	}
	// Container: had a child and is empty again; setData does not save it.
	mustCreate(t, tr, Create{Path: "/c/k"}, &Tx{Zxid: 9, Now: 200})
	notReapable(tr.ReapContainer("/c", &Tx{Zxid: 10, Now: 200}))
	if err := tr.Delete("/c/k", -1, &Tx{Zxid: 11, Now: 200}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.SetData("/c", []byte("x"), -1, &Tx{Zxid: 12, Now: 200}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete("/t/k", -1, &Tx{Zxid: 13, Now: 200}); err != nil {
		t.Fatal(err)
	}
	if got, next := tr.ReapCandidates(201, "", 10); !reflect.DeepEqual(got, []string{"/c", "/t"}) || next != "" {
		t.Fatalf("candidates: %q %q", got, next)
	}
	tx = &Tx{Zxid: 14, Now: 201}
	if err := tr.ReapContainer("/c", tx); err != nil {
		t.Fatal(err)
	}
	if err := tr.ReapTTL("/t", tx); err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Type: EventNodeDeleted, Path: "/c", Zxid: 14}, {Type: EventNodeChildrenChanged, Path: "/", Zxid: 14},
		{Type: EventNodeDeleted, Path: "/t", Zxid: 14}, {Type: EventNodeChildrenChanged, Path: "/", Zxid: 14},
	}
	if !reflect.DeepEqual(withoutACL(tx.Events), want) {
		t.Fatalf("events %v", tx.Events)
	}
	if root := mustStat(t, tr, "/"); root.Pzxid != 14 || root.NumChildren != 1 {
		t.Fatalf("root %+v", root)
	}
	if got, next := tr.ReapCandidates(1<<50, "", 10); got != nil || next != "" {
		t.Fatalf("index not emptied: %q %q", got, next)
	}
	// Nested containers go one level per pass.
	mustCreate(t, tr, Create{Path: "/n", Kind: Container}, &Tx{Zxid: 15, Now: 300})
	mustCreate(t, tr, Create{Path: "/n/m", Kind: Container}, &Tx{Zxid: 15, Now: 300})
	mustCreate(t, tr, Create{Path: "/n/m/x"}, &Tx{Zxid: 15, Now: 300})
	if err := tr.Delete("/n/m/x", -1, &Tx{Zxid: 16, Now: 300}); err != nil {
		t.Fatal(err)
	}
	if got, _ := tr.ReapCandidates(300, "", 10); !reflect.DeepEqual(got, []string{"/n/m"}) {
		t.Fatalf("pass 1: %q", got)
	}
	if err := tr.ReapContainer("/n/m", &Tx{Zxid: 17, Now: 300}); err != nil {
		t.Fatal(err)
	}
	if got, _ := tr.ReapCandidates(300, "", 10); !reflect.DeepEqual(got, []string{"/n"}) {
		t.Fatalf("pass 2: %q", got)
	}
}

func TestReapCandidatesPaging(t *testing.T) {
	tr := New(Options{})
	var want []string
	for i := range 100 {
		p := fmt.Sprintf("/t%03d", i)
		mustCreate(t, tr, Create{Path: p, Kind: TTL, TTL: 1}, &Tx{Zxid: int64(i + 1), Now: 0})
		if i%7 == 0 {
			mustCreate(t, tr, Create{Path: p + "/kid"}, &Tx{Zxid: int64(i + 1), Now: 0})
		} else {
			want = append(want, p)
		}
		mustCreate(t, tr, Create{Path: fmt.Sprintf("/plain%03d", i)}, &Tx{Zxid: int64(i + 1), Now: 0})
	}
	var got []string
	after := ""
	calls := 0
	for {
		paths, next := tr.ReapCandidates(10, after, 3)
		calls++
		if len(paths) > 3 {
			t.Fatalf("limit exceeded: %q", paths)
		}
		for _, p := range paths {
			if p <= after {
				t.Fatalf("%q not after %q", p, after)
			}
		}
		got = append(got, paths...)
		if next == "" {
			break
		}
		after = next
		if calls > 100 {
			t.Fatal("no progress")
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	// Bounded work: with nothing reapable, one call looks at no more than 10*limit entries.
	paths, next := tr.ReapCandidates(0, "", 2)
	if len(paths) != 0 || next != "/t019" {
		t.Fatalf("got %q %q", paths, next)
	}
	if paths, next := tr.ReapCandidates(10, "/t099", 5); paths != nil || next != "" {
		t.Fatalf("past the end: %q %q", paths, next)
	}
	if paths, next := tr.ReapCandidates(10, "/t050", 0); paths != nil || next != "/t050" {
		t.Fatalf("limit 0: %q %q", paths, next)
	}
	// The cursor need not be an existing node.
	if paths, _ := tr.ReapCandidates(10, "/t0505", 1); !reflect.DeepEqual(paths, []string{"/t051"}) {
		t.Fatalf("after a missing path: %q", paths)
	}
}

func TestOptions(t *testing.T) {
	if New(Options{MaxDataSize: -5}).MaxDataSize() != DefaultMaxDataSize {
		t.Fatal("negative MaxDataSize")
	}
	tr := New(Options{})
	if _, _, err := tr.Create(Create{Path: "/a", Data: make([]byte, DefaultMaxDataSize)}, txAt(1)); err != nil {
		t.Fatal(err)
	}
	_, _, err := tr.Create(Create{Path: "/b", Data: make([]byte, DefaultMaxDataSize+1)}, txAt(2))
	if !errors.Is(err, ErrBadArguments) || !strings.Contains(err.Error(), fmt.Sprintf("data length %d exceeds limit %d", DefaultMaxDataSize+1, DefaultMaxDataSize)) {
		t.Fatal(err)
	}
}

func TestStrings(t *testing.T) {
	if OpCheck.String() != "check" || OpSetData.String() != "setData" || OpType(0).String() != "OpType(0)" {
		t.Fatal("OpType.String")
	}
	if OpCreate != 2 || OpDelete != 3 || OpCheck != 1 || OpSetData != 4 {
		t.Fatal("OpType values")
	}
}

func TestDescendants(t *testing.T) {
	tr := New(Options{})
	tx := &Tx{Zxid: 1}
	for _, p := range []string{"/a", "/a/b", "/a/b/c", "/a/d", "/ab", "/ab/x", "/z"} {
		if _, _, err := tr.Create(Create{Path: p}, tx); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		path string
		want int
	}{{"/", 7}, {"/a", 3}, {"/a/b", 1}, {"/a/b/c", 0}, {"/ab", 1}, {"/z", 0}} {
		got, err := tr.Descendants(c.path)
		if err != nil || got != c.want {
			t.Errorf("Descendants(%s) = %d, %v; want %d", c.path, got, err, c.want)
		}
	}
	if _, err := tr.Descendants("/nope"); !errors.Is(err, ErrNoNode) {
		t.Errorf("Descendants of an absent node: %v, want ErrNoNode", err)
	}
}

// TestApproximateDataSize: the size follows every write, rolled-back multis
// and snapshots included, and always equals a count over the whole tree.
func TestApproximateDataSize(t *testing.T) {
	tr := New(Options{})
	count := func() int64 {
		var n int64
		tr.nodes.Ascend(func(r rec) bool {
			n += int64(len(pathOf(r.key())) + len(r.data()))
			return true
		})
		return n
	}
	check := func(what string) {
		t.Helper()
		if got, want := tr.ApproximateDataSize(), count(); got != want {
			t.Fatalf("after %s: size %d, counted %d", what, got, want)
		}
	}
	check("New")
	tx := &Tx{Zxid: 1}
	mustDo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := tr.Create(Create{Path: "/a", Data: []byte("hello")}, tx)
	mustDo(err)
	_, _, err = tr.Create(Create{Path: "/a/b", Data: []byte("xy"), Kind: Ephemeral, Owner: 7}, tx)
	mustDo(err)
	check("creates")
	_, err = tr.SetData("/a", []byte("a much longer value"), -1, tx)
	mustDo(err)
	check("setData")
	_, err = tr.Multi([]Op{{Type: OpSetData, Path: "/a", Data: []byte("z")}, {Type: OpCreate, Path: "/nope/x"}}, tx)
	if err == nil {
		t.Fatal("the multi should fail")
	}
	check("a rolled-back multi")
	mustDo(tr.Delete("/a/b", -1, tx))
	check("delete")
	if tr.Ephemerals() != 0 {
		t.Fatalf("%d ephemerals after deleting the only one", tr.Ephemerals())
	}
	var buf bytes.Buffer
	if _, err := tr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	read, err := Read(&buf, Options{})
	mustDo(err)
	if read.ApproximateDataSize() != tr.ApproximateDataSize() {
		t.Fatalf("snapshot: size %d, want %d", read.ApproximateDataSize(), tr.ApproximateDataSize())
	}
}
