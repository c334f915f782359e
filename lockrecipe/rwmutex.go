package lockrecipe

import (
	"context"
	"strings"

	"github.com/coordd/coordd/client"
)

const (
	readPrefix  = "read-"
	writePrefix = "write-"
)

// isRead says whether a child is a read lock node.
func isRead(name string) bool {
	return len(name) > seqDigits && strings.HasSuffix(name[:len(name)-seqDigits], "-"+readPrefix)
}

// waitWriter: a reader holds when no writer precedes it, else it waits for
// the nearest preceding writer.
func waitWriter(kids []child, i int) string {
	for j := i - 1; j >= 0; j-- {
		if !isRead(kids[j].name) {
			return kids[j].name
		}
	}
	return ""
}

// RWMutex is a distributed read/write lock on a path: readers create
// "_c_<guid>-read-N" and writers "_c_<guid>-write-N" ephemeral sequential
// children. A writer holds when its node is the lowest and waits for its
// immediate predecessor; a reader holds when no writer node precedes it and
// waits for the nearest preceding writer. Queued writers therefore block
// later readers (no writer starvation), and a writer's release wakes only
// the readers queued directly behind it (they all may hold together) or
// the one writer behind it.
//
// An RWMutex value is one owner that may hold the read side and the write
// side independently (each is non-reentrant: ErrAlreadyHeld). Holding both
// at once from one value deadlocks when the second must wait for the first.
type RWMutex struct {
	r, w *queue
}

// NewRWMutex returns an RWMutex on path.
func NewRWMutex(s *Session, path string, opts ...Option) *RWMutex {
	return &RWMutex{
		r: newQueue(s, path, readPrefix, waitWriter, opts),
		w: newQueue(s, path, writePrefix, waitPredecessor, opts),
	}
}

// RLock blocks until the read lock is held or ctx ends, with Mutex.Lock's
// cleanup and loss rules, and returns the read node's creation zxid.
func (rw *RWMutex) RLock(ctx context.Context) (Token, error) { return rw.r.acquire(ctx, false, nil) }

// TryRLock acquires the read lock only if no writer holds or waits now,
// else returns ErrLocked leaving no node behind.
func (rw *RWMutex) TryRLock(ctx context.Context) (Token, error) { return rw.r.acquire(ctx, true, nil) }

// RUnlock releases the read lock (see Mutex.Unlock).
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.r.release(ctx) }

// RLost is Mutex.Lost for the read lock.
func (rw *RWMutex) RLost() <-chan struct{} { return rw.r.lostChan() }

// Lock blocks until the write lock is held or ctx ends (see Mutex.Lock) and
// returns the fencing token.
func (rw *RWMutex) Lock(ctx context.Context) (Token, error) { return rw.w.acquire(ctx, false, nil) }

// TryLock acquires the write lock only if nobody holds or waits for either
// side now, else returns ErrLocked leaving no node behind.
func (rw *RWMutex) TryLock(ctx context.Context) (Token, error) { return rw.w.acquire(ctx, true, nil) }

// Unlock releases the write lock (see Mutex.Unlock).
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.w.release(ctx) }

// Lost is Mutex.Lost for the write lock.
func (rw *RWMutex) Lost() <-chan struct{} { return rw.w.lostChan() }

// Token returns the write lock's fencing token, or 0 when not held.
func (rw *RWMutex) Token() Token { return rw.w.token() }

// GuardedMulti applies ops only while the write lock node still exists
// (see Mutex.GuardedMulti).
func (rw *RWMutex) GuardedMulti(ctx context.Context, ops ...client.Op) ([]client.OpResult, error) {
	return rw.w.guardedMulti(ctx, ops...)
}
