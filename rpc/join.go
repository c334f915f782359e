package rpc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// A server started with Config.Join does not bootstrap a cluster. With an
// empty data dir it waits for a cluster's leader to add it (AddMember),
// catches up, and serves nothing until it is part of a configuration
// (serving). One of Config.Peers, the initial voters, started with Join
// bootstraps as they do unless another of them already belongs to a
// cluster: so one set of flags serves every server of a Kubernetes
// StatefulSet, and an initial voter that was removed and comes back with
// an empty data dir waits to be added again instead of starting a cluster
// of its own. Both outcomes of a race are safe: servers that bootstrap
// write the same first configuration, and one that joins instead is in
// that configuration, so the leader brings it up to date.
//
// A joining server must start from an empty data dir: Raft state it
// already holds came from somewhere, and if that was another cluster, the
// leader's consistency check (same index, same term) could pass on entries
// that differ. So the first start of a joiner marks its data dir
// (joinedMarker); a later start with --join accepts state only in a dir so
// marked, that is the restart of a server that joined.

// joinedMarker names the file that says a data dir's Raft state was
// received by joining a cluster.
const joinedMarker = "joined"

// ErrJoinNotEmpty means --join was given with a data dir that holds the
// Raft state of a server that did not join (it bootstrapped a cluster, or
// was restored from a backup).
var ErrJoinNotEmpty = errors.New("rpc: --join needs an empty data dir")

// initialVoter reports whether this server is among the initial voters of
// Config.Peers.
func (c *Config) initialVoter() bool {
	return slices.ContainsFunc(c.Peers, func(p Peer) bool { return p.ID == c.ID })
}

// joins reports whether this server joins a running cluster rather than
// bootstrapping one.
func (c *Config) joins() bool { return c.Join && !c.initialVoter() }

// checkJoinDir checks a joining server's data dir before anything opens
// it, and marks it on the first start. A dir holding Raft state (a log or
// a snapshot) is accepted only when marked; otherwise it is refused, and
// left as it was.
func checkJoinDir(cfg *Config) error {
	if !cfg.joins() {
		return nil
	}
	marker := filepath.Join(cfg.DataDir, joinedMarker)
	if _, err := os.Stat(marker); err == nil {
		return nil // a server that joined, restarting
	}
	if hasRaftState(cfg.DataDir) {
		return fmt.Errorf("%w: %s holds the Raft state of a server that did not join a cluster "+
			"(it bootstrapped one, or was restored from a backup); start it without --join to run it as it was, "+
			"or, once it is no member of any cluster (coordctl member list), empty the dir to join afresh", ErrJoinNotEmpty, cfg.DataDir)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("rpc: data dir: %w", err)
	}
	if err := os.WriteFile(marker, []byte("this data dir was filled by joining a running cluster (coordd --join)\n"), 0o640); err != nil {
		return fmt.Errorf("rpc: data dir: %w", err)
	}
	return nil
}

// hasRaftState reports whether dir holds a Raft log store (either kind,
// or both) or a snapshot.
func hasRaftState(dir string) bool {
	if kind, err := existingRaftLog(dir); kind != "" || err != nil {
		return true
	}
	snaps, _ := os.ReadDir(filepath.Join(dir, "snapshots"))
	return len(snaps) > 0
}

// inConfiguration reports whether this server is in the latest Raft
// configuration it knows of. A joining server is not until the leader has
// added it; a removed one no longer is once it learnt of its removal.
func (n *Node) inConfiguration() bool {
	if !n.raftSet.Load() {
		return false
	}
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == n.cfg.ID {
			return true
		}
	}
	return false
}

// Member returns a channel closed once this server is in the cluster's
// configuration: at once for a server that bootstrapped a cluster or
// restarts as a member, once the leader has added it for one that joins
// (until then it serves no client).
func (n *Node) Member() <-chan struct{} { return n.member }

// memberPoll is how often a server waiting to be added looks whether it
// has been (reading the configuration is an atomic load).
const memberPoll = 50 * time.Millisecond

// watchMember closes n.member once this server, not in the configuration
// when it started, is.
func (n *Node) watchMember() {
	tk := time.NewTicker(memberPoll)
	defer tk.Stop()
	for !n.inConfiguration() {
		select {
		case <-n.ctx.Done():
			return
		case <-tk.C:
		}
	}
	close(n.member)
}

// peersHaveCluster asks the other initial voters, briefly and at once,
// whether one of them already belongs to a cluster (knows a Raft term: a
// bootstrapped server does, one waiting to join does not).
func (n *Node) peersHaveCluster() bool {
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	found := make(chan bool, len(n.cfg.Peers))
	asked := 0
	for _, p := range n.cfg.Peers {
		if p.ID == n.cfg.ID {
			continue
		}
		asked++
		go func(addr string) {
			in, err := n.peerInfo(ctx, addr)
			found <- err == nil && in.Term > 0
		}(p.Addr)
	}
	for range asked {
		if <-found {
			return true
		}
	}
	return false
}
