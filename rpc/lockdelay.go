package rpc

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/tree"
)

// LockDelay is one lock-delay rule (Config.LockDelays): when a session
// expires, its ephemerals at Prefix or below it stay, still owned by the
// expired session, for Delay, and are deleted through the log then. A
// clean close or a delete releases them at once. Of the rules that cover
// a node (by path components: /locks covers /locks/a, not /locksmith),
// the one with the longest prefix decides; a Delay of 0 exempts a
// subtree of a longer rule.
type LockDelay struct {
	Prefix string
	Delay  time.Duration
}

// MaxLockDelay is the longest lock-delay a rule may name: the lock is
// unavailable for that long after its holder's session expired.
const MaxLockDelay = fsm.MaxLockDelayMs * time.Millisecond

// String is the rule as the flag takes it: PREFIX=DURATION.
func (d LockDelay) String() string { return d.Prefix + "=" + d.Delay.String() }

// ParseLockDelays parses "PREFIX=DURATION,PREFIX=DURATION" (such as
// "/locks=10s"), the value of --lock-delay; the rules are checked when a
// server starts (Config.LockDelays).
func ParseLockDelays(s string) ([]LockDelay, error) {
	var out []LockDelay
	for _, part := range splitComma(s) {
		prefix, dur, ok := strings.Cut(part, "=")
		if !ok || prefix == "" || dur == "" {
			return nil, fmt.Errorf("rpc: bad lock-delay %q: want PREFIX=DURATION, such as /locks=10s", part)
		}
		d, err := time.ParseDuration(dur)
		if err != nil {
			return nil, fmt.Errorf("rpc: bad lock-delay %q: %v", part, err)
		}
		out = append(out, LockDelay{Prefix: prefix, Delay: d})
	}
	return out, nil
}

// checkLockDelays refuses rules that could not mean what they say.
func checkLockDelays(rules []LockDelay) error {
	seen := map[string]bool{}
	for _, r := range rules {
		if err := tree.ValidatePath(r.Prefix); err != nil {
			return fmt.Errorf("rpc: lock-delay %s: the prefix must be a node's path, such as /locks: %s", r, fsm.Detail(err))
		}
		if r.Delay < 0 || r.Delay > MaxLockDelay {
			return fmt.Errorf("rpc: lock-delay %s: the delay must be from 0 to %v", r, MaxLockDelay)
		}
		if r.Delay%time.Millisecond != 0 {
			return fmt.Errorf("rpc: lock-delay %s: the delay must be whole milliseconds", r)
		}
		if seen[r.Prefix] {
			return fmt.Errorf("rpc: lock-delay prefix %s is given twice", r.Prefix)
		}
		seen[r.Prefix] = true
	}
	return nil
}

// lockDelayRules returns the rules as the leader stamps them into an
// expiry: nil when there are none, or while the cluster's command level is
// below 2 (a server of level 1 would ignore them and diverge).
func (n *Node) lockDelayRules() []*cmdpb.LockDelay {
	if len(n.cfg.LockDelays) == 0 || n.fsm.ClusterLevel() < 2 {
		return nil
	}
	out := make([]*cmdpb.LockDelay, 0, len(n.cfg.LockDelays))
	for _, r := range n.cfg.LockDelays {
		out = append(out, &cmdpb.LockDelay{Prefix: r.Prefix, DelayMs: r.Delay.Milliseconds()})
	}
	return out
}

// releaseBatch bounds the nodes one ReleaseLockDelays names.
const releaseBatch = 256

// releasePass proposes the release of the nodes kept for a lock-delay
// whose delay has passed by this leader's clock. The records are in the
// replicated state, so a new leader releases what its predecessor kept.
// One release is in flight at a time; the FSM re-checks each path, so one
// proposed twice (a pass that ran before the last applied) changes
// nothing.
func (l *leaderDuties) releasePass() {
	if !l.releasing.CompareAndSwap(false, true) {
		return
	}
	now := time.Now().UnixMilli()
	var paths []string
	l.n.fsm.Read(func(v fsm.View) {
		for _, d := range v.Sessions.LockDelaysDue(now, releaseBatch) {
			paths = append(paths, d.Path)
		}
	})
	if len(paths) == 0 {
		l.releasing.Store(false)
		return
	}
	l.n.log.Info("releasing nodes kept for a lock-delay", "nodes", len(paths), "first", paths[0])
	f := l.proposeOwn(&cmdpb.Command{Cmd: &cmdpb.Command_ReleaseLockDelays{ReleaseLockDelays: &cmdpb.ReleaseLockDelays{Paths: slices.Clip(paths)}}})
	go func() {
		_ = f.Error() // a lost term: the next leader releases them
		l.releasing.Store(false)
	}()
}
