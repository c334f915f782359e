package fsm

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
)

// Backup is a consistent copy of the whole state for a backup file, taken
// in O(1) as a Raft snapshot is (the tree is copy-on-write): entries go on
// applying while it is written.
type Backup struct {
	snap *snapshot
	// Index is the last entry the copy includes; Term that entry's Raft
	// term (0 when this server has applied nothing since it restored a
	// snapshot, which does not say its term).
	Index int64
	Term  uint64
	// Znodes (the root included), Sessions and Ephemerals count what the
	// copy holds.
	Znodes, Sessions, Ephemerals int
}

// Backup captures the state.
func (f *FSM) Backup() *Backup {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &snapshot{tree: f.tree.Clone(), sessions: f.sessions.Clone(), applied: f.applied.Load(), now: f.now, level: f.level}
	return &Backup{snap: s, Index: s.applied, Term: f.term,
		Znodes: s.tree.Len(), Sessions: s.sessions.Len(), Ephemerals: s.tree.Ephemerals()}
}

// WriteTo writes the copy in the encoding of the FSM's snapshots.
func (b *Backup) WriteTo(w io.Writer) (int64, error) { return b.snap.WriteTo(w) }

// Seed is the first state of a new cluster restored from a backup: the
// backup's state one entry later, with every session closed.
type Seed struct {
	snap *snapshot
	// Index is the seed's index: the backup's plus one, the entry that
	// closed the sessions (the new cluster's zxids go on from it).
	Index int64
	// Znodes is what remains (the root included); Sessions and Ephemerals
	// what was dropped.
	Znodes, Sessions, Ephemerals int
}

// Reseed reads the state machine's snapshot r (a backup's body) and returns
// the first state of a new cluster made from it. The sessions of the old
// cluster end there: their clients talk to another cluster, and an
// ephemeral whose owner never comes back must not live forever. So every
// session is closed and its ephemerals deleted, as an expiry would, in one
// step at the seed's index. ZooKeeper's /zookeeper/config becomes the new
// cluster's configuration conf (without client addresses: its servers
// register theirs), since no configuration entry of the new cluster's
// precedes the seed. The snapshot is decoded whole, and refused if it is
// not one the FSM wrote.
func Reseed(r io.Reader, conf raft.Configuration) (*Seed, error) {
	st, err := ReadSnapshot(r, DataSizeCap)
	if err != nil {
		return nil, err
	}
	t, reg := st.Tree, st.Sessions
	seed := &Seed{Index: st.Applied + 1, Sessions: reg.Len()}
	tx := &tree.Tx{Zxid: seed.Index, Now: st.Now}
	for _, s := range reg.List() {
		for _, p := range t.EphemeralsOf(s.ID) {
			if err := t.Delete(p, -1, tx); err != nil {
				return nil, fmt.Errorf("fsm: deleting ephemeral %s of session 0x%x: %w", p, s.ID, err)
			}
			seed.Ephemerals++
		}
	}
	// So are the nodes of expired sessions kept for a lock-delay.
	released, err := releaseAllLockDelays(t, reg, tx)
	if err != nil {
		return nil, fmt.Errorf("fsm: deleting the nodes kept for a lock-delay: %w", err)
	}
	seed.Ephemerals += released
	resetConfig(t, conf, tx)
	seed.Znodes = t.Len()
	// The new cluster keeps the command level: its servers restored it, so
	// they apply it.
	seed.snap = &snapshot{tree: t, sessions: session.NewRegistry(), applied: seed.Index, now: st.Now, level: st.Level}
	return seed, nil
}

// WriteTo writes the seed in the encoding of the FSM's snapshots.
func (s *Seed) WriteTo(w io.Writer) (int64, error) { return s.snap.WriteTo(w) }
