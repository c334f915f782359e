package rpc

import (
	"time"

	"github.com/coordd/coordd/fsm"
)

// The pace of snapshots follows the tree's size. A snapshot writes the
// whole tree on every server: at 2 million znodes, 285 MB and about 7 s of
// a core each. Taken every --snapshot-threshold entries (8 192 by default),
// such a tree under a write load was being snapshotted nearly all the time
// (make scale: 12 snapshots per server in a minute of 1 200 writes/s, and
// 93% of the writes made during one), for a log that replays 8 192 entries
// in well under a second. ZooKeeper spaces its snapshots by snapCount
// (100 000 transactions).
//
// So the threshold each server gives Raft is the flag's, or one entry for
// every znodesPerSnapshotEntry znodes of the tree, whichever is larger: the
// snapshots' cost per write stays about the same at any size (a snapshot
// costs in proportion to the tree, and comes in proportion to it), and
// what a restart replays after its snapshot stays a fraction of what the
// snapshot itself loads. A small tree keeps the flag's threshold exactly.
// Each server paces its own snapshots, as Raft has them take: nothing of
// this is replicated.
const znodesPerSnapshotEntry = 8

// snapshotThreshold returns the threshold for a tree of znodes znodes.
func snapshotThreshold(flag uint64, znodes int) uint64 {
	return max(flag, uint64(znodes/znodesPerSnapshotEntry))
}

// paceSnapshots sets Raft's snapshot threshold from the tree's size at each
// --snapshot-interval, when it moved by more than a quarter (or back to the
// flag's), so that a tree growing or shrinking steadily reloads Raft's
// configuration now and then, not at every check.
func (n *Node) paceSnapshots() {
	t := time.NewTicker(n.cfg.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		var znodes int
		n.fsm.Read(func(v fsm.View) { znodes = v.Tree.Len() })
		want := snapshotThreshold(n.cfg.SnapshotThreshold, znodes)
		rc := n.raft.ReloadableConfig()
		cur := rc.SnapshotThreshold
		if want == cur || (want != n.cfg.SnapshotThreshold && want < cur*5/4 && want > cur*4/5) {
			continue
		}
		rc.SnapshotThreshold = want
		if err := n.raft.ReloadConfig(rc); err != nil {
			n.log.Warn("setting the snapshot threshold", "entries", want, "err", err)
			continue
		}
		n.log.Info("snapshot threshold follows the tree", "znodes", znodes, "entries", want)
	}
}
