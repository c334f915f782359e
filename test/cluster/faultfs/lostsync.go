package faultfs

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Lost fsyncs, as lazyfs (etcd's robustness tests) makes them: with
// LoseUnsynced on, the file system remembers what a crash would lose —
// the content of each file as it was at its last fsync, and each entry
// created or renamed in a directory since that directory's last fsync —
// and a crash puts it back so: the writes that were never synced are gone,
// and so are the entries whose directory was never synced, whatever their
// files held. Unlinks are taken as durable at once (not undone).

// lost is what a crash would undo.
type lost struct {
	mu      sync.Mutex
	on      bool
	frozen  bool
	images  map[string][]byte // file -> its content at its last fsync (nil: it did not exist)
	entries map[string][]undo // directory -> what changed in it since its last fsync, in order
}

// undo is a change to a directory that a crash undoes.
type undo struct {
	path string // the entry made (created, or renamed to)
	from string // for a rename, where it came from; "" for a creation
}

// loseUnsynced turns the remembering on or off. Turned on, what was
// written before counts as synced.
func (f *server) loseUnsynced(on bool) {
	f.lost.mu.Lock()
	defer f.lost.mu.Unlock()
	f.lost.on = on
	f.lost.images = map[string][]byte{}
	f.lost.entries = map[string][]undo{}
}

// crash freezes the file system, as a machine that stops: every write,
// sync and change of a directory fails with EIO from now on, until
// restart.
func (f *server) crash() {
	f.lost.mu.Lock()
	defer f.lost.mu.Unlock()
	f.lost.frozen = true
}

// restart undoes what was never synced (with LoseUnsynced on: the files'
// unsynced writes, the directories' unsynced entries) and thaws the file
// system, as the machine that comes back.
func (f *server) restart() error {
	l := &f.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	for path, img := range l.images {
		if img == nil {
			continue // made since; its entry goes below, or it stays empty
		}
		if err := os.WriteFile(path, img, 0o644); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	for dir, us := range l.entries {
		for i := len(us) - 1; i >= 0; i-- {
			u := us[i]
			var err error
			if u.from == "" {
				err = os.RemoveAll(u.path)
			} else {
				err = os.Rename(u.path, u.from)
			}
			if err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		delete(l.entries, dir)
	}
	l.images = map[string][]byte{}
	l.frozen = false
	return nil
}

// lostNow reports how many files hold unsynced writes and how many directory
// entries are unsynced now: what restart would undo.
func (f *server) lostNow() (files, entries int) {
	f.lost.mu.Lock()
	defer f.lost.mu.Unlock()
	for _, us := range f.lost.entries {
		entries += len(us)
	}
	return len(f.lost.images), entries
}

// changing is called before path's content changes: it keeps the content
// as last synced, once. It fails with EIO once frozen.
func (l *lost) changing(path string) syscall.Errno {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return syscall.EIO
	}
	if !l.on {
		return 0
	}
	if _, ok := l.images[path]; ok {
		return 0
	}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fs.ToErrno(err)
	}
	if err != nil {
		b = nil
	} else if b == nil {
		b = []byte{}
	}
	l.images[path] = b
	return 0
}

// made records an entry made in dir (created, or renamed from from).
func (l *lost) made(dir, path, from string) syscall.Errno {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return syscall.EIO
	}
	if l.on {
		l.entries[dir] = append(l.entries[dir], undo{path: path, from: from})
	}
	return 0
}

// check fails with EIO once frozen.
func (l *lost) check() syscall.Errno {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return syscall.EIO
	}
	return 0
}

// synced is called once path (a file, or a directory) is synced.
func (l *lost) synced(path string, dir bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if dir {
		delete(l.entries, path)
	} else {
		delete(l.images, path)
	}
}

// Open implements fs.NodeOpener: the file's handle is watched.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{inner: fh, path: n.path(), l: &n.f.lost}, ff, 0
}

