package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"
)

// TestDataDirLock: a data dir held by one server is refused to another at
// once, with the holder's pid, whatever store it holds (raft-wal's,
// raft-boltdb's, or none yet); once the holder closes, the dir starts
// again. A second server used to wait forever for raft-wal's bbolt lock.
func TestDataDirLock(t *testing.T) {
	for _, kind := range []string{RaftLogWAL, RaftLogBolt} {
		t.Run(kind, func(t *testing.T) {
			first := newTestNodeWith(t, "1", func(c *Config) { c.RaftLog = kind })
			second := testConfig(t, "1")
			second.DataDir, second.RaftLog = first.cfg.DataDir, kind
			start := time.Now()
			n, err := NewNode(second)
			if err == nil {
				n.Close()
				t.Fatal("a second server started on a data dir in use")
			}
			want := fmt.Sprintf("data dir %s is in use by another coordd (pid %d)", first.cfg.DataDir, os.Getpid())
			if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), want) {
				t.Fatalf("second server: %v; want ErrDataDirInUse saying %q", err, want)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("the refusal took %v", d)
			}
			// The refused server released its ports.
			for _, a := range []string{second.ClientAddr, second.PeerAddr} {
				ln, err := net.Listen("tcp", a)
				if err != nil {
					t.Fatalf("%s after the refusal: %v", a, err)
				}
				ln.Close()
			}
			first.Close()
			m, err := NewNode(second)
			if err != nil {
				t.Fatalf("after the first server closed: %v", err)
			}
			m.Close()
		})
	}
}

// TestStoreFileHeldElsewhere: a data dir whose log store another process
// has open without the data dir's lock (a coordd older than the lock, a
// tool) is refused at once, naming the file, instead of waiting for it.
func TestStoreFileHeldElsewhere(t *testing.T) {
	for _, name := range []string{boltFile, filepath.Join(walDir, metadb.FileName)} {
		dir := t.TempDir()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = lockDataDir(dir)
		db.Close()
		if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), "another process has "+path+" open") {
			t.Errorf("%s held: %v", name, err)
		}
		l, err := lockDataDir(dir)
		if err != nil {
			t.Errorf("%s released: %v", name, err)
		}
		l.release()
	}
}

// TestStartAbandoned: a start whose context ends stops what it started and
// says so: the ports and the data dir are free again.
func TestStartAbandoned(t *testing.T) {
	c := testConfig(t, "1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n, err := NewNodeContext(ctx, c)
	if err == nil {
		n.Close()
		t.Fatal("a start with its context ended went on")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned start: %v", err)
	}
	for _, a := range []string{c.ClientAddr, c.PeerAddr} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s after the abandoned start: %v", a, err)
		}
		ln.Close()
	}
	l, err := lockDataDir(c.DataDir)
	if err != nil {
		t.Fatalf("the data dir after the abandoned start: %v", err)
	}
	l.release()
}
