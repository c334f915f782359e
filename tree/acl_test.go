package tree

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"
)

// grant is an Authorizer whose writer holds perms on every node whose ACL
// names it (scheme "u", id = the writer) and whatever world:anyone grants;
// its Fixup expands the "auth" scheme to u:<writer>.
type grant struct{ who string }

func (g grant) Allowed(acl []ACL, perm Perms) bool {
	if len(acl) == 0 {
		return true
	}
	for _, a := range acl {
		if a.Perms&perm == 0 {
			continue
		}
		if a.Scheme == "world" && a.ID == "anyone" || a.Scheme == "u" && a.ID == g.who {
			return true
		}
	}
	return false
}

func (g grant) Fixup(acl []ACL) ([]ACL, error) {
	if len(acl) == 0 {
		return OpenACL(), nil // as the FSM's: a create from before ACLs
	}
	var out []ACL
	for _, a := range acl {
		switch a.Scheme {
		case "auth":
			out = append(out, ACL{Perms: a.Perms, Scheme: "u", ID: g.who})
		case "bad":
			return nil, fmt.Errorf("%w: bad scheme", ErrInvalidACL)
		default:
			out = append(out, a)
		}
	}
	return out, nil
}

func only(p Perms) []ACL { return []ACL{{Perms: p, Scheme: "world", ID: "anyone"}} }

func as(who string, z int64) *Tx { return &Tx{Zxid: z, Now: z, Auth: grant{who}} }

// TestPermissionEachWriteNeeds: every write is refused with ErrNoAuth when
// the writer lacks the one permission it needs on the node ZooKeeper checks
// (create and delete: the parent; setData, check, setACL: the node), and
// succeeds with that permission alone.
func TestPermissionEachWriteNeeds(t *testing.T) {
	type op struct {
		name string
		need Perms
		run  func(tr *Tree, tx *Tx) error
	}
	ops := []op{
		{"create", PermCreate, func(tr *Tree, tx *Tx) error {
			_, _, err := tr.Create(Create{Path: "/p/new"}, tx)
			return err
		}},
		{"create sequential", PermCreate, func(tr *Tree, tx *Tx) error {
			_, _, err := tr.Create(Create{Path: "/p/s-", Sequential: true}, tx)
			return err
		}},
		{"create ephemeral", PermCreate, func(tr *Tree, tx *Tx) error {
			_, _, err := tr.Create(Create{Path: "/p/e", Kind: Ephemeral, Owner: 5}, tx)
			return err
		}},
		{"delete", PermDelete, func(tr *Tree, tx *Tx) error { return tr.Delete("/p/child", -1, tx) }},
		{"setData", PermWrite, func(tr *Tree, tx *Tx) error {
			_, err := tr.SetData("/p", []byte("x"), -1, tx)
			return err
		}},
		{"setACL", PermAdmin, func(tr *Tree, tx *Tx) error {
			_, err := tr.SetACL("/p", only(PermAll), -1, tx)
			return err
		}},
		{"check", PermRead, func(tr *Tree, tx *Tx) error {
			_, err := tr.Multi([]Op{{Type: OpCheck, Path: "/p", Version: -1}}, tx)
			return err
		}},
		{"multi create", PermCreate, func(tr *Tree, tx *Tx) error {
			_, err := tr.Multi([]Op{{Type: OpCreate, Path: "/p/m"}}, tx)
			return err
		}},
		{"multi delete", PermDelete, func(tr *Tree, tx *Tx) error {
			_, err := tr.Multi([]Op{{Type: OpDelete, Path: "/p/child", Version: -1}}, tx)
			return err
		}},
		{"multi setData", PermWrite, func(tr *Tree, tx *Tx) error {
			_, err := tr.Multi([]Op{{Type: OpSetData, Path: "/p", Version: -1}}, tx)
			return err
		}},
	}
	for _, o := range ops {
		for _, p := range []Perms{PermRead, PermWrite, PermCreate, PermDelete, PermAdmin} {
			tr := New(Options{})
			mustCreate(t, tr, Create{Path: "/p"}, txAt(1))
			mustCreate(t, tr, Create{Path: "/p/child"}, txAt(2))
			if _, err := tr.SetACL("/p", only(p), -1, txAt(3)); err != nil {
				t.Fatal(err)
			}
			before := dump(tr)
			err := o.run(tr, as("x", 4))
			switch {
			case p == o.need && err != nil:
				t.Errorf("%s with %s: %v", o.name, p, err)
			case p != o.need && !errors.Is(err, ErrNoAuth):
				t.Errorf("%s with only %s: %v, want ErrNoAuth", o.name, p, err)
			case p != o.need && dump(tr) != before:
				t.Errorf("%s refused, yet the tree changed", o.name)
			}
		}
	}
}

