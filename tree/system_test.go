package tree

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// TestSystemNodes: AddSystemNodes gives a tree ZooKeeper's /zookeeper,
// /zookeeper/quota and /zookeeper/config with all-zero stats, empty data
// and ZooKeeper's ACLs, counted only in their parents' numbers of
// children; adding them again changes nothing; none of them can be
// deleted, and nodes may be created below /zookeeper.
func TestSystemNodes(t *testing.T) {
	tr := New(Options{})
	tr.AddSystemNodes()
	tr.AddSystemNodes()
	if got := mustStat(t, tr, "/"); got != (Stat{NumChildren: 1}) {
		t.Errorf("root: %+v", got)
	}
	for p, want := range map[string]struct {
		st  Stat
		acl string
	}{
		SystemRoot: {Stat{NumChildren: 2}, "world:anyone:cdrwa"},
		QuotaRoot:  {Stat{}, "world:anyone:cdrwa"},
		ConfigPath: {Stat{Aversion: -1}, "world:anyone:r"},
	} {
		d, st, err := tr.Get(p)
		if err != nil || d == nil || len(d) != 0 || st != want.st {
			t.Errorf("%s: %q (nil %v) %+v %v, want empty, %+v", p, d, d == nil, st, err, want.st)
		}
		acl, _, _ := tr.GetACL(p)
		if len(acl) != 1 || acl[0].Scheme+":"+acl[0].ID+":"+acl[0].Perms.String() != want.acl {
			t.Errorf("%s: ACL %v, want %s", p, acl, want.acl)
		}
	}
	if kids, _, _ := tr.Children(SystemRoot); !reflect.DeepEqual(kids, []string{"config", "quota"}) {
		t.Errorf("children of /zookeeper: %q", kids)
	}
	if !tr.Restricted() || tr.ReadRestricted() {
		t.Errorf("restricted %v, read-restricted %v: want true, false (everyone may read /zookeeper/config)", tr.Restricted(), tr.ReadRestricted())
	}

	for _, p := range []string{"/", SystemRoot, QuotaRoot, ConfigPath} {
		if err := tr.Delete(p, -1, txAt(1)); !errors.Is(err, ErrBadArguments) {
			t.Errorf("delete %s: %v, want ErrBadArguments", p, err)
		}
	}
	mustCreate(t, tr, Create{Path: "/zookeeper/x", Data: []byte("hi")}, txAt(2))
	if err := tr.Delete("/zookeeper/x", -1, txAt(3)); err != nil {
		t.Fatal(err)
	}
	if got := mustStat(t, tr, SystemRoot); got.NumChildren != 2 || got.Cversion != 2 || got.Pzxid != 3 {
		t.Errorf("/zookeeper after a child came and went: %+v", got)
	}

	var buf bytes.Buffer
	if _, err := tr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Read(bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	back.AddSystemNodes()
	var again bytes.Buffer
	if _, err := back.WriteTo(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("adding the system nodes to a tree that has them changed it")
	}
}

// TestSystemNodesAddedLater: a tree from before the system nodes were
// stored gets the same nodes, whatever it holds, as one that had them from
// the start and then the same writes.
func TestSystemNodesAddedLater(t *testing.T) {
	writes := func(tr *Tree) {
		mustCreate(t, tr, Create{Path: "/a"}, txAt(1))
		mustCreate(t, tr, Create{Path: "/a/s-", Sequential: true}, txAt(2))
	}
	early := New(Options{})
	early.AddSystemNodes()
	writes(early)
	late := New(Options{})
	writes(late)
	late.AddSystemNodes()
	var a, b bytes.Buffer
	if _, err := early.WriteTo(&a); err != nil {
		t.Fatal(err)
	}
	if _, err := late.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the system nodes added before and after the same writes give different trees")
	}
}

// quotaTree is a tree with the system nodes and a quota on /q set as zkCli's
// setquota sets one: the limits node, then the stats node.
func quotaTree(t *testing.T) *Tree {
	t.Helper()
	tr := New(Options{})
	tr.AddSystemNodes()
	mustCreate(t, tr, Create{Path: "/q", Data: []byte("ab")}, txAt(1))
	mustCreate(t, tr, Create{Path: "/q/a", Data: []byte("c")}, txAt(2))
	mustCreate(t, tr, Create{Path: "/q/a/deep"}, txAt(3))
	mustCreate(t, tr, Create{Path: "/zookeeper/quota/q"}, txAt(4))
	mustCreate(t, tr, Create{Path: "/zookeeper/quota/q/zookeeper_limits", Data: []byte("count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=-1")}, txAt(5))
	mustCreate(t, tr, Create{Path: "/zookeeper/quota/q/zookeeper_stats", Data: []byte("count=0,bytes=0")}, txAt(6))
	return tr
}

func statsOf(t *testing.T, tr *Tree, quota string) string {
	t.Helper()
	d, _, err := tr.Get(QuotaRoot + quota + "/" + QuotaStatsNode)
	if err != nil {
		t.Fatal(err)
	}
	return string(d)
}

