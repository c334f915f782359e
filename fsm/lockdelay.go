package fsm

import (
	"strings"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
)

// Lock-delays (command level 2). When the leader expires a session it
// stamps its lock-delay rules into the CloseSession; each of the session's
// ephemerals that a rule covers is then kept, still owned by the expired
// session, until the entry's time plus the rule's delay, instead of being
// deleted with the others. The registry records it (session.LockDelay),
// in the replicated state; once the delay has passed the leader proposes
// a ReleaseLockDelays, which deletes the node as the expiry would have.
// Until then the node is an ordinary ephemeral to every reader, and
// whoever waits for its deletion (a lock's next holder) waits out the
// delay. A clean close keeps nothing, and a delete of a kept node (by an
// administrator) ends its delay at once.
//
// Everything the FSM needs is in the entries: the rules in the expiry,
// the time in every entry. So servers configured with other rules apply
// an expiry alike, and a new leader finds every pending delay in the
// state it applied.

// MaxLockDelayMs is the longest lock-delay the FSM applies, in ms: a
// rule's longer delay counts as this. (A server refuses a longer one in
// its configuration.)
const MaxLockDelayMs = 3600 * 1000

// LockDelayFor returns the delay, in ms, of the rule with the longest
// prefix that covers path (0: no rule does, or its delay is not
// positive). A prefix covers the node at it and every node below it, by
// path components: /locks covers /locks and /locks/a/b, not /locksmith;
// "/" covers every node.
func LockDelayFor(rules []*cmdpb.LockDelay, path string) int64 {
	best, delay := -1, int64(0)
	for _, r := range rules {
		p := r.GetPrefix()
		if len(p) > best && covers(p, path) {
			best, delay = len(p), r.GetDelayMs()
		}
	}
	return min(max(delay, 0), MaxLockDelayMs)
}

// covers reports whether prefix covers path by path components.
func covers(prefix, path string) bool {
	switch prefix {
	case "":
		return false
	case "/":
		return strings.HasPrefix(path, "/")
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// lockDelayRules returns the rules a CloseSession applies: those of an
// expiry, from level 2 on; nil for a client's close, which releases at
// once.
func (f *FSM) lockDelayRules(c *cmdpb.CloseSession) []*cmdpb.LockDelay {
	if !c.Expired || f.level < 2 {
		return nil
	}
	return c.LockDelays
}

// keepForLockDelay reports whether ephemeral p of the expiring session id
// is kept for a lock-delay under rules, and records it if so.
func (f *FSM) keepForLockDelay(a *Applied, tx *tree.Tx, id int64, p string, rules []*cmdpb.LockDelay) bool {
	if len(rules) == 0 {
		return false
	}
	d := LockDelayFor(rules, p)
	if d <= 0 {
		return false
	}
	if err := f.sessions.AddLockDelay(session.LockDelay{Path: p, Session: id, Until: tx.Now + d}); err != nil {
		return false
	}
	a.LockDelayed = append(a.LockDelayed, p)
	return true
}

// releaseLockDelays applies a ReleaseLockDelays: each path still kept for
// a lock-delay that ended by the entry's time is deleted, as its
// session's expiry would have deleted it. A path that is not kept (any
// more), or whose delay has not ended, is left alone.
func (f *FSM) releaseLockDelays(a *Applied, tx *tree.Tx, c *cmdpb.ReleaseLockDelays) {
	if f.level < 2 {
		return
	}
	for _, p := range c.Paths {
		ld, ok := f.sessions.LockDelayOf(p)
		if !ok || ld.Until > tx.Now {
			continue
		}
		if st, err := f.tree.Exists(p); err == nil && st.EphemeralOwner == ld.Session {
			if err := f.tree.Delete(p, -1, tx); err != nil {
				f.log.Error("releasing a node kept for a lock-delay", "path", p, "session", ld.Session, "err", err)
				continue
			}
		}
		f.sessions.RemoveLockDelay(p)
		a.LockDelaysReleased++
	}
}

// endDeletedLockDelays drops the records of kept nodes that the entry
// deleted otherwise (a client's delete, a multi): an explicit delete ends
// a lock-delay at once.
func (f *FSM) endDeletedLockDelays(a *Applied, tx *tree.Tx) {
	if f.sessions.LockDelays() == 0 {
		return
	}
	for _, ev := range tx.Events {
		if ev.Type == tree.EventNodeDeleted && f.sessions.RemoveLockDelay(ev.Path) {
			a.LockDelaysDeleted++
		}
	}
}

// releaseAllLockDelays deletes every node kept for a lock-delay in t, as
// a restore's seed does with every ephemeral, and returns how many it
// deleted.
func releaseAllLockDelays(t *tree.Tree, reg *session.Registry, tx *tree.Tx) (int, error) {
	n := 0
	for _, ld := range reg.ListLockDelays() {
		st, err := t.Exists(ld.Path)
		if err != nil || st.EphemeralOwner != ld.Session {
			continue
		}
		if err := t.Delete(ld.Path, -1, tx); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
