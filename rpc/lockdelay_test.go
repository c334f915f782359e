package rpc

import (
	"errors"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/zk/jute"
	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
)

// nodeState is what one server shows of a path: whether the node is there
// and its owner, and its lock-delay record.
type nodeState struct {
	exists bool
	owner  int64
	delay  session.LockDelay
	kept   bool
}

func stateOf(n *Node, p string) nodeState {
	var s nodeState
	n.FSM().Read(func(v fsm.View) {
		st, err := v.Tree.Exists(p)
		s.exists, s.owner = err == nil, st.EphemeralOwner
		s.delay, s.kept = v.Sessions.LockDelayOf(p)
	})
	return s
}

// zkHolder connects over ZooKeeper's protocol to n with a short timeout,
// creates /locks (if need be), the ephemerals /locks/<name> and
// /free-<name>, and returns its session id. It then sends nothing more, as
// a frozen holder: its session expires.
func zkHolder(t *testing.T, n *Node, name string) int64 {
	t.Helper()
	z := dialZK(t, n.ClientAddr())
	resp := z.connect(jute.ConnectRequest{TimeOut: 1000})
	if resp.SessionID == 0 {
		t.Fatal("no session")
	}
	acl := jute.OpenACL()
	if h, _ := z.call(jute.OpCreate, &jute.CreateRequest{Path: "/locks", ACL: acl}); h.Err != jute.CodeOK && h.Err != jute.CodeNodeExists {
		t.Fatalf("create /locks: %v", h.Err)
	}
	for _, p := range []string{"/locks/" + name, "/free-" + name} {
		if h, _ := z.call(jute.OpCreate, &jute.CreateRequest{Path: p, ACL: acl, Flags: jute.ModeEphemeral}); h.Err != jute.CodeOK {
			t.Fatalf("create %s: %v", p, h.Err)
		}
	}
	return resp.SessionID
}

// TestLockDelayReleasedOnTimeByAnyLeader: a ZooKeeper client's session
// expires; its ephemeral under the lock-delay prefix stays on every server,
// still owned by the dead session, with the same record everywhere, while
// its other ephemeral goes with the expiry; the leader is then stopped,
// and the next one releases the node once the delay (from the expiry's
// time) has passed, not before.
func TestLockDelayReleasedOnTimeByAnyLeader(t *testing.T) {
	const delay = 1500 * time.Millisecond
	nodes, leader := threeNodes(t, func(c *Config) { c.LockDelays = []LockDelay{{Prefix: "/locks", Delay: delay}} })
	waitLevel(t, nodes...)
	var rest []*Node
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	lastSent := time.Now().UnixMilli()
	sid := zkHolder(t, rest[0], "m")
	waitFor(t, func() bool {
		for _, n := range nodes {
			if stateOf(n, "/free-m").exists {
				return false
			}
		}
		return true
	})
	expiredBy := time.Now().UnixMilli()
	var until int64
	for _, n := range nodes {
		s := stateOf(n, "/locks/m")
		if !s.exists || s.owner != sid || !s.kept || s.delay.Session != sid {
			t.Fatalf("server %s after the expiry: %+v", n.ID(), s)
		}
		if until == 0 {
			until = s.delay.Until
		}
		if s.delay.Until != until {
			t.Fatalf("server %s keeps /locks/m until %d, another until %d", n.ID(), s.delay.Until, until)
		}
	}
	if expiry := until - delay.Milliseconds(); expiry < lastSent || expiry > expiredBy {
		t.Fatalf("kept until %d: the delay runs from %d, not from the expiry (between %d and %d)", until, expiry, lastSent, expiredBy)
	}

	leader.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := time.Now().UnixMilli()
		gone := true
		for _, n := range rest {
			if s := stateOf(n, "/locks/m"); s.exists || s.kept {
				gone = false
			}
		}
		if gone {
			if now < until {
				t.Fatalf("released at %d, %d ms before the delay ended", now, until-now)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not released 10s after the leader stopped (delay until %d, now %d)", until, now)
		}
		time.Sleep(time.Millisecond)
	}
	// Every server counts what it applied: one delay started, one released.
	for _, n := range rest {
		got := map[string]float64{}
		mfs, err := n.metrics.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				name := mf.GetName()
				for _, l := range m.GetLabel() {
					name += "{" + l.GetValue() + "}"
				}
				got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		want := map[string]float64{"coordd_lock_delays_total": 1, "coordd_lock_delays_ended_total{released}": 1,
			"coordd_lock_delays_ended_total{deleted}": 0, "coordd_lock_delayed_znodes": 0}
		for name, v := range want {
			if got[name] != v {
				t.Errorf("server %s: %s = %v, want %v", n.ID(), name, got[name], v)
			}
		}
	}
}