// TestACLErrorOrder: the order in which ZooKeeper 3.8 reports errors when
// more than one applies.
func TestACLErrorOrder(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/r", ACL: only(PermRead)}, txAt(1))
	mustCreate(t, tr, Create{Path: "/d", ACL: only(PermDelete)}, txAt(1))
	mustCreate(t, tr, Create{Path: "/d/child"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/r/child"}, txAt(1))
	mustCreate(t, tr, Create{Path: "/a", ACL: only(PermAdmin)}, txAt(1))
	tx := as("x", 2)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"create: invalid ACL before no parent", errOf(tr.Create(Create{Path: "/none/x", ACL: []ACL{{Scheme: "bad"}}}, tx)), ErrInvalidACL},
		{"create: no parent before no auth", errOf(tr.Create(Create{Path: "/none/x"}, tx)), ErrNoNode},
		{"create: no auth before node exists", errOf(tr.Create(Create{Path: "/r/child"}, tx)), ErrNoAuth},
		{"create: bad path first", errOf(tr.Create(Create{Path: "/r//x", ACL: []ACL{{Scheme: "bad"}}}, tx)), ErrBadArguments},
		{"delete: no auth before no node", tr.Delete("/r/absent", -1, tx), ErrNoAuth},
		{"delete: no auth before bad version", tr.Delete("/r/child", 7, tx), ErrNoAuth},
		{"delete: with DELETE, no node", tr.Delete("/d/absent", -1, tx), ErrNoNode},
		{"delete: with DELETE, bad version", tr.Delete("/d/child", 7, tx), ErrBadVersion},
		{"delete: no parent", tr.Delete("/none/x", -1, tx), ErrNoNode},
		{"setData: no node", errOf2(tr.SetData("/absent", nil, -1, tx)), ErrNoNode},
		{"setData: no auth before bad version", errOf2(tr.SetData("/r", nil, 7, tx)), ErrNoAuth},
		{"setACL: invalid ACL before no node", errOf2(tr.SetACL("/absent", []ACL{{Scheme: "bad"}}, -1, tx)), ErrInvalidACL},
		{"setACL: no node", errOf2(tr.SetACL("/absent", only(PermAll), -1, tx)), ErrNoNode},
		{"setACL: no auth before bad version", errOf2(tr.SetACL("/r", only(PermAll), 7, tx)), ErrNoAuth},
		{"setACL: bad version", errOf2(tr.SetACL("/a", only(PermAll), 7, tx)), ErrBadVersion},
		{"check: no auth before bad version", errOf2(tr.Multi([]Op{{Type: OpCheck, Path: "/a", Version: 7}}, tx)), ErrNoAuth},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
}

func errOf(_ string, _ Stat, err error) error { return err }

func errOf2[T any](_ T, err error) error { return err }

// TestSetACL: setACL replaces the ACL, counts the aversion, checks it as a
// version, and the auth scheme is expanded by the Authorizer.
func TestSetACL(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/n"}, txAt(1))
	st, err := tr.SetACL("/n", []ACL{{Perms: PermAll, Scheme: "auth"}}, 0, as("alice", 2))
	if err != nil || st.Aversion != 1 {
		t.Fatalf("setACL: %+v %v", st, err)
	}
	acl, st, err := tr.GetACL("/n")
	if want := []ACL{{Perms: PermAll, Scheme: "u", ID: "alice"}}; err != nil || !reflect.DeepEqual(acl, want) || st.Aversion != 1 {
		t.Fatalf("getACL: %v %+v %v", acl, st, err)
	}
	if _, err := tr.SetACL("/n", only(PermAll), 0, as("alice", 3)); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("stale aversion: %v", err)
	}
	if _, err := tr.SetACL("/n", only(PermAll), 1, as("bob", 3)); !errors.Is(err, ErrNoAuth) {
		t.Fatalf("bob sets alice's ACL: %v", err)
	}
	if st, err := tr.SetACL("/n", OpenACL(), 1, as("alice", 3)); err != nil || st.Aversion != 2 {
		t.Fatalf("back to open: %+v %v", st, err)
	}
	// The aversion is part of the node's state: the open ACL with aversion
	// 2 is not the shared default.
	if got := mustStat(t, tr, "/n").Aversion; got != 2 || tr.ACLs() != 1 {
		t.Fatalf("aversion %d, %d interned ACLs", got, tr.ACLs())
	}
	// Data changes do not touch the aversion, and ACL changes no version.
	if st, err := tr.SetData("/n", []byte("x"), -1, txAt(4)); err != nil || st.Aversion != 2 || st.Version != 1 {
		t.Fatalf("setData: %+v %v", st, err)
	}
	if _, err := tr.SetACL("/n", []ACL{{Scheme: "bad"}}, -1, as("alice", 5)); !errors.Is(err, ErrInvalidACL) {
		t.Fatalf("invalid ACL: %v", err)
	}
}

