package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm/cmdpb"
)

// TestBackupIsTheStateWhenCaptured: a backup holds the state at its
// capture, with its index and term, whatever is applied after.
func TestBackupIsTheStateWhenCaptured(t *testing.T) {
	f := New(Options{})
	logs := logOf(t, open(1000, "p1"),
		write(1001, 1, 1, create("/a", "x", cmdpb.Kind_PERSISTENT, false)),
		write(1002, 1, 2, create("/e", "", cmdpb.Kind_EPHEMERAL, false)))
	for _, l := range logs {
		l.Term = 5
	}
	f.ApplyBatch(logs)
	want := snapshotBytes(t, f)
	b := f.Backup()
	f.ApplyBatch([]*raft.Log{logOf(t, open(1003, "p2"))[0]})
	f.ApplyBatch([]*raft.Log{{Index: 5, Term: 6, Type: raft.LogCommand, Data: logOf(t, write(1004, 1, 3, create("/later", "", cmdpb.Kind_PERSISTENT, false)))[0].Data}})
	var got bytes.Buffer
	if _, err := b.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the backup changed with entries applied after its capture")
	}
	if b.Index != 3 || b.Term != 5 || b.Znodes != 3 || b.Sessions != 1 || b.Ephemerals != 1 {
		t.Fatalf("backup %+v", b)
	}
}

// TestReseed: the seed of a new cluster keeps every persistent node,
// closes every session and deletes their ephemerals, one entry after the
// backup; it is a snapshot any FSM restores.
func TestReseed(t *testing.T) {
	f := New(Options{})
	f.ApplyBatch(logOf(t, open(1000, "p1"), open(1001, "p2"),
		write(1002, 1, 1, create("/app", "cfg", cmdpb.Kind_PERSISTENT, false)),
		write(1003, 1, 2, create("/app/e1", "", cmdpb.Kind_EPHEMERAL, false)),
		write(1004, 2, 1, create("/app/e2-", "", cmdpb.Kind_EPHEMERAL, true)),
		write(1005, 2, 2, create("/app/q-", "job", cmdpb.Kind_PERSISTENT, true))))
	seed, err := Reseed(bytes.NewReader(snapshotBytes(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	if seed.Index != 7 || seed.Sessions != 2 || seed.Ephemerals != 2 || seed.Znodes != 3 {
		t.Fatalf("seed %+v", seed)
	}
	var buf bytes.Buffer
	if _, err := seed.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g := New(Options{})
	if err := g.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	g.Read(func(v View) {
		if v.Applied != 7 || v.Sessions.Len() != 0 || v.Tree.Ephemerals() != 0 {
			t.Fatalf("restored seed: applied %d, %d sessions, %d ephemerals", v.Applied, v.Sessions.Len(), v.Tree.Ephemerals())
		}
		kids, st, err := v.Tree.Children("/app")
		if err != nil || len(kids) != 1 || kids[0] != "q-0000000002" || st.Pzxid != 7 {
			t.Fatalf("/app after the seed: %v %+v %v", kids, st, err)
		}
		if data, _, err := v.Tree.Get("/app"); err != nil || string(data) != "cfg" {
			t.Fatalf("/app: %q %v", data, err)
		}
	})
	// Garbage is refused.
	if _, err := Reseed(bytes.NewReader([]byte("not a snapshot at all, not even close"))); err == nil {
		t.Fatal("Reseed accepted garbage")
	}
	good := snapshotBytes(t, f)
	if _, err := Reseed(bytes.NewReader(good[:len(good)-3])); err == nil {
		t.Fatalf("Reseed accepted a truncated snapshot: %v", err)
	}
}
