package rpc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/raft-wal/metadb"
)

// A data dir belongs to one running server at a time. Two servers on one
// dir would each append to the log and write snapshots the other does not
// know of; the stores do not prevent it: raft-boltdb's and raft-wal's bbolt
// files take an flock, but raft-wal waits for it forever (coordd's second
// start on a dir in use used to hang there, silently), and the snapshot
// store takes none. So a server first takes an flock of its own on
// DataDir/coordd.lock, before any store opens, and holds it until Close;
// the lock file says which process holds it. The kernel drops the flock
// when the process ends, however it ends, so a crashed server leaves no
// stale lock (etcd and ZooKeeper lock their data dirs alike). The file
// itself stays: removing it on Close would let a third process lock a new
// file while a second holds the old one.

// lockFile is the data dir's lock, holding its holder's pid.
const lockFile = "coordd.lock"

// ErrDataDirInUse means another process holds the data dir: a coordd
// (or coordd restore) runs on it, or, for a store file alone, a tool or a
// coordd too old to take the data dir's lock has it open.
var ErrDataDirInUse = errors.New("rpc: data dir in use")

// inUseError is ErrDataDirInUse with the words that say who holds what.
type inUseError struct{ msg string }

func (e *inUseError) Error() string { return e.msg }
func (e *inUseError) Unwrap() error { return ErrDataDirInUse }

// dirLock is a data dir's lock, held while its file is open.
type dirLock struct{ f *os.File }

// lockDataDir creates dir if need be and takes its lock, without waiting:
// a dir another process holds is refused with ErrDataDirInUse, naming the
// holder's pid. It also refuses a dir whose log store file another process
// has open (storeFilesFree).
func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("rpc: data dir: %w", err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("rpc: data dir: %w", err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another coordd"
			if pid := holderPID(path); pid > 0 {
				holder += fmt.Sprintf(" (pid %d)", pid)
			}
			return nil, &inUseError{fmt.Sprintf("rpc: data dir %s is in use by %s", dir, holder)}
		}
		return nil, fmt.Errorf("rpc: locking data dir %s: %w", dir, err)
	}
	// The pid is written over the last holder's, then the rest cut: a
	// reader never sees an empty file once a pid was written.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if _, err := f.WriteAt(pid, 0); err == nil {
		err = f.Truncate(int64(len(pid)))
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("rpc: data dir: writing %s: %w", path, err)
	}
	if err := storeFilesFree(dir); err != nil {
		f.Close()
		return nil, err
	}
	return &dirLock{f: f}, nil
}

// release drops the lock (nil: nothing to drop).
func (l *dirLock) release() {
	if l != nil {
		l.f.Close()
	}
}

// holderPID reads the pid in a lock file; 0 when it holds none.
func holderPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// storeFilesFree refuses a data dir whose bbolt files (raft-boltdb's
// raft.db, raft-wal's wal/wal-meta.db) another process has locked: a
// coordd from before the data dir's lock, or a tool. bbolt holds an
// exclusive flock on the file while it is open for writing, so a shared
// one, tried and dropped at once, fails exactly then. Without this check
// raft-wal would wait for that lock forever.
func storeFilesFree(dir string) error {
	for _, name := range []string{boltFile, filepath.Join(walDir, metadb.FileName)} {
		path := filepath.Join(dir, name)
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("rpc: data dir: %w", err)
		}
		err = flock(f, syscall.LOCK_SH|syscall.LOCK_NB)
		f.Close() // drops the shared lock, if it was taken
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return &inUseError{fmt.Sprintf("rpc: data dir %s is in use: another process has %s open (a coordd that does not lock the data dir, or a tool): stop it first", dir, path)}
		}
		if err != nil {
			return fmt.Errorf("rpc: data dir: checking %s: %w", path, err)
		}
	}
	return nil
}

// flock is flock(2) on f, again when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