// Create implements fs.NodeCreater: the entry is recorded, the handle
// watched.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	dir := n.path()
	path := filepath.Join(dir, name)
	if errno := n.f.lost.changing(path); errno != 0 {
		return nil, nil, 0, errno
	}
	_, statErr := os.Lstat(path)
	ino, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if os.IsNotExist(statErr) {
		n.f.lost.made(dir, path, "")
	}
	return ino, &file{inner: fh, path: path, l: &n.f.lost}, ff, 0
}

// Mkdir implements fs.NodeMkdirer: the entry is recorded.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.f.lost.check(); errno != 0 {
		return nil, errno
	}
	ino, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		n.f.lost.made(n.path(), filepath.Join(n.path(), name), "")
	}
	return ino, errno
}

// Rename implements fs.NodeRenamer: the new entry is recorded, to be
// moved back.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if errno := n.f.lost.check(); errno != 0 {
		return errno
	}
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	errno := n.LoopbackNode.Rename(ctx, name, np.LoopbackNode, newName, flags)
	if errno == 0 {
		n.f.lost.made(np.path(), filepath.Join(np.path(), newName), filepath.Join(n.path(), name))
	}
	return errno
}

// Unlink implements fs.NodeUnlinker: refused once frozen.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if errno := n.f.lost.check(); errno != 0 {
		return errno
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

// Setattr implements fs.NodeSetattrer: a truncation changes the content.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetSize(); ok {
		if errno := n.f.lost.changing(n.path()); errno != 0 {
			return errno
		}
	}
	if f, ok := fh.(*file); ok {
		fh = f.inner
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// OpendirHandle implements fs.NodeOpendirHandler: a handle that reads the
// directory but leaves its fsync to the node (Fsync), which records it.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ds, errno := fs.NewLoopbackDirStream(n.path())
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{ds: ds}, 0, 0
}

// dirHandle reads a directory; it has no Fsyncdir of its own.
type dirHandle struct{ ds fs.DirStream }

// Readdirent implements fs.FileReaddirenter.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if !d.ds.HasNext() {
		return nil, 0
	}
	e, errno := d.ds.Next()
	return &e, errno
}

// Releasedir implements fs.FileReleasedirer.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) { d.ds.Close() }

// file is a watched file handle: its writes keep the content as last
// synced first (lost.changing).
type file struct {
	inner fs.FileHandle
	path  string
	l     *lost
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
	_ fs.FileGetlker   = (*file)(nil)
	_ fs.FileSetlker   = (*file)(nil)
	_ fs.FileSetlkwer  = (*file)(nil)
)

func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.inner.(fs.FileReader).Read(ctx, dest, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := f.l.changing(f.path); errno != 0 {
		return 0, errno
	}
	return f.inner.(fs.FileWriter).Write(ctx, data, off)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if errno := f.l.check(); errno != 0 {
		return errno
	}
	errno := f.inner.(fs.FileFsyncer).Fsync(ctx, flags)
	if errno == 0 {
		f.l.synced(f.path, false)
	}
	return errno
}

func (f *file) Flush(ctx context.Context) syscall.Errno { return f.inner.(fs.FileFlusher).Flush(ctx) }

func (f *file) Release(ctx context.Context) syscall.Errno {
	return f.inner.(fs.FileReleaser).Release(ctx)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.inner.(fs.FileGetattrer).Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetSize(); ok {
		if errno := f.l.changing(f.path); errno != 0 {
			return errno
		}
	}
	return f.inner.(fs.FileSetattrer).Setattr(ctx, in, out)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if errno := f.l.changing(f.path); errno != 0 {
		return errno
	}
	return f.inner.(fs.FileAllocater).Allocate(ctx, off, size, mode)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.inner.(fs.FileLseeker).Lseek(ctx, off, whence)
}

func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return f.inner.(fs.FileGetlker).Getlk(ctx, owner, lk, flags, out)
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.inner.(fs.FileSetlker).Setlk(ctx, owner, lk, flags)
}

func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.inner.(fs.FileSetlkwer).Setlkw(ctx, owner, lk, flags)
}
