package tree

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestMultiEmpty(t *testing.T) {
	tr := New(Options{})
	tx := txAt(1)
	res, err := tr.Multi(nil, tx)
	if err != nil || len(res) != 0 || len(tx.Events) != 0 {
		t.Fatalf("%v %v %v", res, err, tx.Events)
	}
}

func TestMultiSuccess(t *testing.T) {
	tr := New(Options{})
	mustCreate(t, tr, Create{Path: "/old", Data: []byte("o")}, txAt(1))
	tx := &Tx{Zxid: 7, Now: 700, Events: []Event{{Type: EventNodeCreated, Path: "/earlier", Zxid: 6}}}
	ops := []Op{
		{Type: OpCreate, Path: "/p", Data: []byte("p")},
		{Type: OpCreate, Path: "/p/c", Kind: Ephemeral, Owner: 9},
		{Type: OpSetData, Path: "/p", Data: []byte("pp"), Version: 0},
		{Type: OpCheck, Path: "/p", Version: 1},
		{Type: OpCreate, Path: "/p/", Sequential: true},
		{Type: OpDelete, Path: "/old", Version: 0},
		{Type: OpCreate, Path: "/old", Data: []byte("new")},
		{Type: OpCheck, Path: "/old", Version: -1},
	}
	res, err := tr.Multi(ops, tx)
	if err != nil {
		t.Fatal(err)
	}
	pStat := Stat{Czxid: 7, Mzxid: 7, Pzxid: 7, Ctime: 700, Mtime: 700, Version: 1, Cversion: 2, NumChildren: 2, DataLength: 2}
	want := []OpResult{
		{Type: OpCreate, Path: "/p", Stat: Stat{Czxid: 7, Mzxid: 7, Pzxid: 7, Ctime: 700, Mtime: 700, DataLength: 1}},
		{Type: OpCreate, Path: "/p/c", Stat: Stat{Czxid: 7, Mzxid: 7, Pzxid: 7, Ctime: 700, Mtime: 700, EphemeralOwner: 9, Kind: Ephemeral}},
		{Type: OpSetData, Stat: Stat{Czxid: 7, Mzxid: 7, Pzxid: 7, Ctime: 700, Mtime: 700, Version: 1, Cversion: 1, NumChildren: 1, DataLength: 2}},
		{Type: OpCheck},
		{Type: OpCreate, Path: "/p/0000000001", Stat: Stat{Czxid: 7, Mzxid: 7, Pzxid: 7, Ctime: 700, Mtime: 700}},
		{Type: OpDelete},
		{Type: OpCreate, Path: "/old", Stat: Stat{Czxid: 7, Mzxid: 7, Pzxid: 7, Ctime: 700, Mtime: 700, DataLength: 3}},
		{Type: OpCheck},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("results\n%+v\nwant\n%+v", res, want)
	}
	if got := mustStat(t, tr, "/p"); got != pStat {
		t.Fatalf("/p %+v want %+v", got, pStat)
	}
	// create + setData of one node in one multi: version 1, mzxid == czxid.
	if st := mustStat(t, tr, "/p"); st.Version != 1 || st.Mzxid != st.Czxid {
		t.Fatalf("%+v", st)
	}
	root := mustStat(t, tr, "/")
	if root.Cversion != 4 || root.NumChildren != 2 || root.Pzxid != 7 {
		t.Fatalf("root %+v", root)
	}
	wantEv := []Event{
		{Type: EventNodeCreated, Path: "/earlier", Zxid: 6},
		{Type: EventNodeCreated, Path: "/p", Zxid: 7}, {Type: EventNodeChildrenChanged, Path: "/", Zxid: 7},
		{Type: EventNodeCreated, Path: "/p/c", Zxid: 7}, {Type: EventNodeChildrenChanged, Path: "/p", Zxid: 7},
		{Type: EventNodeDataChanged, Path: "/p", Zxid: 7},
		{Type: EventNodeCreated, Path: "/p/0000000001", Zxid: 7}, {Type: EventNodeChildrenChanged, Path: "/p", Zxid: 7},
		{Type: EventNodeDeleted, Path: "/old", Zxid: 7}, {Type: EventNodeChildrenChanged, Path: "/", Zxid: 7},
		{Type: EventNodeCreated, Path: "/old", Zxid: 7}, {Type: EventNodeChildrenChanged, Path: "/", Zxid: 7},
	}
	if !reflect.DeepEqual(withoutACL(tx.Events), wantEv) {
		t.Fatalf("events\n%v\nwant\n%v", tx.Events, wantEv)
	}
	if got := tr.EphemeralsOf(9); !reflect.DeepEqual(got, []string{"/p/c"}) {
		t.Fatalf("ephemerals %q", got)
	}
}

