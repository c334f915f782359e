package fsm

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
)

func rule(prefix string, ms int64) *cmdpb.LockDelay {
	return &cmdpb.LockDelay{Prefix: prefix, DelayMs: ms}
}

// TestLockDelayFor: the longest prefix that covers a path wins, prefixes
// cover by path components, and a delay is never negative nor above
// MaxLockDelayMs.
func TestLockDelayFor(t *testing.T) {
	rules := []*cmdpb.LockDelay{rule("/locks", 10000), rule("/locks/fast", 0), rule("/a/b", 500), rule("/neg", -5), rule("/huge", 1<<50)}
	cases := []struct {
		rules []*cmdpb.LockDelay
		path  string
		want  int64
	}{
		{rules, "/locks", 10000},
		{rules, "/locks/m/_c_1-lock-0000000001", 10000},
		{rules, "/locksmith/x", 0},
		{rules, "/locks/fast/x", 0}, // a longer prefix exempts its subtree
		{rules, "/locks/faster/x", 10000},
		{rules, "/a/b/c", 500},
		{rules, "/a/bc", 0},
		{rules, "/a", 0},
		{rules, "/neg/x", 0},
		{rules, "/huge/x", MaxLockDelayMs},
		{[]*cmdpb.LockDelay{rule("/", 7), rule("/x", 3)}, "/y/z", 7},
		{[]*cmdpb.LockDelay{rule("/", 7), rule("/x", 3)}, "/x/z", 3},
		{[]*cmdpb.LockDelay{rule("", 7)}, "/x", 0},
		{nil, "/x", 0},
	}
	for _, c := range cases {
		if got := LockDelayFor(c.rules, c.path); got != c.want {
			t.Errorf("LockDelayFor(%v, %s) = %d, want %d", c.rules, c.path, got, c.want)
		}
	}
}

func expire(ms, id int64, rules ...*cmdpb.LockDelay) *cmdpb.Command {
	return &cmdpb.Command{TimeMs: ms, Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: id, Expired: true, Term: 1, LockDelays: rules}}}
}

func release(ms int64, paths ...string) *cmdpb.Command {
	return &cmdpb.Command{TimeMs: ms, Cmd: &cmdpb.Command_ReleaseLockDelays{ReleaseLockDelays: &cmdpb.ReleaseLockDelays{Paths: paths}}}
}

func del(p string) *cmdpb.Write {
	return &cmdpb.Write{Op: &cmdpb.Write_Delete{Delete: &cmdpb.Delete{Path: p, Version: -1}}}
}

func owner(t *testing.T, f *FSM, p string) int64 {
	t.Helper()
	var st tree.Stat
	var err error
	f.Read(func(v View) { st, err = v.Tree.Exists(p) })
	if err != nil {
		return 0
	}
	return st.EphemeralOwner
}

func lockDelayOf(f *FSM, p string) (session.LockDelay, bool) {
	var ld session.LockDelay
	var ok bool
	f.Read(func(v View) { ld, ok = v.Sessions.LockDelayOf(p) })
	return ld, ok
}

