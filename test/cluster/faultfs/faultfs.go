// Package faultfs is a FUSE file system for tests: a loopback onto a
// directory of the real file system, whose faults a test turns on and off
// while a server runs on it: every fsync takes as long as the test says (a
// slow or failing disk); and a crash forgets what was never synced, the
// writes to files and the entries of directories (LoseUnsynced, Crash,
// Restart: lostsync.go). It is only for tests (the
// diskfault build tag, make diskfault): it needs root and /dev/fuse, and
// coordd's binaries never import it, nor the FUSE library it is built on
// (github.com/hanwen/go-fuse/v2).
package faultfs

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// server is the mounted file system, in the process that serves it
// (serve.go).
type server struct {
	dir       string
	fuse      *fuse.Server
	syncDelay atomic.Int64 // nanoseconds each fsync waits
	syncs     atomic.Int64 // fsyncs done (of files and directories)
	lost      lost         // what a crash undoes (lostsync.go)
}

// mount mounts a loopback of backing (a directory) on mountpoint (an
// empty directory), served by this process.
func mount(backing, mountpoint string) (*server, error) {
	f := &server{dir: mountpoint}
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	lr := root.(*fs.LoopbackNode)
	wrapped := &node{LoopbackNode: lr, f: f}
	lr.RootData.RootNode = wrapped
	var none time.Duration
	srv, err := fs.Mount(mountpoint, wrapped, &fs.Options{
		// The kernel caches no entry and no attribute: Restart changes
		// the backing directory behind its back.
		AttrTimeout:     &none,
		EntryTimeout:    &none,
		NegativeTimeout: &none,
		MountOptions: fuse.MountOptions{
			FsName:      "faultfs",
			Name:        "faultfs",
			DirectMount: true, // root mounts it with mount(2), no fusermount
			AllowOther:  false,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("faultfs: mounting on %s: %w", mountpoint, err)
	}
	f.fuse = srv
	return f, nil
}

// unmount unmounts the file system; the files stay in the backing
// directory.
func (f *server) unmount() error {
	if err := f.fuse.Unmount(); err != nil {
		return fmt.Errorf("faultfs: unmounting %s: %w", f.dir, err)
	}
	f.fuse.Wait()
	return nil
}

// node is a loopback node whose fsyncs wait for the FS's delay. Every
// node below the root is one too (WrapChild).
type node struct {
	*fs.LoopbackNode
	f *server
}

var (
	_ fs.NodeFsyncer     = (*node)(nil)
	_ fs.NodeWrapChilder = (*node)(nil)
)

// WrapChild implements fs.NodeWrapChilder.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), f: n.f}
}

// Fsync implements fs.NodeFsyncer, for files and directories alike: the
// delay, then the real fsync.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if errno := n.f.lost.check(); errno != 0 {
		return errno
	}
	if d := time.Duration(n.f.syncDelay.Load()); d > 0 {
		time.Sleep(d)
	}
	n.f.syncs.Add(1)
	if s, ok := fh.(fs.FileFsyncer); ok {
		return s.Fsync(ctx, flags)
	}
	// A directory, or a file without a handle: sync by path.
	fd, err := syscall.Open(n.path(), syscall.O_RDONLY, 0)
	if err != nil {
		return fs.ToErrno(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Fsync(fd); err != nil {
		return fs.ToErrno(err)
	}
	n.f.lost.synced(n.path(), n.IsDir())
	return 0
}

// path returns the node's path in the backing directory.
func (n *node) path() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}