func TestMultiFailure(t *testing.T) {
	tests := []struct {
		name   string
		ops    []Op
		failAt int
		want   error
	}{
		{"check no node", []Op{{Type: OpCheck, Path: "/nope"}}, 0, ErrNoNode},
		{"check bad version", []Op{{Type: OpCreate, Path: "/x"}, {Type: OpCheck, Path: "/a", Version: 3}}, 1, ErrBadVersion},
		{"check invalid path", []Op{{Type: OpCheck, Path: "/a/", Version: -1}}, 0, ErrBadArguments},
		{"create exists", []Op{
			{Type: OpCreate, Path: "/x"}, {Type: OpSetData, Path: "/a", Version: -1}, {Type: OpCreate, Path: "/x"},
			{Type: OpDelete, Path: "/a"}, {Type: OpCheck, Path: "/a"},
		}, 2, ErrNodeExists},
		{"child of deleted", []Op{{Type: OpDelete, Path: "/a/b", Version: -1}, {Type: OpDelete, Path: "/a", Version: -1}, {Type: OpCreate, Path: "/a/c"}}, 2, ErrNoNode},
		{"setData after setData wrong version", []Op{{Type: OpSetData, Path: "/a", Version: 0}, {Type: OpSetData, Path: "/a", Version: 0}}, 1, ErrBadVersion},
		{"delete not empty", []Op{{Type: OpCreate, Path: "/a/c", Kind: Ephemeral, Owner: 3}, {Type: OpDelete, Path: "/a", Version: -1}}, 1, ErrNotEmpty},
		{"ephemeral parent", []Op{{Type: OpCreate, Path: "/e", Kind: Ephemeral, Owner: 3}, {Type: OpCreate, Path: "/e/c"}}, 1, ErrNoChildrenForEphemerals},
		{"unknown op", []Op{{Type: OpCreate, Path: "/x"}, {Type: 0, Path: "/x"}, {Type: OpCheck, Path: "/x"}}, 1, ErrBadArguments},
		{"delete root", []Op{{Type: OpDelete, Path: "/", Version: -1}}, 0, ErrBadArguments},
		{"sequential then reap index", []Op{{Type: OpCreate, Path: "/a/", Sequential: true, Kind: Container}, {Type: OpCreate, Path: "/t", Kind: TTL, TTL: 1}, {Type: OpCheck, Path: "/a", Version: 9}}, 2, ErrBadVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Options{})
			mustCreate(t, tr, Create{Path: "/a"}, txAt(1))
			mustCreate(t, tr, Create{Path: "/a/b"}, txAt(2))
			mustCreate(t, tr, Create{Path: "/c", Kind: Container}, txAt(3))
			before := dump(tr)
			prior := []Event{{Type: EventNodeCreated, Path: "/z", Zxid: 1}}
			tx := &Tx{Zxid: 10, Now: 10, Events: prior}
			res, err := tr.Multi(tc.ops, tx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if len(res) != len(tc.ops) {
				t.Fatalf("%d results for %d ops", len(res), len(tc.ops))
			}
			for i, r := range res {
				var want error
				switch {
				case i < tc.failAt:
					want = ErrRolledBack
				case i == tc.failAt:
					want = tc.want
					if r.Err != err {
						t.Errorf("result %d error %v is not the multi's error %v", i, r.Err, err)
					}
				default:
					want = ErrRuntimeInconsistency
				}
				if !errors.Is(r.Err, want) || r.Type != tc.ops[i].Type || r.Path != "" || r.Stat != (Stat{}) {
					t.Errorf("result %d = %+v, want error %v", i, r, want)
				}
			}
			if !reflect.DeepEqual(withoutACL(tx.Events), prior) {
				t.Fatalf("events changed: %v", tx.Events)
			}
			if got := dump(tr); got != before {
				t.Fatalf("tree changed:\n%s\nwant\n%s", got, before)
			}
			// The tree is still fully usable afterwards.
			if _, err := tr.Multi([]Op{{Type: OpCreate, Path: "/after"}, {Type: OpCreate, Path: "/a/", Sequential: true}}, txAt(11)); err != nil {
				t.Fatal(err)
			}
			if st := mustStat(t, tr, "/a"); st.Cversion != 2 {
				t.Fatalf("/a %+v", st)
			}
			if _, _, err := tr.Get("/a/0000000001"); err != nil {
				t.Fatalf("sequence advanced by a failed multi: %v", err)
			}
		})
	}
}

