package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm/cmdpb"
)

// applier feeds an FSM one command at a time, as consecutive log entries,
// and keeps what each entry did.
type applier struct {
	t     *testing.T
	f     *FSM
	index uint64
	last  Applied
}

func newApplier(t *testing.T) *applier {
	a := &applier{t: t, f: New(Options{})}
	a.f.SetObserver(observerFunc(func(x *Applied) { a.last = *x }))
	return a
}

// apply logs cmd as the next entry and returns what it did.
func (a *applier) apply(cmd *cmdpb.Command) Applied {
	a.t.Helper()
	data, err := proto.Marshal(cmd)
	if err != nil {
		a.t.Fatal(err)
	}
	a.index++
	a.last = Applied{}
	a.f.Apply(&raft.Log{Index: a.index, Term: 1, Type: raft.LogCommand, Data: data})
	return a.last
}

func setLevel(n int64) *cmdpb.Command {
	return &cmdpb.Command{Cmd: &cmdpb.Command_SetLevel{SetLevel: &cmdpb.SetLevel{Level: n}}}
}

func resume(id int64) *cmdpb.Command {
	return &cmdpb.Command{Cmd: &cmdpb.Command_ResumeSession{ResumeSession: &cmdpb.ResumeSession{SessionId: id}}}
}

// zkWrite is a write that came over ZooKeeper's protocol on connection
// epoch, the server's request number seq on it.
func zkWrite(sess, epoch, seq int64, w *cmdpb.Write) *cmdpb.Command {
	c := write(1, sess, seq, w)
	c.GetWrite().Epoch = epoch
	return c
}

func exists(f *FSM, p string) bool {
	ok := false
	f.Read(func(v View) {
		_, err := v.Tree.Exists(p)
		ok = err == nil
	})
	return ok
}

// TestConnectionKeyedWrites: from level 2 on, a write of ZooKeeper's
// protocol is known by its connection (the epoch of the entry that opened
// or resumed the session) and the server's number of it on that
// connection, never by the client's xid: a client that numbers its
// requests from 1 again on a new connection gets every one applied; a
// server's re-proposal of a write applies once; a write of a connection
// the session left is refused, and none of them gets another's reply.
func TestConnectionKeyedWrites(t *testing.T) {
	a := newApplier(t)
	a.apply(setLevel(2))
	a.apply(open(1, "pw")) // index 2: session 2, epoch 2
	const id = 2
	if r := a.apply(zkWrite(id, 2, 1, create("/a", "", cmdpb.Kind_PERSISTENT, false))); r.Result.Code != cmdpb.Code_OK || r.Epoch != 2 || r.Xid != 1 {
		t.Fatalf("first write: %+v", r)
	}
	// The same write proposed again (a leader change): applied once.
	if r := a.apply(zkWrite(id, 2, 1, create("/a", "", cmdpb.Kind_PERSISTENT, false))); r.Result.Code != cmdpb.Code_SYSTEM_ERROR {
		t.Fatalf("re-proposal: %+v", r.Result)
	}
	a.apply(zkWrite(id, 2, 2, &cmdpb.Write{Op: &cmdpb.Write_SetData{SetData: &cmdpb.SetData{Path: "/a", Data: []byte("x"), Version: -1}}}))
	// The client connects again: epoch 6, the resume's index.
	r := a.apply(resume(id))
	if r.Resumed == nil || r.Resumed.Epoch != 6 {
		t.Fatalf("resume: %+v", r.Resumed)
	}
	// Numbered from 1 again on the new connection: a new request, applied.
	if r := a.apply(zkWrite(id, 6, 1, create("/b", "", cmdpb.Kind_PERSISTENT, false))); r.Result.Code != cmdpb.Code_OK || r.Result.Path != "/b" {
		t.Fatalf("first write of the new connection: %+v", r.Result)
	}
	if !exists(a.f, "/b") {
		t.Fatal("/b was not created")
	}
	// A write of the old connection, late: refused, nothing applied.
	if r := a.apply(zkWrite(id, 2, 3, create("/c", "", cmdpb.Kind_PERSISTENT, false))); r.Result.Code != cmdpb.Code_SESSION_MOVED {
		t.Fatalf("write of a replaced connection: %+v", r.Result)
	}
	if exists(a.f, "/c") {
		t.Fatal("a replaced connection's write applied")
	}
	// Nothing is cached for ZooKeeper's writes: coordd's own retries keep
	// their cache.
	a.f.Read(func(v View) {
		if _, _, ok := v.Sessions.Reply(id, 1); ok {
			t.Fatal("a reply of a connection-keyed write was cached")
		}
	})
	// The epochs survive a snapshot, and the level with them.
	g := New(Options{})
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, a.f)))); err != nil {
		t.Fatal(err)
	}
	if g.ClusterLevel() != 2 {
		t.Fatalf("level %d after a restore", g.ClusterLevel())
	}
	g.Read(func(v View) {
		if e, q := v.Sessions.Epoch(id); e != 6 || q != 1 {
			t.Fatalf("epoch %d, request %d after a restore", e, q)
		}
	})
}

