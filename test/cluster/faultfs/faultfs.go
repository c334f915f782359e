// Package faultfs is a FUSE file system for tests: a loopback onto a
// directory of the real file system, whose faults a test turns on and off
// while a server runs on it. For now one fault: every fsync takes as long
// as the test says (a slow or failing disk); directories' syncs are
// not delayed. It is only for tests (the
// diskfault build tag, make diskfault): it needs root and /dev/fuse, and
// coordd's binaries never import it, nor the FUSE library it is built on
// (github.com/hanwen/go-fuse/v2).
package faultfs

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted fault file system.
type FS struct {
	// Dir is where it is mounted: what the test hands the server.
	Dir string

	server    *fuse.Server
	syncDelay atomic.Int64 // nanoseconds each fsync waits
	syncs     atomic.Int64 // fsyncs done (of files and directories)
}

// Mount mounts a loopback of backing (a directory) on mountpoint (an
// empty directory). Unmount it when done.
func Mount(backing, mountpoint string) (*FS, error) {
	f := &FS{Dir: mountpoint}
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	lr := root.(*fs.LoopbackNode)
	wrapped := &node{LoopbackNode: lr, f: f}
	lr.RootData.RootNode = wrapped
	timeout := time.Second
	srv, err := fs.Mount(mountpoint, wrapped, &fs.Options{
		// The kernel caches nothing the test changes behind its back:
		// there is nothing to change behind it, but attributes and
		// entries stay short-lived all the same.
		AttrTimeout:  &timeout,
		EntryTimeout: &timeout,
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
	f.server = srv
	return f, nil
}

// Unmount unmounts the file system; the files stay in the backing
// directory.
func (f *FS) Unmount() error {
	if err := f.server.Unmount(); err != nil {
		return fmt.Errorf("faultfs: unmounting %s: %w", f.Dir, err)
	}
	f.server.Wait()
	return nil
}

// SetSyncDelay makes every fsync from now on take d longer (0: none).
func (f *FS) SetSyncDelay(d time.Duration) { f.syncDelay.Store(int64(d)) }

// Syncs returns the number of fsyncs done so far.
func (f *FS) Syncs() int64 { return f.syncs.Load() }

// node is a loopback node whose fsyncs wait for the FS's delay. Every
// node below the root is one too (WrapChild).
type node struct {
	*fs.LoopbackNode
	f *FS
}

var (
	_ fs.NodeFsyncer     = (*node)(nil)
	_ fs.NodeWrapChilder = (*node)(nil)
)

// WrapChild implements fs.NodeWrapChilder.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), f: n.f}
}

// Fsync implements fs.NodeFsyncer: the delay, then the real fsync.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if d := time.Duration(n.f.syncDelay.Load()); d > 0 {
		time.Sleep(d)
	}
	n.f.syncs.Add(1)
	if s, ok := fh.(fs.FileFsyncer); ok {
		return s.Fsync(ctx, flags)
	}
	// A handle of a directory, or none: sync by path.
	fd, err := syscall.Open(n.path(), syscall.O_RDONLY, 0)
	if err != nil {
		return fs.ToErrno(err)
	}
	defer syscall.Close(fd)
	return fs.ToErrno(syscall.Fsync(fd))
}

// path returns the node's path in the backing directory.
func (n *node) path() string {
	return n.RootData.Path + string(os.PathSeparator) + n.Path(n.Root())
}