// TestLockDelayKeepsAnExpiredHoldersNodes: an expiry with lock-delay rules
// keeps the expired session's ephemerals that a rule covers, still owned
// by it, until the entry's time plus the delay, and deletes the others at
// once; a release before that time changes nothing, one after deletes the
// node (with its events), and a second one changes nothing.
func TestLockDelayKeepsAnExpiredHoldersNodes(t *testing.T) {
	a := newApplier(t)
	a.apply(setLevel(2))
	a.apply(open(1, "pw")) // session 2
	a.apply(write(2, 2, 1, create("/locks", "", cmdpb.Kind_PERSISTENT, false)))
	a.apply(write(3, 2, 2, create("/locks/m-", "", cmdpb.Kind_EPHEMERAL, true)))
	a.apply(write(4, 2, 3, create("/other", "", cmdpb.Kind_EPHEMERAL, false)))
	const held = "/locks/m-0000000000"
	var before tree.Stat
	a.f.Read(func(v View) { before, _ = v.Tree.Exists(held) })

	r := a.apply(expire(1000, 2, rule("/locks", 10000)))
	if !slices.Equal(r.Closed, []int64{2}) || !slices.Equal(r.LockDelayed, []string{held}) {
		t.Fatalf("expiry: closed %v, kept %v", r.Closed, r.LockDelayed)
	}
	if exists(a.f, "/other") {
		t.Fatal("an ephemeral no rule covers survived the expiry")
	}
	var after tree.Stat
	a.f.Read(func(v View) { after, _ = v.Tree.Exists(held) })
	if after != before {
		t.Fatalf("the kept node changed: %+v, was %+v", after, before)
	}
	if ld, ok := lockDelayOf(a.f, held); !ok || ld != (session.LockDelay{Path: held, Session: 2, Until: 11000}) {
		t.Fatalf("record %+v, %v", ld, ok)
	}
	if r := a.apply(release(10999, held)); r.LockDelaysReleased != 0 || owner(t, a.f, held) != 2 {
		t.Fatalf("released before its time: %+v", r)
	}
	r = a.apply(release(11000, held))
	if r.LockDelaysReleased != 1 || exists(a.f, held) {
		t.Fatalf("not released at its time: %+v", r)
	}
	if want := []tree.EventType{tree.EventNodeDeleted, tree.EventNodeChildrenChanged}; len(r.Events) != 2 || r.Events[0].Type != want[0] || r.Events[1].Type != want[1] || r.Events[0].Path != held {
		t.Fatalf("release events %+v", r.Events)
	}
	if _, ok := lockDelayOf(a.f, held); ok {
		t.Fatal("the record outlived the release")
	}
	if r := a.apply(release(12000, held)); r.LockDelaysReleased != 0 || len(r.Events) != 0 {
		t.Fatalf("a second release: %+v", r)
	}
}

// TestLockDelayOnlyForExpiries: a client's close, an expiry below command
// level 2, an expiry without a rule covering the node or with a zero
// delay all delete the ephemerals in the closing entry, as before.
func TestLockDelayOnlyForExpiries(t *testing.T) {
	closeCmd := &cmdpb.Command{TimeMs: 10, Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: 2, Xid: 9, LockDelays: []*cmdpb.LockDelay{rule("/", 5000)}}}}
	cases := []struct {
		name  string
		level int64
		close *cmdpb.Command
	}{
		{"client close", 2, closeCmd},
		{"level 1", 1, expire(10, 2, rule("/", 5000))},
		{"no rule covers it", 2, expire(10, 2, rule("/elsewhere", 5000))},
		{"zero delay", 2, expire(10, 2, rule("/locks", 0))},
		{"no rules", 2, expire(10, 2)},
	}
	for _, c := range cases {
		a := newApplier(t)
		a.apply(setLevel(c.level))
		a.apply(open(1, "pw"))
		a.apply(write(2, 2, 1, create("/locks", "", cmdpb.Kind_EPHEMERAL, false)))
		r := a.apply(c.close)
		if !slices.Equal(r.Closed, []int64{2}) || len(r.LockDelayed) != 0 || exists(a.f, "/locks") {
			t.Errorf("%s: closed %v, kept %v, node there: %v", c.name, r.Closed, r.LockDelayed, exists(a.f, "/locks"))
		}
	}
}

