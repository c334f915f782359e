package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/tree"
)

// logOf builds raft log entries from commands, indexes from 1.
func logOf(t testing.TB, cmds ...*cmdpb.Command) []*raft.Log {
	t.Helper()
	var out []*raft.Log
	for i, c := range cmds {
		data, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data})
	}
	return out
}

func open(ms int64, pw string) *cmdpb.Command {
	return &cmdpb.Command{TimeMs: ms, Cmd: &cmdpb.Command_OpenSession{OpenSession: &cmdpb.OpenSession{TimeoutMs: 4000, Password: []byte(pw)}}}
}

func write(ms, sess, xid int64, w *cmdpb.Write) *cmdpb.Command {
	w.SessionId, w.Xid = sess, xid
	return &cmdpb.Command{TimeMs: ms, Cmd: &cmdpb.Command_Write{Write: w}}
}

func create(path string, data string, kind cmdpb.Kind, seq bool) *cmdpb.Write {
	return &cmdpb.Write{Op: &cmdpb.Write_Create{Create: &cmdpb.Create{Path: path, Data: []byte(data), Kind: kind, Sequential: seq}}}
}

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := s.(*snapshot).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// randomLog is a deterministic pseudo-random workload over a few sessions.
func randomLog(seed int64, n int) []*cmdpb.Command {
	r := rand.New(rand.NewSource(seed))
	cmds := []*cmdpb.Command{open(1000, "p1"), open(1001, "p2")}
	sessions := []int64{1, 2}
	xid := map[int64]int64{}
	for i := 0; i < n; i++ {
		s := sessions[r.Intn(len(sessions))]
		xid[s]++
		ms := int64(1000 + i*7)
		p := fmt.Sprintf("/n%d", r.Intn(8))
		var w *cmdpb.Write
		switch r.Intn(9) {
		case 0:
			w = create(p, "d", cmdpb.Kind_PERSISTENT, false)
		case 1:
			w = create(p, "e", cmdpb.Kind_EPHEMERAL, r.Intn(2) == 0)
		case 2:
			w = &cmdpb.Write{Op: &cmdpb.Write_Delete{Delete: &cmdpb.Delete{Path: p, Version: -1}}}
		case 3:
			w = &cmdpb.Write{Op: &cmdpb.Write_SetData{SetData: &cmdpb.SetData{Path: p, Data: []byte{byte(i)}, Version: -1}}}
		case 4:
			w = create(p+"/c", "", cmdpb.Kind_PERSISTENT, true)
		case 5:
			w = &cmdpb.Write{Op: &cmdpb.Write_Multi{Multi: &cmdpb.Multi{Ops: []*cmdpb.Op{
				{Op: &cmdpb.Op_Create{Create: &cmdpb.Create{Path: p + "m", Kind: cmdpb.Kind_CONTAINER}}},
				{Op: &cmdpb.Op_Check{Check: &cmdpb.Check{Path: p, Version: int32(r.Intn(2))}}},
			}}}}
		case 7:
			// Some ACLs: digest-only nodes, refused to the sessions
			// without the identity, and creates under them.
			acl := []*cmdpb.ACL{{Perms: 31, Scheme: "digest", Id: "u:h"}}
			if r.Intn(2) == 0 {
				acl = append(acl, &cmdpb.ACL{Perms: int32(r.Intn(32)), Scheme: "world", Id: "anyone"})
			}
			w = &cmdpb.Write{Op: &cmdpb.Write_SetAcl{SetAcl: &cmdpb.SetACL{Path: p, Acl: acl, Version: -1}}}
		case 8:
			cmds = append(cmds, &cmdpb.Command{TimeMs: ms, Cmd: &cmdpb.Command_AddAuth{AddAuth: &cmdpb.AddAuth{SessionId: s, Xid: xid[s], Ids: []*cmdpb.Identity{{Scheme: "digest", Id: "u:h"}}}}})
			continue
		case 6:
			cmds = append(cmds, &cmdpb.Command{TimeMs: ms, Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: s, Expired: true}}})
			cmds = append(cmds, open(ms, fmt.Sprint("p", i)))
			sessions = append(sessions, int64(len(cmds)))
			continue
		}
		cmds = append(cmds, write(ms, s, xid[s], w))
	}
	return cmds
}