// TestQuotaStats: the stats node of a quota counts the nodes and bytes at
// and below its path, from its creation on, through creates, setData,
// deletes (an ephemeral's too) and a multi, in place (no version, no mzxid,
// no event); deleting the limits node ends the quota; a snapshot keeps
// them; the limits are not enforced.
func TestQuotaStats(t *testing.T) {
	tr := quotaTree(t)
	if got := statsOf(t, tr, "/q"); got != "count=3,bytes=3" {
		t.Fatalf("stats once created: %q, want count=3,bytes=3", got)
	}
	stats0 := mustStat(t, tr, "/zookeeper/quota/q/zookeeper_stats")

	tx := txAt(7)
	mustCreate(t, tr, Create{Path: "/q/b", Data: []byte("dd")}, tx)
	if got := statsOf(t, tr, "/q"); got != "count=4,bytes=5" {
		t.Errorf("after a create: %q", got)
	}
	for _, ev := range tx.Events {
		if ev.Path == QuotaRoot+"/q/"+QuotaStatsNode {
			t.Errorf("an event for the stats node: %+v", ev)
		}
	}
	if _, err := tr.SetData("/q/a", []byte("cccc"), -1, txAt(8)); err != nil {
		t.Fatal(err)
	}
	if got := statsOf(t, tr, "/q"); got != "count=4,bytes=8" {
		t.Errorf("after setData: %q", got)
	}
	mustCreate(t, tr, Create{Path: "/q/e", Kind: Ephemeral, Owner: 9, Data: []byte("eee")}, txAt(9))
	if err := tr.Delete("/q/b", -1, txAt(10)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete("/q/e", -1, txAt(11)); err != nil {
		t.Fatal(err)
	}
	if got := statsOf(t, tr, "/q"); got != "count=3,bytes=6" {
		t.Errorf("after deletes: %q", got)
	}
	for i := range 5 {
		mustCreate(t, tr, Create{Path: "/q/s-", Sequential: true}, txAt(int64(12+i)))
	}
	if got := statsOf(t, tr, "/q"); got != "count=8,bytes=6" {
		t.Errorf("beyond the count limit (not enforced): %q", got)
	}
	if st := mustStat(t, tr, "/zookeeper/quota/q/zookeeper_stats"); st.Version != stats0.Version || st.Mzxid != stats0.Mzxid || st.DataLength != 15 {
		t.Errorf("stats node's stat %+v, was %+v", st, stats0)
	}

	// A failed multi changes no stats; a good one does.
	if _, err := tr.Multi([]Op{{Type: OpCreate, Path: "/q/m"}, {Type: OpCreate, Path: "/q/nope/x"}}, txAt(20)); err == nil {
		t.Fatal("multi did not fail")
	}
	if got := statsOf(t, tr, "/q"); got != "count=8,bytes=6" {
		t.Errorf("after a failed multi: %q", got)
	}
	if _, err := tr.Multi([]Op{{Type: OpCreate, Path: "/q/m", Data: []byte("m")}, {Type: OpSetData, Path: "/q", Data: []byte{}}}, txAt(21)); err != nil {
		t.Fatal(err)
	}
	if got := statsOf(t, tr, "/q"); got != "count=9,bytes=5" {
		t.Errorf("after a multi: %q", got)
	}

	var buf bytes.Buffer
	if _, err := tr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, back, Create{Path: "/q/after"}, txAt(22))
	if got := statsOf(t, back, "/q"); got != "count=10,bytes=5" {
		t.Errorf("after a snapshot: %q", got)
	}

	if err := back.Delete("/zookeeper/quota/q/zookeeper_limits", -1, txAt(23)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, back, Create{Path: "/q/unlimited"}, txAt(24))
	if got := statsOf(t, back, "/q"); got != "count=10,bytes=5" {
		t.Errorf("after the limits went: %q", got)
	}
}

// TestQuotaDeepest: a node below two quotas counts in the deeper one only
// (ZooKeeper's longest prefix); a failed multi that set a quota sets none.
func TestQuotaDeepest(t *testing.T) {
	tr := quotaTree(t)
	mustCreate(t, tr, Create{Path: "/zookeeper/quota/q/a"}, txAt(7))
	mustCreate(t, tr, Create{Path: "/zookeeper/quota/q/a/zookeeper_limits", Data: []byte("count=1,bytes=-1")}, txAt(8))
	mustCreate(t, tr, Create{Path: "/zookeeper/quota/q/a/zookeeper_stats", Data: []byte("count=0,bytes=0")}, txAt(9))
	mustCreate(t, tr, Create{Path: "/q/a/x", Data: []byte("xy")}, txAt(10))
	if got := statsOf(t, tr, "/q/a"); got != "count=3,bytes=3" {
		t.Errorf("/q/a: %q", got)
	}
	if got := statsOf(t, tr, "/q"); got != "count=3,bytes=3" {
		t.Errorf("/q counted a node below a deeper quota: %q", got)
	}

	if _, err := tr.Multi([]Op{
		{Type: OpCreate, Path: "/zookeeper/quota/r"},
		{Type: OpCreate, Path: "/zookeeper/quota/r/zookeeper_limits"},
		{Type: OpCreate, Path: "/zookeeper/quota/r/zookeeper_stats"},
		{Type: OpCheck, Path: "/none"},
	}, txAt(11)); err == nil {
		t.Fatal("multi did not fail")
	}
	if tr.quotaFor("/r/x") != "" {
		t.Error("a failed multi left a quota")
	}
}

// TestQuotaStatsFormat: the stats line is ZooKeeper's StatsTrack.
func TestQuotaStatsFormat(t *testing.T) {
	for in, want := range map[string]string{
		"count=0,bytes=0": "count=1,bytes=2",
		"":                "count=0,bytes=1", // both missing: -1
		"count=5,bytes=-1=;countHardLimit=10;byteHardLimit=-1": "count=6,bytes=1=;byteHardLimit=-1;countHardLimit=10",
		"bytes=7;;count=,x=3": "count=0,bytes=9=;x=3",
	} {
		st, ok := parseQuotaStats(in)
		if !ok {
			t.Errorf("%q: not parsed", in)
			continue
		}
		st.count++
		st.bytes += 2
		if got := st.String(); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	if _, ok := parseQuotaStats("count=many"); ok {
		t.Error("count=many parsed")
	}
}
