package lockrecipe

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/coordd/coordd/client"
)

// Mutex is a distributed exclusive lock on a path: each attempt creates an
// ephemeral sequential child "_c_<guid>-lock-N" of the path, the lowest
// child holds, and every waiter watches only its immediate predecessor.
//
// A Mutex value is one owner. It is not reentrant: Lock on a Mutex that
// holds (or is acquiring) the lock returns ErrAlreadyHeld; use
// ReentrantMutex for explicit reentrancy. Unlock may be called from another
// goroutine than Lock, but calls must not overlap.
type Mutex struct {
	q *queue
}

// NewMutex returns a Mutex on path (its children are the lock's nodes; its
// missing ancestors are created as containers on first use).
func NewMutex(s *Session, path string, opts ...Option) *Mutex {
	return &Mutex{q: newQueue(s, path, "lock-", waitPredecessor, opts)}
}

// Lock blocks until the lock is held or ctx ends, and returns the fencing
// token. When ctx ends, or anything fails, the attempt's node is deleted
// before Lock returns (retried until done or the session is gone). If the
// node vanishes while waiting, Lock returns ErrLockLost (also matching
// client.ErrSessionExpired when the session expired).
func (m *Mutex) Lock(ctx context.Context) (Token, error) { return m.q.acquire(ctx, false, nil) }

// TryLock acquires the lock only if it is free now; otherwise it returns
// ErrLocked at once, leaving no node behind.
func (m *Mutex) TryLock(ctx context.Context) (Token, error) { return m.q.acquire(ctx, true, nil) }

// Unlock deletes this owner's node (and no other). It returns ErrNotHeld
// when this Mutex does not hold the lock, and ErrLockLost when its node was
// already gone (the lock had been lost). After an error from ctx the
// outcome is unknown and the Mutex still counts as held: call Unlock again.
func (m *Mutex) Unlock(ctx context.Context) error { return m.q.release(ctx) }

// Lost returns a channel closed when the holder can no longer be sure it
// holds the lock: the client suspended the session, which it does before
// the leader can expire it (sent + T - V - M, see Session), the session
// ended, its node was deleted (watched from the first call to Lost of the
// acquisition on), or Unlock ran. Each acquisition has its own channel; before the first
// acquisition a closed channel is returned.
func (m *Mutex) Lost() <-chan struct{} { return m.q.lostChan() }

// Token returns the fencing token (the lock node's creation zxid) of the
// current acquisition, or 0 when not held.
func (m *Mutex) Token() Token { return m.q.token() }

// Node returns the path of the held lock node, or "".
func (m *Mutex) Node() string { return m.q.node() }

// GuardedMulti applies ops atomically, and only if the lock node still
// exists unchanged (a check op on it goes first, in the same multi), so an
// owner that lost the lock can never write. It returns the results of ops
// (without the check's), ErrLockLost when the check failed, ErrNotHeld
// when not holding.
func (m *Mutex) GuardedMulti(ctx context.Context, ops ...client.Op) ([]client.OpResult, error) {
	return m.q.guardedMulti(ctx, ops...)
}

// ReentrantMutex is a Mutex that one owner may lock several times: each
// Lock after the first only counts, and the lock is released by the Unlock
// that matches the first Lock. Like Mutex, a value is one owner (there are
// no goroutine identities in Go): every goroutine sharing the value shares
// the hold.
//
// A re-entry never outlives the hold: once the lock is lost (Lost is
// closed, or the server no longer has the owner's node), Lock fails with
// ErrLockLost, ends the lost hold and resets the count to 0; the next Lock
// queues for the lock afresh.
type ReentrantMutex struct {
	m *Mutex
	// acq orders Lock and the releasing Unlock. It is held while Lock waits
	// for the lock (a second Lock of the owner then waits for that
	// acquisition and counts on it), never by Count.
	acq sync.Mutex
	// mu guards count only, and is never held across a call to the server.
	mu    sync.Mutex
	count int
}