// TestSameLogSameSnapshot: two FSMs fed the same log, one entry at a time
// and in batches, produce byte-identical snapshots (invariant 1).
func TestSameLogSameSnapshot(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		logs := logOf(t, randomLog(seed, 400)...)
		a, b := New(Options{}), New(Options{})
		for _, l := range logs {
			a.Apply(l)
		}
		for i := 0; i < len(logs); i += 17 {
			b.ApplyBatch(logs[i:min(i+17, len(logs))])
		}
		sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
		if !bytes.Equal(sa, sb) {
			t.Fatalf("seed %d: snapshots differ (%d vs %d bytes)", seed, len(sa), len(sb))
		}
		if a.AppliedIndex() != int64(len(logs)) {
			t.Fatalf("applied %d, want %d", a.AppliedIndex(), len(logs))
		}
		// Restore into a third FSM and compare again.
		c := New(Options{})
		if err := c.Restore(nopCloser{bytes.NewReader(sa)}); err != nil {
			t.Fatal(err)
		}
		if sc := snapshotBytes(t, c); !bytes.Equal(sa, sc) {
			t.Fatalf("seed %d: restored snapshot differs", seed)
		}
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// TestSnapshotConcurrentWithApply: a snapshot taken mid-log encodes the
// state at capture time while later entries go on applying.
func TestSnapshotConcurrentWithApply(t *testing.T) {
	logs := logOf(t, randomLog(7, 600)...)
	f := New(Options{})
	f.ApplyBatch(logs[:300])
	want := snapshotBytes(t, f)
	snap, _ := f.Snapshot()
	done := make(chan []byte)
	go func() {
		var buf bytes.Buffer
		_, _ = snap.(*snapshot).WriteTo(&buf)
		done <- buf.Bytes()
	}()
	f.ApplyBatch(logs[300:])
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatal("snapshot changed by entries applied after it was captured")
	}
}

func result(t *testing.T, r interface{}) *cmdpb.Result {
	t.Helper()
	res, ok := r.(*cmdpb.Result)
	if !ok {
		t.Fatalf("apply returned %T", r)
	}
	return res
}

func TestWritesAndExactlyOnce(t *testing.T) {
	f := New(Options{})
	logs := logOf(t,
		open(10, "pw"),
		write(20, 1, 1, create("/a", "x", cmdpb.Kind_PERSISTENT, false)),
		write(30, 1, 2, create("/a/s-", "", cmdpb.Kind_PERSISTENT, true)),
		write(40, 1, 2, create("/a/s-", "", cmdpb.Kind_PERSISTENT, true)), // retry of xid 2
		write(50, 1, 3, create("/a/e", "", cmdpb.Kind_EPHEMERAL, false)),
		write(60, 99, 1, create("/b", "", cmdpb.Kind_PERSISTENT, false)), // unknown session
		&cmdpb.Command{TimeMs: 70, Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: 1, Xid: 4}}},
		write(80, 1, 5, create("/c", "", cmdpb.Kind_PERSISTENT, false)),
	)
	var res []*cmdpb.Result
	for _, l := range logs {
		if r := f.Apply(l); r != nil {
			res = append(res, result(t, r))
		} else {
			res = append(res, nil)
		}
	}
	if res[1].Code != cmdpb.Code_OK || res[1].Stat.Ctime != 20 || res[1].Stat.Czxid != 2 {
		t.Fatalf("create /a: %v", res[1])
	}
	if res[2].Path != "/a/s-0000000000" {
		t.Fatalf("sequential: %v", res[2])
	}
	if res[3].Path != "/a/s-0000000000" || res[3].Zxid != 3 {
		t.Fatalf("retry must return the first outcome, got %v", res[3])
	}
	if res[5].Code != cmdpb.Code_SESSION_EXPIRED {
		t.Fatalf("unknown session: %v", res[5])
	}
	if res[6].Code != cmdpb.Code_OK || res[7].Code != cmdpb.Code_SESSION_EXPIRED {
		t.Fatalf("close then write: %v %v", res[6], res[7])
	}
	f.Read(func(v View) {
		names, st, err := v.Tree.Children("/a")
		if err != nil || len(names) != 1 || st.Cversion != 3 {
			t.Fatalf("children of /a after close: %v %+v %v (want the sequential node only, cversion 3)", names, st, err)
		}
		if _, err := v.Tree.Exists("/a/e"); !errors.Is(err, tree.ErrNoNode) {
			t.Fatalf("ephemeral survived its session: %v", err)
		}
		if v.Sessions.Len() != 0 {
			t.Fatalf("sessions: %d", v.Sessions.Len())
		}
	})
}