// TestLockDelayEndsWithADelete: deleting a kept node ends its delay at
// once; a node created again at its path by another session is not the
// kept one, and a release of the path later leaves it alone.
func TestLockDelayEndsWithADelete(t *testing.T) {
	a := newApplier(t)
	a.apply(setLevel(2))
	a.apply(open(1, "p1")) // session 2: the holder
	a.apply(open(1, "p2")) // session 3: an administrator, then the next holder
	a.apply(write(2, 2, 1, create("/locks", "", cmdpb.Kind_PERSISTENT, false)))
	a.apply(write(3, 2, 2, create("/locks/m", "", cmdpb.Kind_EPHEMERAL, false)))
	a.apply(expire(1000, 2, rule("/locks", 60000)))
	if owner(t, a.f, "/locks/m") != 2 {
		t.Fatal("not kept")
	}
	// In a multi, with a create of the same path after the delete.
	r := a.apply(write(1001, 3, 1, &cmdpb.Write{Op: &cmdpb.Write_Multi{Multi: &cmdpb.Multi{Ops: []*cmdpb.Op{
		{Op: &cmdpb.Op_Delete{Delete: &cmdpb.Delete{Path: "/locks/m", Version: -1}}},
		{Op: &cmdpb.Op_Create{Create: &cmdpb.Create{Path: "/locks/m", Kind: cmdpb.Kind_EPHEMERAL}}},
	}}}}))
	if r.Result.Code != cmdpb.Code_OK || r.LockDelaysDeleted != 1 || owner(t, a.f, "/locks/m") != 3 {
		t.Fatalf("delete and create: %+v, deleted %d, owner %d", r.Result, r.LockDelaysDeleted, owner(t, a.f, "/locks/m"))
	}
	if _, ok := lockDelayOf(a.f, "/locks/m"); ok {
		t.Fatal("the record outlived the delete")
	}
	if r := a.apply(release(70000, "/locks/m")); r.LockDelaysReleased != 0 || owner(t, a.f, "/locks/m") != 3 {
		t.Fatalf("a release deleted another session's node: %+v", r)
	}
	// A plain delete of a kept node.
	a.apply(write(70001, 3, 2, create("/locks/n", "", cmdpb.Kind_EPHEMERAL, false)))
	a.apply(expire(70002, 3, rule("/locks", 60000)))
	if r := a.apply(open(70003, "p4")); r.Opened == nil {
		t.Fatal("open")
	}
	id := int64(a.index)
	r = a.apply(write(70004, id, 1, del("/locks/n")))
	if r.Result.Code != cmdpb.Code_OK || r.LockDelaysDeleted != 1 || exists(a.f, "/locks/n") {
		t.Fatalf("delete of a kept node: %+v, deleted %d", r.Result, r.LockDelaysDeleted)
	}
	a.f.Read(func(v View) {
		if v.Sessions.LockDelays() != 1 { // /locks/m, of session 3 now
			t.Fatalf("%d records, want 1: %v", v.Sessions.LockDelays(), v.Sessions.ListLockDelays())
		}
	})
}

// TestLockDelaysAreReplicatedState: the records are in the snapshot (two
// FSMs fed the same log write the same bytes, and a restored FSM releases
// on time), a level-2 snapshot holds them, and a restore's seed deletes
// the kept nodes with every other ephemeral.
func TestLockDelaysAreReplicatedState(t *testing.T) {
	cmds := []*cmdpb.Command{setLevel(2), open(1, "p1"), open(1, "p2")}
	cmds = append(cmds,
		write(2, 2, 1, create("/locks", "", cmdpb.Kind_PERSISTENT, false)),
		write(3, 2, 2, create("/locks/a", "", cmdpb.Kind_EPHEMERAL, false)),
		write(4, 3, 1, create("/locks/b", "", cmdpb.Kind_EPHEMERAL, false)),
		expire(1000, 2, rule("/locks", 5000)),
		expire(2000, 3, rule("/locks", 5000)),
		release(6000, "/locks/a", "/locks/b"), // only /locks/a is due
	)
	logs := logOf(t, cmds...)
	f, g := New(Options{}), New(Options{})
	for _, l := range logs {
		f.Apply(l)
	}
	g.ApplyBatch(logs)
	snap := snapshotBytes(t, f)
	if !bytes.Equal(snap, snapshotBytes(t, g)) {
		t.Fatal("same log, different snapshots")
	}
	if exists(f, "/locks/a") || owner(t, f, "/locks/b") != 3 {
		t.Fatal("the release did not release only what was due")
	}
	h := New(Options{})
	if err := h.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if ld, ok := lockDelayOf(h, "/locks/b"); !ok || ld.Until != 7000 || ld.Session != 3 {
		t.Fatalf("restored record %+v, %v", ld, ok)
	}
	h.Apply(&raft.Log{Index: uint64(len(logs) + 1), Term: 1, Type: raft.LogCommand, Data: mustMarshal(t, release(7000, "/locks/b"))})
	if exists(h, "/locks/b") {
		t.Fatal("the restored FSM did not release on time")
	}
	seed, err := Reseed(bytes.NewReader(snap), raft.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	if seed.Ephemerals != 1 {
		t.Fatalf("seed deleted %d ephemerals, want the kept one", seed.Ephemerals)
	}
	var buf bytes.Buffer
	if _, err := seed.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	if err := s.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	s.Read(func(v View) {
		if v.Tree.Ephemerals() != 0 || v.Sessions.LockDelays() != 0 {
			t.Fatalf("seed: %d ephemerals, %d lock-delays", v.Tree.Ephemerals(), v.Sessions.LockDelays())
		}
	})
}
