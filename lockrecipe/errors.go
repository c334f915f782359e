package lockrecipe

import "errors"

// Errors of the recipes. Errors from the client pass through wrapped: match
// them with errors.Is (for example client.ErrSessionExpired).
var (
	// ErrLocked is returned by the Try methods when the lock (or a permit)
	// is not available at once.
	ErrLocked = errors.New("lockrecipe: locked by another owner")
	// ErrAlreadyHeld is returned when Lock (or Campaign, Acquire, ...) is
	// called on a recipe value that already holds, or is acquiring, it.
	// Reentrancy is explicit: use ReentrantMutex.
	ErrAlreadyHeld = errors.New("lockrecipe: already held or being acquired by this owner")
	// ErrNotHeld is returned by Unlock (Release, Resign, GuardedMulti, ...)
	// when the recipe value does not hold the lock.
	ErrNotHeld = errors.New("lockrecipe: not held")
	// ErrLockLost means the owner's node vanished (its session expired, or
	// someone deleted it) or a guarded write found it gone: the owner does
	// not hold the lock. When the session ended, the error also matches
	// client.ErrSessionExpired or client.ErrClosed.
	ErrLockLost = errors.New("lockrecipe: lock lost")
	// ErrNoLeader is returned by Election.Leader when nobody campaigns.
	ErrNoLeader = errors.New("lockrecipe: no leader")
)
