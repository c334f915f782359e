// coordd: this file is not upstream's (FORK.md, part 4).

package raftboltdb

// IsMonotonic implements raft.MonotonicLogStore: Raft clears the whole log
// after it installs a snapshot, rather than keep the entries before it and
// append the snapshot's successors after a gap. New refuses a log with a
// gap as damaged (part 3), so a follower that kept its old entries would
// not start again.
func (b *BoltStore) IsMonotonic() bool { return true }