// TestTimeNeverGoesBack: the FSM's clock is the max of leader stamps.
func TestTimeNeverGoesBack(t *testing.T) {
	f := New(Options{})
	logs := logOf(t,
		open(100, "pw"),
		write(500, 1, 1, create("/a", "", cmdpb.Kind_PERSISTENT, false)),
		write(300, 1, 2, create("/b", "", cmdpb.Kind_PERSISTENT, false)), // a new leader with a slower clock
	)
	for _, l := range logs {
		f.Apply(l)
	}
	f.Read(func(v View) {
		st, _ := v.Tree.Exists("/b")
		if st.Ctime != 500 {
			t.Fatalf("ctime %d, want 500", st.Ctime)
		}
	})
}

// TestHaltsOnGarbage: an entry the FSM cannot decode (a flipped bit on
// this server's disk, or a command of a newer coordd) is never skipped: the
// FSM stops there, says where, applies nothing more, and its server is told
// once. So is a snapshot it cannot read refused.
func TestHaltsOnGarbage(t *testing.T) {
	cases := map[string]*raft.Log{
		"garbage":         {Index: 2, Type: raft.LogCommand, Data: []byte{0xff, 0x01, 0x02}},
		"no body":         {Index: 2, Type: raft.LogCommand, Data: []byte{0x08, 0x05}}, // time_ms only
		"unknown command": {Index: 2, Type: raft.LogCommand, Data: []byte{0x08, 0x05, 0xfa, 0x03, 0x00}},
		"configuration":   {Index: 2, Type: raft.LogConfiguration, Data: []byte{0xff, 0x00}},
		"newer level":     logOf(t, open(1, "x"), &cmdpb.Command{Cmd: &cmdpb.Command_SetLevel{SetLevel: &cmdpb.SetLevel{Level: Level + 1}}})[1],
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			var halts []error
			f := New(Options{Halt: func(err error) { halts = append(halts, err) }})
			first := logOf(t, open(1, "pw"))
			later := logOf(t, open(1, "a"), open(2, "b"), open(3, "c"))[2]
			f.ApplyBatch([]*raft.Log{first[0], bad, later})
			f.Apply(&raft.Log{Index: 4, Type: raft.LogCommand, Data: later.Data})
			h := f.Halted()
			if h == nil || h.Index != 2 || len(halts) != 1 {
				t.Fatalf("halted %v, told %d times", h, len(halts))
			}
			if !strings.Contains(halts[0].Error(), "log entry 2") {
				t.Fatalf("the error does not say where: %v", halts[0])
			}
			if f.AppliedIndex() != 1 {
				t.Fatalf("applied %d after the bad entry, want 1", f.AppliedIndex())
			}
			f.Read(func(v View) {
				if v.Sessions.Len() != 1 {
					t.Fatalf("%d sessions: an entry after the bad one applied", v.Sessions.Len())
				}
			})
		})
	}
	f := New(Options{})
	for _, bad := range [][]byte{nil, []byte("COORDSN1"), []byte("not a snapshot at all, no")} {
		if err := f.Restore(nopCloser{bytes.NewReader(bad)}); err == nil {
			t.Fatalf("restore accepted %q", bad)
		}
	}
}