func TestCloneIsolation(t *testing.T) {
	tr := New(Options{})
	for i := range 200 {
		mustCreate(t, tr, Create{Path: fmt.Sprintf("/n%03d", i), Data: []byte{byte(i)}}, txAt(int64(i+1)))
	}
	mustCreate(t, tr, Create{Path: "/e", Kind: Ephemeral, Owner: 4}, txAt(300))
	mustCreate(t, tr, Create{Path: "/c", Kind: Container}, txAt(301))
	orig := dump(tr)
	cl := tr.Clone()
	if dump(cl) != orig {
		t.Fatal("clone differs")
	}
	// Mutate the original: clone unchanged.
	tx := txAt(400)
	mustCreate(t, tr, Create{Path: "/new"}, tx)
	if _, err := tr.SetData("/n005", []byte("changed"), -1, tx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete("/n100", -1, tx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete("/e", -1, tx); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, tr, Create{Path: "/c/x"}, tx)
	if _, err := tr.Multi([]Op{{Type: OpDelete, Path: "/n000", Version: -1}, {Type: OpCheck, Path: "/nope"}}, tx); err == nil {
		t.Fatal("multi should fail")
	}
	if dump(cl) != orig {
		t.Fatal("clone changed by writes to the original")
	}
	if got := cl.EphemeralsOf(4); !reflect.DeepEqual(got, []string{"/e"}) {
		t.Fatalf("clone ephemerals %q", got)
	}
	if tr.EphemeralsOf(4) != nil {
		t.Fatal("original ephemerals")
	}
	mutated := dump(tr)
	// Mutate the clone: original unchanged.
	if _, err := cl.SetData("/n006", []byte("c"), -1, tx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete("/c", -1, tx); err != nil {
		t.Fatal(err)
	}
	if dump(tr) != mutated {
		t.Fatal("original changed by writes to the clone")
	}
	if d, _, _ := tr.Get("/n006"); !reflect.DeepEqual(d, []byte{6}) {
		t.Fatalf("original data %q", d)
	}
	if _, err := tr.Exists("/c"); err != nil {
		t.Fatal(err)
	}
}

// TestCloneConcurrent checks (under -race) that a clone can be encoded and
// read while the original is written, and that Clone does not conflict
// with concurrent reads of the original.
func TestCloneConcurrent(t *testing.T) {
	tr := New(Options{})
	for i := range 2000 {
		mustCreate(t, tr, Create{Path: fmt.Sprintf("/n%04d", i), Data: []byte("data")}, txAt(int64(i+1)))
	}
	cl := tr.Clone()
	var want []byte
	{
		var b bytesBuffer
		if _, err := cl.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		want = b.b
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for range 5 {
			var b bytesBuffer
			if _, err := cl.WriteTo(&b); err != nil {
				t.Error(err)
			}
			if string(b.b) != string(want) {
				t.Error("clone snapshot changed")
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 2000 {
			if _, _, err := cl.Get(fmt.Sprintf("/n%04d", i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 2000 {
			p := fmt.Sprintf("/n%04d", i)
			tx := txAt(int64(3000 + i))
			if i%2 == 0 {
				if err := tr.Delete(p, -1, tx); err != nil {
					t.Error(err)
					return
				}
			} else if _, err := tr.SetData(p, []byte("other"), -1, tx); err != nil {
				t.Error(err)
				return
			}
			if i%100 == 0 {
				_ = tr.Clone()
			}
		}
	}()
	wg.Wait()
	if tr.Len() != 1001 || cl.Len() != 2001 {
		t.Fatalf("Len %d %d", tr.Len(), cl.Len())
	}
}

// bytesBuffer is a minimal io.Writer (bytes.Buffer would do too).
type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// TestMultiRollbackRandom: a multi that fails at any op leaves the tree
// byte for byte as it was (its nodes, indexes, ACL table, quotas and
// snapshot), whatever the earlier ops changed, and one that succeeds leaves
// it as the same ops applied one by one would.
func TestMultiRollbackRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 1))
	tr := New(Options{})
	tr.AddSystemNodes()
	tx := &Tx{Zxid: 1, Now: 1}
	quota := QuotaRoot + "/q/" + QuotaLimitsNode
	for _, c := range []Create{{Path: "/q"}, {Path: QuotaRoot + "/q"}, {Path: quota}, {Path: QuotaRoot + "/q/" + QuotaStatsNode, Data: []byte("count=0,bytes=0")}} {
		mustCreate(t, tr, c, tx)
	}
	private := []ACL{{Perms: PermAll, Scheme: "digest", ID: "u:x"}}
	paths := []string{"/q/a", "/q/b", "/q/a/c", "/r", "/r/s", "/t"}
	randomOp := func() Op {
		p := paths[rng.IntN(len(paths))]
		switch rng.IntN(5) {
		case 0:
			op := Op{Type: OpCreate, Path: p, Data: []byte("d")}
			switch rng.IntN(4) {
			case 0:
				op.ACL = private
			case 1:
				op.Kind, op.Owner = Ephemeral, int64(1+rng.IntN(3))
			case 2:
				op.Kind = Container
			}
			return op
		case 1:
			return Op{Type: OpDelete, Path: p, Version: -1}
		case 2:
			return Op{Type: OpSetData, Path: p, Data: []byte(strings.Repeat("x", rng.IntN(3))), Version: -1}
		case 3:
			return Op{Type: OpCreate, Path: p + "/", Sequential: true}
		}
		return Op{Type: OpCheck, Path: p, Version: -1}
	}
	for i := range 500 {
		ops := make([]Op, 1+rng.IntN(6))
		for k := range ops {
			ops[k] = randomOp()
		}
		before, beforeSnap := dump(tr), snapshotBytes(t, tr)
		// The same ops one by one, on a copy: the expected outcome.
		alone := tr.Clone()
		var aloneErr error
		for _, op := range ops {
			if _, aloneErr = alone.apply(op, &Tx{Zxid: int64(i + 2), Now: int64(i + 2)}); aloneErr != nil {
				break
			}
		}
		tx := &Tx{Zxid: int64(i + 2), Now: int64(i + 2)}
		_, err := tr.Multi(ops, tx)
		if (err == nil) != (aloneErr == nil) {
			t.Fatalf("multi %d %+v: %v, one by one: %v", i, ops, err, aloneErr)
		}
		if err != nil {
			if got := dump(tr); got != before || !bytes.Equal(snapshotBytes(t, tr), beforeSnap) {
				t.Fatalf("multi %d %+v failed with %v but changed the tree:\n%s\nwant\n%s", i, ops, err, got, before)
			}
			continue
		}
		if got, want := dump(tr), dump(alone); got != want {
			t.Fatalf("multi %d %+v:\n%s\none by one:\n%s", i, ops, got, want)
		}
	}
}
