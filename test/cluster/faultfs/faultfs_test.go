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

// TestLostSync: a crash forgets the writes never synced and the entries of
// directories never synced, and keeps the rest.
func TestLostSync(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("faultfs mounts a FUSE file system: run as root (make diskfault)")
	}
	backing, mnt := t.TempDir(), t.TempDir()
	f, err := Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Unmount()
	write := func(name, data string, syncFile, syncDir bool) {
		t.Helper()
		fh, err := os.OpenFile(filepath.Join(mnt, name), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteString(data); err != nil {
			t.Fatal(err)
		}
		if syncFile {
			if err := fh.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		fh.Close()
		if syncDir {
			d, err := os.Open(filepath.Dir(filepath.Join(mnt, name)))
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			d.Close()
		}
	}
	write("kept", "old", true, true)
	f.LoseUnsynced(true)
	write("synced", "new", true, true) // durable
	write("kept", "new but unsynced", false, false)
	write("noentry", "synced, its entry not", true, false)
	if err := os.Rename(filepath.Join(mnt, "synced"), filepath.Join(mnt, "moved")); err != nil {
		t.Fatal(err)
	}
	if files, entries := f.Lost(); files == 0 || entries == 0 {
		t.Fatalf("nothing to lose: %d files, %d entries", files, entries)
	}
	f.Crash()
	if err := os.WriteFile(filepath.Join(mnt, "kept"), []byte("after"), 0o644); err == nil {
		t.Fatal("a write after the crash succeeded")
	}
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"kept": "old", "synced": "new", "noentry": "", "moved": ""} {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if want == "" {
			if !os.IsNotExist(err) {
				t.Errorf("%s: %q, %v; want it gone", name, got, err)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
}