// FuzzApply: no log entry, however malformed, panics the FSM or makes two
// FSMs diverge.
func FuzzApply(f *testing.F) {
	for _, c := range append(randomLog(3, 20),
		&cmdpb.Command{TimeMs: 5, Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: 2, Expired: true,
			LockDelays: []*cmdpb.LockDelay{{Prefix: "/", DelayMs: 10}}}}},
		&cmdpb.Command{TimeMs: 5, Cmd: &cmdpb.Command_ReleaseLockDelays{ReleaseLockDelays: &cmdpb.ReleaseLockDelays{Paths: []string{"/e"}}}}) {
		b, _ := proto.Marshal(c)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := New(Options{}), New(Options{})
		// At level 2, with an ephemeral of an expired session kept for a
		// lock-delay and one of a live session.
		prefix := logOf(t, setLevel(2), open(1, "x"), open(2, "y"),
			write(3, 2, 1, create("/e", "", cmdpb.Kind_EPHEMERAL, false)),
			write(3, 3, 1, create("/f", "", cmdpb.Kind_EPHEMERAL, false)),
			&cmdpb.Command{TimeMs: 4, Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: 2, Expired: true, Term: 1,
				LockDelays: []*cmdpb.LockDelay{{Prefix: "/e", DelayMs: 1}}}}})
		for _, fs := range []*FSM{a, b} {
			fs.ApplyBatch(prefix)
			fs.Apply(&raft.Log{Index: uint64(len(prefix) + 1), Term: 1, Type: raft.LogCommand, Data: data})
		}
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("diverged")
		}
	})
}

func BenchmarkApplySetData(b *testing.B) {
	f := New(Options{})
	f.ApplyBatch(logOf(b, open(1, "pw"), write(2, 1, 1, create("/k", "", cmdpb.Kind_PERSISTENT, false))))
	data := make([]byte, 100)
	logs := make([]*raft.Log, 0, 64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := write(int64(i), 1, int64(i+2), &cmdpb.Write{LowestPendingXid: int64(i + 2), Op: &cmdpb.Write_SetData{SetData: &cmdpb.SetData{Path: "/k", Data: data, Version: -1}}})
		enc, _ := proto.Marshal(cmd)
		logs = append(logs, &raft.Log{Index: uint64(i + 3), Type: raft.LogCommand, Data: enc})
		if len(logs) == cap(logs) || i == b.N-1 {
			f.ApplyBatch(logs)
			logs = logs[:0]
		}
	}
}

// TestExpiryFromAnotherTermIgnored: an expiry decided by a leader of one
// term but logged in another (a stale leader's decision) closes nothing.
func TestExpiryFromAnotherTermIgnored(t *testing.T) {
	f := New(Options{})
	expire := func(term uint64) *cmdpb.Command {
		return &cmdpb.Command{TimeMs: 5, Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: 1, Expired: true, Term: term}}}
	}
	logs := logOf(t, open(1, "pw"), write(2, 1, 1, create("/e", "", cmdpb.Kind_EPHEMERAL, false)), expire(1), expire(2))
	logs[2].Term, logs[3].Term = 2, 2 // decided in term 1, logged in term 2
	for _, l := range logs[:3] {
		f.Apply(l)
	}
	f.Read(func(v View) {
		if _, ok := v.Sessions.Get(1); !ok {
			t.Fatal("a stale expiry closed the session")
		}
	})
	f.Apply(logs[3])
	f.Read(func(v View) {
		if _, ok := v.Sessions.Get(1); ok {
			t.Fatal("an expiry of the entry's own term did not close the session")
		}
		if _, err := v.Tree.Exists("/e"); !errors.Is(err, tree.ErrNoNode) {
			t.Fatal("ephemeral survived its expired session")
		}
	})
}