// NewReentrantMutex returns a ReentrantMutex on path.
func NewReentrantMutex(s *Session, path string, opts ...Option) *ReentrantMutex {
	return &ReentrantMutex{m: NewMutex(s, path, opts...)}
}

// Lock acquires the lock, or increments the hold count if this owner
// already holds it, and returns the fencing token. A re-entry asks the
// server whether the owner's node is still there; when it is not, or when
// Lost is closed, Lock returns ErrLockLost and the count is 0.
func (r *ReentrantMutex) Lock(ctx context.Context) (Token, error) {
	r.acq.Lock()
	defer r.acq.Unlock()
	// While acq is held the count cannot drop to 0 (only the releasing
	// Unlock does that, under acq), so it can be read and raised apart.
	if r.Count() > 0 {
		return r.reenter(ctx)
	}
	if r.m.q.current() != nil {
		// A lost hold whose release (by an earlier Lock or Unlock) did not
		// get through: end it before queueing again.
		if err := r.m.Unlock(ctx); err != nil && !errors.Is(err, ErrLockLost) {
			return 0, err
		}
	}
	tok, err := r.m.Lock(ctx)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.count = 1
	r.mu.Unlock()
	return tok, nil
}

// reenter counts one more Lock on the held lock, if it is still held.
func (r *ReentrantMutex) reenter(ctx context.Context) (Token, error) {
	h := r.m.q.current()
	lost := h == nil || isClosed(r.m.Lost())
	if !lost {
		st, ok, err := r.m.q.s.c.Exists(ctx, h.path)
		switch {
		case sessionGone(err):
			lost = true
		case err != nil:
			return 0, fmt.Errorf("lockrecipe: re-entering %s: %w", h.path, err)
		default:
			lost = !ok || st.Czxid != h.stat.Czxid
		}
	}
	if lost {
		what := "re-entry of a lost lock on " + r.m.q.dir
		// End the lost hold, so that Lost stays closed and the next Lock
		// starts afresh; its node, if still there, is no longer trusted.
		err := r.m.Unlock(ctx)
		r.mu.Lock()
		r.count = 0
		r.mu.Unlock()
		if errors.Is(err, ErrLockLost) {
			return 0, err
		}
		return 0, r.m.q.s.lostError(what)
	}
	r.mu.Lock()
	r.count++
	r.mu.Unlock()
	return Token(h.stat.Czxid), nil
}

// Unlock decrements the hold count and releases the lock when it reaches
// zero. It returns ErrNotHeld when not held (also while another goroutine's
// Lock still waits for the lock).
func (r *ReentrantMutex) Unlock(ctx context.Context) error {
	r.mu.Lock()
	switch {
	case r.count == 0:
		r.mu.Unlock()
		return ErrNotHeld
	case r.count > 1:
		r.count--
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	// The last hold: release under acq, so that no Lock counts on a lock
	// being released. Look again once acq is ours.
	r.acq.Lock()
	defer r.acq.Unlock()
	r.mu.Lock()
	switch {
	case r.count == 0:
		r.mu.Unlock()
		return ErrNotHeld
	case r.count > 1:
		r.count--
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	err := r.m.Unlock(ctx)
	if err != nil && r.m.q.current() != nil {
		return err // unknown outcome: still held, count stays 1
	}
	r.mu.Lock()
	r.count = 0
	r.mu.Unlock()
	return err
}

// Count returns the hold count (0 when not held). It does not wait for a
// Lock in progress.
func (r *ReentrantMutex) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Lost is Mutex.Lost.
func (r *ReentrantMutex) Lost() <-chan struct{} { return r.m.Lost() }

// Token is Mutex.Token.
func (r *ReentrantMutex) Token() Token { return r.m.Token() }

// GuardedMulti is Mutex.GuardedMulti.
func (r *ReentrantMutex) GuardedMulti(ctx context.Context, ops ...client.Op) ([]client.OpResult, error) {
	return r.m.GuardedMulti(ctx, ops...)
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
