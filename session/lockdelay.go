package session

import (
	"fmt"

	"github.com/google/btree"
)

// MaxLockDelayPathLen is the longest path [Registry.AddLockDelay] accepts
// (the tree's own bound on a path; [ReadRegistry] enforces it too).
const MaxLockDelayPathLen = 1 << 20

// LockDelay is a node kept after its session expired, for a lock-delay:
// the session that owned it is closed, but the node stays, still owned by
// that session, until the leader's time reaches Until, so that whoever
// waits for it (a lock's next holder) waits out the delay. The registry
// only keeps these records, in the replicated state; what a path is, which
// nodes are kept and when one is released is the FSM's business.
type LockDelay struct {
	// Path is the node's path.
	Path string
	// Session is the expired session that owns the node.
	Session int64
	// Until is the leader time (ms since the epoch) from which the node
	// may be released.
	Until int64
}

func lockDelayByPath(a, b LockDelay) bool { return a.Path < b.Path }

func lockDelayByUntil(a, b LockDelay) bool {
	if a.Until != b.Until {
		return a.Until < b.Until
	}
	return a.Path < b.Path
}

// lockDelays holds the records twice: by path (lookups, the encoding's
// order) and by (until, path) (the ones due first). Both trees hold values,
// and google/btree clones them copy-on-write, so a Clone of the registry
// stays O(1).
type lockDelays struct {
	byPath, byUntil *btree.BTreeG[LockDelay]
}

func newLockDelays() lockDelays {
	return lockDelays{byPath: btree.NewG(16, lockDelayByPath), byUntil: btree.NewG(16, lockDelayByUntil)}
}

func (l lockDelays) clone() lockDelays {
	return lockDelays{byPath: l.byPath.Clone(), byUntil: l.byUntil.Clone()}
}

// AddLockDelay records that node d.Path, owned by the expired session
// d.Session, is kept until d.Until; a record of the same path is replaced.
// It returns an error, recording nothing, for an empty path or one longer
// than [MaxLockDelayPathLen].
func (r *Registry) AddLockDelay(d LockDelay) error {
	if d.Path == "" || len(d.Path) > MaxLockDelayPathLen {
		return fmt.Errorf("session: lock-delay path of %d bytes (1 to %d)", len(d.Path), MaxLockDelayPathLen)
	}
	r.RemoveLockDelay(d.Path)
	r.delays.byPath.ReplaceOrInsert(d)
	r.delays.byUntil.ReplaceOrInsert(d)
	return nil
}

// RemoveLockDelay drops the record of path, and reports whether there was
// one.
func (r *Registry) RemoveLockDelay(path string) bool {
	old, ok := r.delays.byPath.Delete(LockDelay{Path: path})
	if ok {
		r.delays.byUntil.Delete(old)
	}
	return ok
}

// LockDelayOf returns the record of path, if the node there is kept for a
// lock-delay.
func (r *Registry) LockDelayOf(path string) (LockDelay, bool) {
	return r.delays.byPath.Get(LockDelay{Path: path})
}

// LockDelays returns how many nodes are kept for a lock-delay.
func (r *Registry) LockDelays() int { return r.delays.byPath.Len() }

// LockDelaysDue returns up to limit records whose Until is at or before now,
// the earliest first (then by path).
func (r *Registry) LockDelaysDue(now int64, limit int) []LockDelay {
	var out []LockDelay
	r.delays.byUntil.Ascend(func(d LockDelay) bool {
		if d.Until > now || len(out) >= limit {
			return false
		}
		out = append(out, d)
		return true
	})
	return out
}

// ListLockDelays returns every record, by path.
func (r *Registry) ListLockDelays() []LockDelay {
	out := make([]LockDelay, 0, r.delays.byPath.Len())
	r.delays.byPath.Ascend(func(d LockDelay) bool {
		out = append(out, d)
		return true
	})
	return out
}