// TestACLInterning: nodes with the same ACL and aversion share one entry,
// which goes with its last node; the open ACL costs no entry at all.
func TestACLInterning(t *testing.T) {
	tr := New(Options{})
	ro := only(PermRead)
	for i := 0; i < 100; i++ {
		mustCreate(t, tr, Create{Path: fmt.Sprintf("/n%d", i), ACL: ro}, txAt(1))
		mustCreate(t, tr, Create{Path: fmt.Sprintf("/o%d", i)}, txAt(1))
	}
	if tr.ACLs() != 1 {
		t.Fatalf("%d interned ACLs, want 1", tr.ACLs())
	}
	ro[0].Perms = PermAll // the caller's slice is not kept
	if acl, _ := tr.ACL("/n5"); acl[0].Perms != PermRead {
		t.Fatalf("ACL %v changed with the caller's slice", acl)
	}
	for i := 0; i < 100; i++ {
		if err := tr.Delete(fmt.Sprintf("/n%d", i), -1, txAt(2)); err != nil {
			t.Fatal(err)
		}
	}
	if tr.ACLs() != 0 || tr.Restricted() {
		t.Fatalf("%d interned ACLs after deleting every user", tr.ACLs())
	}
}

// TestACLCloneIndependent: a reference freed and handed out again on one
// side of a Clone still means the old ACL on the other.
func TestACLCloneIndependent(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/a", ACL: only(PermRead)}, txAt(1))
	c := tr.Clone()
	if err := tr.Delete("/a", -1, txAt(2)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, tr, Create{Path: "/b", ACL: only(PermWrite)}, txAt(3))
	if acl, _ := c.ACL("/a"); !reflect.DeepEqual(acl, only(PermRead)) {
		t.Fatalf("clone's /a has %v", acl)
	}
	if _, ok := c.ACL("/b"); ok {
		t.Fatal("clone sees /b")
	}
	if acl, _ := tr.ACL("/b"); !reflect.DeepEqual(acl, only(PermWrite)) {
		t.Fatalf("/b has %v", acl)
	}
	if !bytes.Equal(snapshotBytes(t, c), func() []byte {
		x := New(Options{})
		mustCreate(t, x, Create{Path: "/a", ACL: only(PermRead)}, txAt(1))
		return snapshotBytes(t, x)
	}()) {
		t.Fatal("the clone's snapshot differs from the state it captured")
	}
}

// TestMultiChecksAgainstEarlierOps: a multi's ops are checked in order
// against the state the earlier ops made, and a refusal rolls back
// everything, the ACL table included.
func TestMultiChecksAgainstEarlierOps(t *testing.T) {
	tr := New(Options{})
	before := dump(tr)
	res, err := tr.Multi([]Op{
		{Type: OpCreate, Path: "/g", ACL: only(PermRead)},
		{Type: OpCreate, Path: "/g/x"},
	}, as("x", 1))
	if !errors.Is(err, ErrNoAuth) || !errors.Is(res[0].Err, ErrRolledBack) || !errors.Is(res[1].Err, ErrNoAuth) {
		t.Fatalf("%v %+v", err, res)
	}
	if dump(tr) != before {
		t.Fatal("a refused multi changed the tree")
	}
	// With the auth scheme the creator may go on under its own node.
	if _, err := tr.Multi([]Op{
		{Type: OpCreate, Path: "/g", ACL: []ACL{{Perms: PermCreate, Scheme: "auth"}}},
		{Type: OpCreate, Path: "/g/x"},
	}, as("x", 2)); err != nil {
		t.Fatal(err)
	}
}

