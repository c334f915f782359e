package rpc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/backup"
)

// backupOf saves a backup of n's state into a file and returns its path.
func backupOf(t *testing.T, n *Node) string {
	t.Helper()
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	chunks := 0
	err := admin{n}.SaveSnapshot(ctx, func(c *apipb.SnapshotChunk) error {
		chunks++
		buf.Write(c.Data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if chunks < 2 {
		t.Fatalf("the backup came in %d chunk(s) of at most %d bytes: %d bytes", chunks, snapshotChunk, buf.Len())
	}
	file := filepath.Join(t.TempDir(), "backup")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestRestoreBackup: a backup restores into an empty data dir, from which a
// server starts with the state; a truncated or corrupt file, a data dir
// with state and a server missing from the peers are refused, and the data
// dir is left without Raft state.
func TestRestoreBackup(t *testing.T) {
	n := singleNode(t)
	waitFor(t, n.LeaderReady)
	s := newSession(t, n)
	big := bytes.Repeat([]byte("x"), 300<<10) // a backup of several chunks
	for _, p := range []string{"/a", "/b", "/c", "/d"} {
		if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: p, Data: big}}}); r.Error != apipb.ErrorCode_OK {
			t.Fatal(r)
		}
	}
	if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/eph", Kind: apipb.NodeKind_EPHEMERAL}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatal(r)
	}
	file := backupOf(t, n)
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfg := RestoreConfig{ID: "1", DataDir: dir}
	bad := func(name string, b []byte) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// An empty data dir that a server (here: this process) holds.
	held := t.TempDir()
	lock, err := lockDataDir(held)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.release()
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	for _, tc := range []struct {
		file string
		cfg  RestoreConfig
		want error
	}{
		{bad("truncated", good[:len(good)/2]), cfg, backup.ErrTruncated},
		{bad("corrupt", flipped), cfg, backup.ErrCorrupt},
		{bad("empty", nil), cfg, backup.ErrTruncated},
		{bad("other", []byte("#!/bin/sh\necho this is not a backup\n")), cfg, backup.ErrNotBackup},
		{file, RestoreConfig{ID: "1", DataDir: n.cfg.DataDir}, ErrRestoreNotEmpty},
		{file, RestoreConfig{ID: "1", DataDir: held}, ErrDataDirInUse},
	} {
		if _, err := RestoreBackup(tc.file, tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("restoring %s into %s: %v, want %v", filepath.Base(tc.file), tc.cfg.DataDir, err, tc.want)
		}
	}
	if _, err := RestoreBackup(file, RestoreConfig{ID: "4", DataDir: dir, Peers: []Peer{{ID: "1", Addr: "127.0.0.1:1"}}}); err == nil || !strings.Contains(err.Error(), "not in the peers list") {
		t.Errorf("a server missing from the peers: %v", err)
	}
	if hasRaftState(dir) {
		t.Fatal("a refused restore left Raft state behind")
	}

	applied := n.fsm.AppliedIndex()
	n.Close()
	c := testConfig(t, "1")
	c.DataDir = dir
	r, err := RestoreBackup(file, RestoreConfig{ID: "1", DataDir: dir, PeerAddr: c.PeerAddr})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sessions != 1 || r.Ephemerals != 1 || r.Index <= r.Backup.Header.Index {
		t.Fatalf("restored %+v", r)
	}
	m, err := NewNode(c)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	waitLeader(t, m)
	s = newSession(t, m)
	for _, p := range []string{"/a", "/d"} {
		if r := s.do(&apipb.Request{Op: &apipb.Request_GetData{GetData: &apipb.GetDataRequest{Path: p}}}); !bytes.Equal(r.GetGetData().GetData(), big) {
			t.Fatalf("%s after the restore: %v", p, r.Error)
		}
	}
	if r := s.do(&apipb.Request{Op: &apipb.Request_Exists{Exists: &apipb.ExistsRequest{Path: "/eph"}}}); r.Error != apipb.ErrorCode_OK || r.GetExists().GetStat() != nil {
		t.Fatalf("the old session's ephemeral after the restore: %v", r)
	}
	if m.fsm.AppliedIndex() <= applied {
		t.Fatalf("the restored server is at index %d, the backup's server was at %d", m.fsm.AppliedIndex(), applied)
	}
	// A restored data dir is no joiner's.
	m.Close()
	c.Join = true
	if _, err := NewNode(c); !errors.Is(err, ErrJoinNotEmpty) {
		t.Fatalf("--join on a restored data dir: %v", err)
	}
}