// TestLastChangeSkipsNoops: a no-op moves the applied index but not
// LastChange (a read sees the same state at either, which is what lets the
// leader hand out a read index below trailing no-ops); every other entry
// moves both, and a restore sets both to the snapshot's index.
func TestLastChangeSkipsNoops(t *testing.T) {
	noop := func(ms int64) *cmdpb.Command {
		return &cmdpb.Command{TimeMs: ms, Cmd: &cmdpb.Command_Noop{Noop: &cmdpb.Noop{}}}
	}
	f := New(Options{})
	logs := logOf(t, open(1000, "p"), noop(1001), write(1002, 1, 1, create("/a", "x", cmdpb.Kind_PERSISTENT, false)), noop(1003), noop(1004))
	check := func(applied, changed int64) {
		t.Helper()
		if f.AppliedIndex() != applied || f.LastChange() != changed {
			t.Fatalf("applied %d, last change %d; want %d, %d", f.AppliedIndex(), f.LastChange(), applied, changed)
		}
	}
	f.ApplyBatch(logs[:2])
	check(2, 1)
	f.ApplyBatch(logs[2:])
	check(5, 3)
	// A configuration entry counts as a change.
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "1", Address: "127.0.0.1:1"}}})
	f.ApplyBatch([]*raft.Log{{Index: 6, Term: 1, Type: raft.LogConfiguration, Data: conf}})
	check(6, 6)
	f.ApplyBatch(logOf(t, noop(1005), noop(1006), noop(1007), noop(1008), noop(1009), noop(1010), noop(1011))[6:])
	check(7, 6)
	f.ApplyBatch(logOf(t, noop(1005), noop(1006), noop(1007), noop(1008), noop(1009), noop(1010), noop(1011), open(1012, "q"))[7:])
	check(8, 8)

	g := New(Options{})
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	if g.AppliedIndex() != 8 || g.LastChange() != 8 {
		t.Fatalf("after restore: applied %d, last change %d; want 8, 8", g.AppliedIndex(), g.LastChange())
	}
}

// TestSessionMoved: a session belongs to the server it opened or last
// resumed on (ResumeSession). A write or a close from another server fails
// with SESSION_MOVED and is not cached, so the client's retry of the same
// xid from its new server applies; entries that name no server (logged
// before owners were recorded) are not checked; the owner is in snapshots.
func TestSessionMoved(t *testing.T) {
	f := New(Options{})
	var resumed []Resumed
	f.SetObserver(observerFunc(func(a *Applied) {
		if a.Resumed != nil {
			resumed = append(resumed, *a.Resumed)
		}
	}))
	from := func(server string, c *cmdpb.Command) *cmdpb.Command {
		c.GetWrite().Server = server
		return c
	}
	openOn := open(10, "pw")
	openOn.GetOpenSession().Server = "A"
	closeFrom := func(server string, xid int64) *cmdpb.Command {
		return &cmdpb.Command{TimeMs: 90, Cmd: &cmdpb.Command_CloseSession{CloseSession: &cmdpb.CloseSession{SessionId: 1, Xid: xid, Server: server}}}
	}
	logs := logOf(t,
		openOn, // 1
		from("A", write(20, 1, 1, create("/a", "", cmdpb.Kind_PERSISTENT, false))),                                                     // 2: the owner writes
		&cmdpb.Command{TimeMs: 30, Cmd: &cmdpb.Command_ResumeSession{ResumeSession: &cmdpb.ResumeSession{SessionId: 1, Server: "B"}}},  // 3
		from("A", write(40, 1, 2, create("/b", "", cmdpb.Kind_PERSISTENT, false))),                                                     // 4: moved
		from("B", write(50, 1, 2, create("/b", "", cmdpb.Kind_PERSISTENT, false))),                                                     // 5: the retry applies
		from("", write(60, 1, 3, create("/c", "", cmdpb.Kind_PERSISTENT, false))),                                                      // 6: no server: not checked
		&cmdpb.Command{TimeMs: 70, Cmd: &cmdpb.Command_ResumeSession{ResumeSession: &cmdpb.ResumeSession{SessionId: 99, Server: "B"}}}, // 7: unknown session
		closeFrom("A", 4), // 8: moved
	)
	var res []*cmdpb.Result
	for _, l := range logs {
		r, _ := f.Apply(l).(*cmdpb.Result)
		res = append(res, r)
	}
	if res[1].Code != cmdpb.Code_OK {
		t.Fatalf("the owner's write: %v", res[1])
	}
	if res[3].Code != cmdpb.Code_SESSION_MOVED {
		t.Fatalf("the old server's write after the move: %v", res[3])
	}
	if res[4].Code != cmdpb.Code_OK || res[4].Path != "/b" || res[4].Zxid != 5 {
		t.Fatalf("the retry from the new owner: %v", res[4])
	}
	if res[5].Code != cmdpb.Code_OK {
		t.Fatalf("a write naming no server: %v", res[5])
	}
	if res[7].Code != cmdpb.Code_SESSION_MOVED {
		t.Fatalf("the old server's close: %v", res[7])
	}
	if len(resumed) != 1 || resumed[0] != (Resumed{Session: 1, Server: "B"}) {
		t.Fatalf("resumed: %+v", resumed)
	}
	snap := snapshotBytes(t, f)
	g := New(Options{})
	if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	g.Read(func(v View) {
		if info, ok := v.Sessions.Get(1); !ok || info.Owner != "B" {
			t.Fatalf("restored session: %+v %v", info, ok)
		}
	})
	// The new owner closes it.
	if r, _ := g.Apply(&raft.Log{Index: 9, Term: 1, Type: raft.LogCommand, Data: mustMarshal(t, closeFrom("B", 5))}).(*cmdpb.Result); r == nil || r.Code != cmdpb.Code_OK {
		t.Fatalf("the owner's close: %v", r)
	}
}