// TestEventsCarryACL: each event carries the ACL of the node it is about:
// the node's for created, changed and deleted, the parent's for children
// changed.
func TestEventsCarryACL(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/p", ACL: only(PermRead)}, txAt(1))
	tx := txAt(2)
	mustCreate(t, tr, Create{Path: "/p/c", ACL: only(PermWrite)}, tx)
	if _, err := tr.SetData("/p/c", nil, -1, tx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete("/p/c", -1, tx); err != nil {
		t.Fatal(err)
	}
	want := [][]ACL{only(PermWrite), only(PermRead), only(PermWrite), only(PermWrite), only(PermRead)}
	if len(tx.Events) != len(want) {
		t.Fatalf("events %v", tx.Events)
	}
	for i, e := range tx.Events {
		if e.ACL == nil || !reflect.DeepEqual(*e.ACL, want[i]) {
			t.Errorf("event %d (%s %s) has ACL %v, want %v", i, e.Type, e.Path, e.ACL, want[i])
		}
	}
}

// TestSnapshotWithACLs: ACLs and aversions survive a snapshot; the bytes
// depend on the contents only, not on the order references were handed
// out; a tree without ACLs is written in version 1.
func TestSnapshotWithACLs(t *testing.T) {
	if b := snapshotBytes(t, buildSample(t)); b[len(snapMagic)] != snapVersionV1 {
		t.Fatalf("a tree without ACLs is written in version %d", b[len(snapMagic)])
	}
	build := func(order []string) *Tree {
		tr := New(Options{})
		acls := map[string][]ACL{"/a": only(PermRead), "/b": only(PermWrite), "/c": only(PermRead)}
		for _, p := range order {
			mustCreate(t, tr, Create{Path: p, ACL: acls[p]}, txAt(1))
		}
		mustCreate(t, tr, Create{Path: "/tmp", ACL: only(PermAdmin)}, txAt(2))
		if err := tr.Delete("/tmp", -1, txAt(3)); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.SetACL("/", only(PermAll), -1, txAt(4)); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	x, y := build([]string{"/a", "/b", "/c"}), build([]string{"/c", "/b", "/a"})
	bx, by := snapshotBytes(t, x), snapshotBytes(t, y)
	if !bytes.Equal(bx, by) {
		t.Fatal("same contents, different snapshots")
	}
	if bx[len(snapMagic)] != snapVersion {
		t.Fatalf("version %d", bx[len(snapMagic)])
	}
	r, err := Read(bytes.NewReader(bx), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/a", "/b", "/c"} {
		wa, ws, _ := x.GetACL(p)
		ga, gs, err := r.GetACL(p)
		if err != nil || !reflect.DeepEqual(ga, wa) || gs != ws {
			t.Errorf("%s: %v %+v %v, want %v %+v", p, ga, gs, err, wa, ws)
		}
	}
	if r.ACLs() != 3 || !bytes.Equal(snapshotBytes(t, r), bx) {
		t.Fatalf("%d interned ACLs after reading; re-encoding equal: %v", r.ACLs(), bytes.Equal(snapshotBytes(t, r), bx))
	}
	// The reader's table works on: a delete releases, a create interns.
	if err := r.Delete("/a", -1, txAt(5)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, r, Create{Path: "/d", ACL: only(PermDelete)}, txAt(6))
	if r.ACLs() != 4 {
		t.Fatalf("%d interned ACLs", r.ACLs())
	}
}

// TestACLMemory: 100,000 znodes that share an ACL other than the open one
// (Kafka's zookeeper.set.acl gives every node the same one) cost no more
// heap than open ones, but for the one interned entry; ACLs changed one by
// one cost an entry each only while they differ.
func TestACLMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100k znodes twice")
	}
	paths := benchPaths(benchNodes)
	measure := func(acl []ACL) uint64 {
		before := heapInUse()
		tr := New(Options{})
		tx := &Tx{Zxid: 1, Now: 1}
		data := make([]byte, 100)
		for i := range 100 {
			mustCreate(t, tr, Create{Path: fmt.Sprintf("/d%02d", i), ACL: acl}, tx)
		}
		for _, p := range paths {
			tx.Events = tx.Events[:0]
			mustCreate(t, tr, Create{Path: p, Data: data, ACL: acl}, tx)
		}
		used := heapInUse() - before
		if tr.ACLs() > 1 {
			t.Fatalf("%d interned ACLs", tr.ACLs())
		}
		runtime.KeepAlive(tr)
		return used
	}
	open := measure(nil)
	shared := measure([]ACL{{Perms: PermAll, Scheme: "digest", ID: "kafka:V55/p2T0OpjQ+low3NVAH4aLvm0="}, {Perms: PermRead, Scheme: "world", ID: "anyone"}})
	t.Logf("100k znodes: open ACL %d bytes of heap, a shared digest ACL %d", open, shared)
	// A list per node (ZooKeeper's cache avoids that too) would add over
	// 100 bytes a node, +40% here; heap figures vary by a few percent.
	if shared > open+open/5 {
		t.Fatalf("a shared ACL costs %d bytes of heap more than the open one", shared-open)
	}
}
