package rpc

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
)

// TestLevelRisesWithTheLastServer plays a rolling upgrade: while one member
// reports an older command level, the leader does not raise the cluster's,
// however often it asks, and ZooKeeper's clients get the old behaviour;
// once that member runs the new version the cluster is raised to it; and
// then a server of the older version can no longer be added.
func TestLevelRisesWithTheLastServer(t *testing.T) {
	nodes, leader := threeNodes(t, func(c *Config) {
		if c.ID == "3" {
			c.reportLevel = 1
		}
	})
	asks := leader.leader.levelAsks.Load()
	waitFor(t, func() bool { return leader.leader.levelAsks.Load() >= asks+2 })
	for _, n := range nodes {
		if lv := n.FSM().ClusterLevel(); lv != 1 {
			t.Fatalf("server %s at command level %d while server 3 reports level 1", n.ID(), lv)
		}
	}
	// Server 3 is upgraded: restarted on its data without the older level.
	cfg := nodes[2].cfg
	nodes[2].Close()
	cfg.reportLevel = 0
	var upgraded *Node
	waitFor(t, func() bool {
		n, err := NewNode(cfg)
		if err != nil {
			return false
		}
		upgraded = n
		return true
	})
	t.Cleanup(func() { upgraded.Close() })
	waitLevel(t, nodes[0], nodes[1], upgraded)

	old := newTestNodeWith(t, "4", func(c *Config) { c.Join = true; c.reportLevel = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead := waitAgreedLeader(t, nodes[0], nodes[1], upgraded)
	_, err := (admin{lead}).AddMember(ctx, &apipb.AddMemberRequest{Id: "4", PeerAddress: old.cfg.PeerAddr, NonVoter: true})
	if err == nil || !strings.Contains(err.Error(), "command level 1") {
		t.Fatalf("adding a server of an older level: %v", err)
	}
	if old.inConfiguration() {
		t.Fatal("the older server was added")
	}
	if lv := lead.FSM().ClusterLevel(); lv != fsm.Level {
		t.Fatalf("level %d", lv)
	}
}

// TestHaltOnAnEntryItCannotApply: a server whose log holds an entry it can
// neither apply nor skip (here a command no coordd wrote) stops: Halted
// closes, HaltErr names the entry, its client port closes; started again
// on the same data it stops at the same entry, never past it.
func TestHaltOnAnEntryItCannotApply(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	cfg := n.cfg
	bad := n.raft.Apply([]byte{0xff, 0xff, 0xff}, 5*time.Second)
	if err := bad.Error(); err != nil {
		t.Fatal(err)
	}
	idx := int64(bad.Index())
	select {
	case <-n.Halted():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
	if err := n.HaltErr(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("log entry %d", idx)) {
		t.Fatalf("halt error %v, want it to name entry %d", err, idx)
	}
	waitFor(t, func() bool {
		c, err := net.DialTimeout("tcp", n.ClientAddr(), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	n.Close()
	var again *Node
	waitFor(t, func() bool {
		var err error
		again, err = NewNode(cfg)
		return err == nil
	})
	t.Cleanup(func() { again.Close() })
	select {
	case <-again.Halted():
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted server applied past the entry")
	}
	if got := again.FSM().AppliedIndex(); got >= idx {
		t.Fatalf("applied %d, at or past the bad entry %d", got, idx)
	}
}