// TestLevelOneKeepsTheOldRules: until the cluster is raised to level 2, no
// epoch is recorded (an older server applying the same log would not
// record one), and snapshots keep the format an older server reads.
func TestLevelOneKeepsTheOldRules(t *testing.T) {
	a := newApplier(t)
	a.apply(open(1, "pw"))
	if r := a.apply(resume(1)); r.Resumed == nil || r.Resumed.Epoch != 0 {
		t.Fatalf("resume at level 1: %+v", r.Resumed)
	}
	a.apply(write(1, 1, 1, create("/a", "", cmdpb.Kind_PERSISTENT, false)))
	a.f.Read(func(v View) {
		if e, _ := v.Sessions.Epoch(1); e != 0 {
			t.Fatalf("epoch %d recorded at level 1", e)
		}
		if _, d, ok := v.Sessions.Reply(1, 1); !ok || d != 0 {
			t.Fatalf("reply at level 1: digest %x, cached %v", d, ok)
		}
	})
	if snap := snapshotBytes(t, a.f); !bytes.HasPrefix(snap, []byte("COORDSN1")) {
		t.Fatalf("level 1 snapshot starts %q", snap[:8])
	}
	a.apply(setLevel(2))
	if snap := snapshotBytes(t, a.f); !bytes.HasPrefix(snap, []byte("COORDSN2")) {
		t.Fatalf("level 2 snapshot starts %q", snap[:8])
	}
	// Levels never go down.
	a.apply(setLevel(1))
	if a.f.ClusterLevel() != 2 {
		t.Fatalf("level %d after a lower SetLevel", a.f.ClusterLevel())
	}
}

// TestRetryMustBeTheSameRequest: coordd's own client keys its writes by its
// xid, and a retry gets the first outcome; from level 2 on, only a retry of
// the same request does. Another request with a used xid is refused and
// changes nothing, never answered with the first request's outcome.
func TestRetryMustBeTheSameRequest(t *testing.T) {
	a := newApplier(t)
	a.apply(setLevel(2))
	a.apply(open(1, "pw"))
	first := a.apply(write(1, 2, 7, create("/a", "1", cmdpb.Kind_PERSISTENT, false))).Result
	if first.Code != cmdpb.Code_OK {
		t.Fatal(first)
	}
	retry := a.apply(write(1, 2, 7, create("/a", "1", cmdpb.Kind_PERSISTENT, false))).Result
	if !proto.Equal(retry, first) {
		t.Fatalf("retry got %+v, want the first outcome %+v", retry, first)
	}
	other := a.apply(write(1, 2, 7, create("/other", "", cmdpb.Kind_PERSISTENT, false))).Result
	if other.Code != cmdpb.Code_BAD_ARGUMENTS || other.Path != "" {
		t.Fatalf("another request with xid 7: %+v", other)
	}
	if exists(a.f, "/other") {
		t.Fatal("the other request applied")
	}
	// A ZooKeeper client's renumbered xid 7 is not a retry either way.
	if r := a.apply(zkWrite(2, 2, 1, create("/zk", "", cmdpb.Kind_PERSISTENT, false))).Result; r.Code != cmdpb.Code_OK || r.Path != "/zk" {
		t.Fatalf("ZooKeeper-protocol write: %+v", r)
	}
}

// TestResumeEpochs: from level 2 on, a resume names the epoch it gives the
// session and applies only above the current one: a server's re-proposal
// of it, or of an earlier resume, changes neither the owner nor the epoch,
// so the connection that made it goes on being the session's.
func TestResumeEpochs(t *testing.T) {
	a := newApplier(t)
	a.apply(setLevel(2))
	a.apply(open(1, "pw")) // session 2, epoch 2
	resumeAt := func(server string, epoch int64) *cmdpb.Command {
		return &cmdpb.Command{Cmd: &cmdpb.Command_ResumeSession{ResumeSession: &cmdpb.ResumeSession{SessionId: 2, Server: server, Epoch: epoch}}}
	}
	steps := []struct {
		server      string
		epoch       int64
		stale       bool
		owner       string
		wantEpochOf int64
	}{
		{"b", 3, false, "b", 3},
		{"b", 3, true, "b", 3}, // the same resume again
		{"c", 5, false, "c", 5},
		{"b", 3, true, "c", 5}, // an earlier one again: the owner stays
		{"b", 4, true, "c", 5}, // one that lost the race
		{"b", 6, false, "b", 6},
	}
	for i, s := range steps {
		r := a.apply(resumeAt(s.server, s.epoch)).Resumed
		if r == nil || r.Stale != s.stale || r.Epoch != s.epoch {
			t.Fatalf("step %d: %+v", i, r)
		}
		a.f.Read(func(v View) {
			owner, _ := v.Sessions.Owner(2)
			e, _ := v.Sessions.Epoch(2)
			if owner != s.owner || e != s.wantEpochOf {
				t.Fatalf("step %d: owner %s epoch %d; want %s %d", i, owner, e, s.owner, s.wantEpochOf)
			}
		})
	}
	if r := a.apply(&cmdpb.Command{Cmd: &cmdpb.Command_ResumeSession{ResumeSession: &cmdpb.ResumeSession{SessionId: 99, Server: "b", Epoch: 9}}}).Resumed; r != nil {
		t.Fatalf("resume of an unknown session: %+v", r)
	}
}
