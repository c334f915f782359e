package lockrecipe

import (
	"context"
	"fmt"
	"time"
)

// Semaphore lets at most n owners hold a permit at once. It follows
// Curator's InterProcessSemaphoreV2: a permit is an ephemeral sequential
// lease "<path>/leases/_c_<guid>-lease-N", and only one waiter at a time, the
// holder of the internal Mutex "<path>/lock", creates its lease and waits for
// one of the first n leases to go (with a child watch on the leases). The
// other waiters queue on the internal Mutex, each watching its predecessor
// there. So a release wakes exactly that one waiter, and permits are handed
// out in arrival order; a waiter that was woken and got a permit may leave
// one stale child watch behind, which fires once at the next lease change.
//
// A holder counts as holding while its lease is among the first n: the
// leases ahead of it only go away, and only the queued head adds one, so at
// most n leases are ever in that position. All owners of one path must use
// the same n.
type Semaphore struct {
	n      int
	lock   *Mutex
	leases *queue
}

// NewSemaphore returns a Semaphore with n permits (n >= 1) on path.
func NewSemaphore(s *Session, path string, n int, opts ...Option) *Semaphore {
	n = max(n, 1)
	leases := newQueue(s, join(path, "leases"), "lease-", func(kids []child, i int) string {
		if i < n {
			return ""
		}
		return kids[i-n].name
	}, opts)
	leases.waitChildren = true
	return &Semaphore{n: n, lock: NewMutex(s, join(path, "lock"), opts...), leases: leases}
}

// Acquire blocks until this owner holds a permit or ctx ends, and returns
// the lease's creation zxid. On failure nothing is left behind. A
// Semaphore value holds at most one permit (ErrAlreadyHeld).
func (sm *Semaphore) Acquire(ctx context.Context) (Token, error) { return sm.acquire(ctx, false) }

// TryAcquire takes a permit only if one is free now and nobody is queued
// for one; otherwise it returns ErrLocked, leaving nothing behind.
func (sm *Semaphore) TryAcquire(ctx context.Context) (Token, error) { return sm.acquire(ctx, true) }

func (sm *Semaphore) acquire(ctx context.Context, try bool) (Token, error) {
	if sm.leases.current() != nil {
		return 0, ErrAlreadyHeld
	}
	var err error
	if try {
		_, err = sm.lock.TryLock(ctx)
	} else {
		_, err = sm.lock.Lock(ctx)
	}
	if err != nil {
		return 0, err
	}
	tok, err := sm.leases.acquire(ctx, try, nil)
	if uerr := sm.unlockQueue(ctx); uerr != nil && err == nil {
		// The lease is ours but the queue lock could not be released: the
		// session is gone, so the lease is too.
		_ = sm.leases.release(ctx)
		return 0, uerr
	}
	return tok, err
}

// unlockQueue releases the internal Mutex, retrying past ctx until done or
// the session is gone (then it returns the error).
func (sm *Semaphore) unlockQueue(ctx context.Context) error {
	for {
		uctx, cancel := detached(ctx, cleanupAttempt)
		err := sm.lock.Unlock(uctx)
		cancel()
		if sm.lock.q.current() == nil {
			// Released, or its node was already gone.
			if err != nil && sm.lock.q.s.ended() {
				return err
			}
			return nil
		}
		if sm.lock.q.s.ended() {
			return fmt.Errorf("lockrecipe: semaphore queue unlock: %w", err)
		}
		time.Sleep(retryPause)
	}
}

// Release gives the permit back (see Mutex.Unlock).
func (sm *Semaphore) Release(ctx context.Context) error { return sm.leases.release(ctx) }

// Lost is closed when the holder can no longer be sure it holds its permit
// (see Mutex.Lost).
func (sm *Semaphore) Lost() <-chan struct{} { return sm.leases.lostChan() }

// Holders returns how many permits are held or queued right now (the
// number of leases), as seen by this session's server.
func (sm *Semaphore) Holders(ctx context.Context) (int, error) {
	names, _, err := sm.leases.s.c.Children(ctx, sm.leases.dir)
	if err != nil {
		if isNoNode(err) {
			return 0, nil
		}
		return 0, err
	}
	return len(sequenced(names)), nil
}