// TestLockDelayNotForCleanCloses: a client that closes its session (not an
// expiry) releases its nodes at once; and while the cluster is at command
// level 1 (a member of an older version) an expiry keeps nothing.
func TestLockDelayNotForCleanCloses(t *testing.T) {
	t.Run("clean close", func(t *testing.T) {
		n := newTestNodeWith(t, "1", func(c *Config) { c.LockDelays = []LockDelay{{Prefix: "/", Delay: time.Minute}} })
		waitLeader(t, n)
		waitLevel(t, n)
		z := zkSession(t, n)
		if h, _ := z.call(jute.OpCreate, &jute.CreateRequest{Path: "/l", ACL: jute.OpenACL(), Flags: jute.ModeEphemeral}); h.Err != jute.CodeOK {
			t.Fatalf("create: %v", h.Err)
		}
		if h, _ := z.call(jute.OpCloseSession, &jute.Empty{}); h.Err != jute.CodeOK {
			t.Fatalf("close: %v", h.Err)
		}
		if s := stateOf(n, "/l"); s.exists || s.kept {
			t.Fatalf("after a clean close: %+v", s)
		}
	})
	t.Run("level 1", func(t *testing.T) {
		nodes, leader := threeNodes(t, func(c *Config) {
			c.LockDelays = []LockDelay{{Prefix: "/locks", Delay: time.Minute}}
			if c.ID == "3" {
				c.reportLevel = 1
			}
		})
		zkHolder(t, leader, "m")
		waitFor(t, func() bool {
			for _, n := range nodes {
				if stateOf(n, "/free-m").exists {
					return false
				}
			}
			return true
		})
		for _, n := range nodes {
			if s := stateOf(n, "/locks/m"); s.exists || s.kept || n.FSM().ClusterLevel() != 1 {
				t.Fatalf("server %s at level %d: %+v", n.ID(), n.FSM().ClusterLevel(), s)
			}
		}
	})
}

// TestLockDelayRules: the flag's syntax, and the rules a server refuses.
func TestLockDelayRules(t *testing.T) {
	got, err := ParseLockDelays("/locks=10s,/locks/fast=0s,/=1m")
	want := []LockDelay{{"/locks", 10 * time.Second}, {"/locks/fast", 0}, {"/", time.Minute}}
	if err != nil || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("ParseLockDelays = %v, %v", got, err)
	}
	for _, bad := range []string{"/locks", "=10s", "/locks=", "/locks=ten"} {
		if _, err := ParseLockDelays(bad); err == nil {
			t.Errorf("ParseLockDelays(%q): no error", bad)
		}
	}
	for _, c := range []struct {
		rules []LockDelay
		ok    bool
	}{
		{[]LockDelay{{"/locks", 10 * time.Second}}, true},
		{[]LockDelay{{"/", MaxLockDelay}}, true},
		{[]LockDelay{{"locks", time.Second}}, false},
		{[]LockDelay{{"/locks/", time.Second}}, false},
		{[]LockDelay{{"/locks", -time.Second}}, false},
		{[]LockDelay{{"/locks", MaxLockDelay + time.Millisecond}}, false},
		{[]LockDelay{{"/locks", 1500 * time.Microsecond}}, false},
		{[]LockDelay{{"/locks", time.Second}, {"/locks", 2 * time.Second}}, false},
	} {
		err := checkLockDelays(c.rules)
		if (err == nil) != c.ok {
			t.Errorf("checkLockDelays(%v) = %v", c.rules, err)
		}
		if err != nil && errors.Is(err, tree.ErrBadArguments) {
			t.Errorf("checkLockDelays(%v): %v wraps a tree error", c.rules, err)
		}
	}
}
