//go:build diskfault

package faultfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSyncDelay: files written through the mount land in the backing
// directory, and an fsync waits for the delay set.
func TestSyncDelay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("faultfs mounts a FUSE file system: run as root (make diskfault)")
	}
	backing, mnt := t.TempDir(), t.TempDir()
	f, err := Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	}()
	if err := os.MkdirAll(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		delay time.Duration
		min   time.Duration
	}{{0, 0}, {300 * time.Millisecond, 300 * time.Millisecond}} {
		f.SetSyncDelay(tc.delay)
		file, err := os.OpenFile(filepath.Join(mnt, "d", "x"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := file.Sync(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		file.Close()
		if took < tc.min {
			t.Fatalf("delay %v: fsync took %v", tc.delay, took)
		}
		got, err := os.ReadFile(filepath.Join(backing, "d", "x"))
		if err != nil || !bytes.Equal(got, []byte("hello")) {
			t.Fatalf("backing file: %q, %v", got, err)
		}
	}
	if f.Syncs() < 2 {
		t.Fatalf("%d fsyncs counted, want 2", f.Syncs())
	}
}
