package rpc

import (
	"errors"
	"log/slog"
	"sync"
	"syscall"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/rpc/metrics"
)

// A full disk (issue 37). A write to the data dir that fails for want of
// space fails as any failed write does: a leader whose append fails
// forgets the entries and steps down (rpc/third_party/raft, part 2), a
// follower answers the leader that it could not append, a snapshot is
// dropped and tried again later; nothing half-written is used (raft-wal
// rolls a failed batch back, bbolt a failed transaction, and a failed
// snapshot leaves nothing behind: rpc/third_party/raft, part 9). When
// space is freed, the next write succeeds and the server goes on by itself
// (a segment that could not be started is started by the next append:
// rpc/third_party/raft-wal, part 8). What this file adds is that the
// operator is told so in plain words: a log line, once, when a kind of
// write first fails for want of space, another when every kind succeeds
// again, and the metrics coordd_disk_full and
// coordd_disk_full_errors_total.

// spaceAgain is the free space at which a successful write clears every
// kind of write's full-disk state, not only its own.
const spaceAgain = 1 << 20

// isDiskFull reports whether err says the disk has no space left for the
// write (ENOSPC), or the user's quota none (EDQUOT).
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// diskSpace keeps, for each kind of write to the data dir, whether its
// last one failed for want of space, and tells the metrics and the log.
type diskSpace struct {
	dir string
	m   *metrics.Metrics
	log *slog.Logger

	mu   sync.Mutex
	full [3]bool // by metrics.DiskWrite
}

// diskWrites name each metrics.DiskWrite in the log.
var diskWrites = [...]string{
	metrics.DiskWriteLog:      "its Raft log",
	metrics.DiskWriteStable:   "its term and vote",
	metrics.DiskWriteSnapshot: "a snapshot",
}

// wrote notes how a write of w ended. Errors other than a full disk say
// nothing about space, and change nothing here.
func (d *diskSpace) wrote(w metrics.DiskWrite, err error) {
	full := err != nil && isDiskFull(err)
	if err != nil && !full {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	was, before := d.full[w], d.anyFull()
	d.full[w] = full
	if full {
		d.m.DiskFullError(w)
	} else if before && freeBytes(d.dir) >= spaceAgain {
		// The term and vote are written at elections only, snapshots
		// now and then: a log append that succeeds with space to spare
		// speaks for them too.
		d.full = [3]bool{}
	}
	after := d.anyFull()
	d.m.SetDiskFull(after)
	switch {
	case full && !was:
		what := "it goes on by itself once space is freed there"
		if w == metrics.DiskWriteLog {
			what = "it takes no part in new writes and serves no clients until space is freed there, and goes on by itself then"
		}
		d.log.Error("disk full: this server cannot write "+diskWrites[w]+" to its data dir; "+what,
			"dir", d.dir, "free_bytes", freeBytes(d.dir), "err", err)
	case before && !after:
		d.log.Info("disk space again: this server writes its data dir again", "dir", d.dir, "free_bytes", freeBytes(d.dir))
	}
}

// diskFullWhy is why a server whose log appends fail for want of space
// serves no clients (after "server ID ").
const diskFullWhy = "cannot write its Raft log: disk full"

// logFull reports whether the last append to the Raft log failed for want
// of space.
func (d *diskSpace) logFull() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.full[metrics.DiskWriteLog]
}

// isFull reports whether the last write of any kind failed for want of
// space (what coordd_disk_full says).
func (d *diskSpace) isFull() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.anyFull()
}

// anyFull is isFull, with d.mu held.
func (d *diskSpace) anyFull() bool {
	for _, f := range d.full {
		if f {
			return true
		}
	}
	return false
}

// freeBytes returns the space left to an unprivileged user on dir's file
// system, or -1 if it cannot say.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// spaceStableStore is the stable store as Raft sees it: its writes (the
// term, the vote) are noted in a diskSpace.
type spaceStableStore struct {
	raft.StableStore
	d *diskSpace
}

// Set implements raft.StableStore.
func (s spaceStableStore) Set(key, val []byte) error {
	err := s.StableStore.Set(key, val)
	s.d.wrote(metrics.DiskWriteStable, err)
	return err
}

// SetUint64 implements raft.StableStore.
func (s spaceStableStore) SetUint64(key []byte, val uint64) error {
	err := s.StableStore.SetUint64(key, val)
	s.d.wrote(metrics.DiskWriteStable, err)
	return err
}