type observerFunc func(*Applied)

func (o observerFunc) Applied(a *Applied) { o(a) }
func (o observerFunc) Restored()          {}

func mustMarshal(t *testing.T, c *cmdpb.Command) []byte {
	t.Helper()
	b, err := proto.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNullData: a create or setData flagged null stores null data, one not
// flagged (an entry from before the flag, or the public API's) empty data,
// through the log, a multi and a snapshot.
func TestNullData(t *testing.T) {
	f := New(Options{})
	null := create("/null", "", cmdpb.Kind_PERSISTENT, false)
	null.GetCreate().NullData = true
	setNull := &cmdpb.Write{Op: &cmdpb.Write_SetData{SetData: &cmdpb.SetData{Path: "/set", NullData: true, Version: -1}}}
	multi := &cmdpb.Write{Op: &cmdpb.Write_Multi{Multi: &cmdpb.Multi{Ops: []*cmdpb.Op{
		{Op: &cmdpb.Op_Create{Create: &cmdpb.Create{Path: "/m-null", NullData: true}}},
		{Op: &cmdpb.Op_Create{Create: &cmdpb.Create{Path: "/m-empty"}}},
		{Op: &cmdpb.Op_SetData{SetData: &cmdpb.SetData{Path: "/null", Version: -1}}},
	}}}}
	for _, l := range logOf(t,
		open(10, "pw"),
		write(20, 1, 1, null),
		write(30, 1, 2, create("/empty", "", cmdpb.Kind_PERSISTENT, false)),
		write(40, 1, 3, create("/set", "x", cmdpb.Kind_PERSISTENT, false)),
		write(50, 1, 4, setNull),
		write(60, 1, 5, multi),
	) {
		if r, ok := f.Apply(l).(*cmdpb.Result); ok && r.Code != cmdpb.Code_OK {
			t.Fatalf("entry %d: %v", l.Index, r)
		}
	}
	want := map[string]bool{"/null": false, "/empty": false, "/set": true, "/m-null": true, "/m-empty": false}
	check := func(f *FSM, what string) {
		t.Helper()
		f.Read(func(v View) {
			for p, null := range want {
				d, _, err := v.Tree.Get(p)
				if err != nil || (d == nil) != null || len(d) != 0 {
					t.Errorf("%s: %s: %q (nil %v), %v; want null %v", what, p, d, d == nil, err, null)
				}
			}
		})
	}
	check(f, "applied")
	g := New(Options{})
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	check(g, "restored")
}
