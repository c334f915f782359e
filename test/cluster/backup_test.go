package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/backup"
)

// saveBackup streams a backup from a server into file.
func saveBackup(t *testing.T, api apipb.CoordClient, file string) *backup.Info {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := api.SaveSnapshot(ctx, &apipb.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("receiving the backup: %v", err)
		}
		if _, err := f.Write(chunk.Data); err != nil {
			t.Fatal(err)
		}
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	info, _, err := backup.Read(f, st.Size())
	if err != nil {
		t.Fatalf("the backup saved: %v", err)
	}
	return info
}

// TestBackupAndRestore: a backup saved from a follower of a 3-node cluster
// under writes, restored into a new 3-node cluster, holds every write
// acknowledged before the save; the new cluster has none of the old
// sessions or their ephemerals, goes on from the backup's index, and takes
// writes.
func TestBackupAndRestore(t *testing.T) {
	c := New(t, 3, Options{SnapshotThreshold: 256, TrailingLogs: 64})
	load := startMemberLoad(t, c.Servers(), 3)
	load.waitWrites(c, 200)
	guard := connect(t, c.Servers()...)
	aliceACL := client.DigestACL(client.PermAll, "alice", "pw")
	if _, err := guard.Create(ctxT(t), "/guarded", []byte("g"), client.CreateMode{ACL: aliceACL}); err != nil {
		t.Fatal(err)
	}
	before := load.ackedSoFar()
	file := filepath.Join(t.TempDir(), "backup.coordd")
	info := saveBackup(t, c.Admin(c.Follower()), file)
	load.waitWrites(c, 100) // the writes went on during the save
	load.finish(c, c.Servers())
	h := info.Header
	if h.Index <= 0 || h.Term == 0 || h.Znodes < int64(len(before)) || h.Sessions < 3 || h.Ephemerals != 3 || len(h.Members) != 3 {
		t.Fatalf("backup header %+v", h)
	}
	c.StopAll()

	r := New(t, 3, Options{Seed: func(cfg rpc.Config) error {
		_, err := rpc.RestoreBackup(file, rpc.RestoreConfig{ID: cfg.ID, DataDir: cfg.DataDir, PeerAddr: cfg.PeerAddr, Peers: cfg.Peers})
		return err
	}})
	ctx := ctxT(t)
	for _, addr := range r.Servers() {
		cl := connect(t, addr)
		if err := cl.Sync(ctx, "/"); err != nil {
			t.Fatal(err)
		}
		kids, _, err := cl.Children(ctx, "/load")
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, k := range kids {
			have["/load/"+k] = true
		}
		for _, p := range before {
			if !have[p] {
				t.Fatalf("server %s of the restored cluster lacks %s, acknowledged before the save", addr, p)
			}
		}
		if eph, _, err := cl.Children(ctx, "/eph"); err != nil || len(eph) != 0 {
			t.Fatalf("ephemerals of the old sessions on %s: %v %v", addr, eph, err)
		}
		if cl.LastZxid() <= h.Index {
			t.Fatalf("the restored cluster is at zxid %d, not past the backup's %d", cl.LastZxid(), h.Index)
		}
	}
	st, err := r.Admin(0).Status(ctx, &apipb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 3 || st.Znodes != h.Znodes-h.Ephemerals || st.Sessions > 3 {
		t.Fatalf("restored cluster status: %d members, %d znodes (backup %d, %d ephemerals), %d sessions", len(st.Members), st.Znodes, h.Znodes, h.Ephemerals, st.Sessions)
	}
	cl := connect(t, r.Servers()...)
	if _, _, err := cl.Get(ctx, "/guarded"); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("/guarded on the restored cluster, without alice: %v, want NoAuth (its ACL kept)", err)
	}
	if err := cl.AddAuth(ctx, "digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	if acl, _, err := cl.GetACL(ctx, "/guarded"); err != nil || fmt.Sprint(acl) != fmt.Sprint(aliceACL) {
		t.Fatalf("the ACL of /guarded after the restore: %v (%v), want %v", acl, err, aliceACL)
	}
	p, err := cl.Create(ctx, "/load/w0-", nil, client.CreateMode{Sequential: true})
	if err != nil {
		t.Fatalf("a write on the restored cluster: %v", err)
	}
	if _, st, err := cl.Get(ctx, p); err != nil || st.Czxid <= h.Index {
		t.Fatalf("new node %s: czxid %d, backup index %d (%v)", p, st.Czxid, h.Index, err)
	}
}
