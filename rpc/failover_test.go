package rpc

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// electionsCalled is how many elections n called for cause (the
// coordd_raft_elections_total series).
func electionsCalled(t *testing.T, n *Node, cause string) float64 {
	t.Helper()
	mfs, err := n.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "coordd_raft_elections_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" && l.GetValue() == cause {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no coordd_raft_elections_total{cause=%q}", cause)
	return 0
}

// TestLeaderGoneElectsAtOnce: when every connection of the leader closes
// and it accepts no new one (its process died), its followers elect a new
// leader at once, without waiting out their heartbeat timeout
// (rpc/third_party/raft, patch part 8). The followers' heartbeat timeout
// is raised to 20 s once the cluster runs, so no follower could call an
// election before 20 s on a missed heartbeat; the new leader must be there
// well before, and have been elected because the old one was found gone.
func TestLeaderGoneElectsAtOnce(t *testing.T) {
	is := newIsolator()
	nodes, leader := threeNodes(t, func(c *Config) {
		is.mu.Lock()
		is.addrs[c.PeerAddr] = c.ID
		is.mu.Unlock()
		c.DialPeer = is.dialer(c.ID)
	})
	const hb = 20 * time.Second
	var rest []*Node
	for _, n := range nodes {
		if n == leader {
			continue
		}
		rest = append(rest, n)
		rc := n.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = hb, hb
		if err := n.raft.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	before := map[*Node]float64{}
	for _, n := range rest {
		before[n] = electionsCalled(t, n, "heartbeat_timeout")
	}
	// As a kill -9 looks from the other servers: every connection of the
	// leader closes, and a new one is refused.
	killed := time.Now()
	is.isolate(leader.ID())
	var next *Node
	for next == nil {
		if time.Since(killed) > hb/2 {
			t.Fatalf("no new leader %v after the leader's connections closed (the heartbeat timeout is %v)", time.Since(killed), hb)
		}
		for _, n := range rest {
			if n.raft.State() == raft.Leader {
				next = n
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("server %s leads %v after the old leader's connections closed", next.ID(), time.Since(killed).Round(time.Millisecond))
	if got := electionsCalled(t, next, "leader_gone"); got < 1 {
		t.Fatalf("the new leader called %v elections because the leader was gone, want at least 1", got)
	}
	for _, n := range rest {
		if got := electionsCalled(t, n, "heartbeat_timeout") - before[n]; got != 0 {
			t.Errorf("server %s called %v elections on a heartbeat timeout since the leader's connections closed, want 0", n.ID(), got)
		}
	}
}
