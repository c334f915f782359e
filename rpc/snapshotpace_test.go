package rpc

import (
	"fmt"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
)

func TestSnapshotThresholdFollowsTheTree(t *testing.T) {
	for _, c := range []struct {
		flag   uint64
		znodes int
		want   uint64
	}{
		{8192, 0, 8192},
		{8192, 65536, 8192},         // exactly the flag's
		{8192, 100000, 12500},       // 100 000 znodes: one entry for 8
		{8192, 2000000, 250000},     // make scale's tree
		{1000000, 2000000, 1000000}, // a larger flag stands
		{16, 7, 16},
	} {
		if got := snapshotThreshold(c.flag, c.znodes); got != c.want {
			t.Errorf("snapshotThreshold(%d, %d) = %d, want %d", c.flag, c.znodes, got, c.want)
		}
	}
}

// TestSnapshotPaceFollowsTheTree: a server whose tree grows past the
// flag's threshold times znodesPerSnapshotEntry gives Raft a larger
// threshold, and the flag's again once the tree shrank back.
func TestSnapshotPaceFollowsTheTree(t *testing.T) {
	n := newTestNodeWith(t, "1", func(c *Config) {
		c.SnapshotThreshold = 16
		c.SnapshotInterval = 20 * time.Millisecond
	})
	waitLeader(t, n)
	s := newSession(t, n)
	multi := func(op func(path string) *apipb.MultiOp) {
		t.Helper()
		m := &apipb.MultiRequest{}
		for i := 0; i < 400; i++ {
			m.Ops = append(m.Ops, op(fmt.Sprintf("/pace-%d", i)))
		}
		if r := s.do(&apipb.Request{Op: &apipb.Request_Multi{Multi: m}}); r.Error != apipb.ErrorCode_OK {
			t.Fatalf("multi: %v", r)
		}
	}
	threshold := func(want uint64) {
		t.Helper()
		waitUntil(t, fmt.Sprintf("snapshot threshold %d", want), func() bool {
			return n.Raft().ReloadableConfig().SnapshotThreshold == want
		})
	}
	znodes := func() (z int) {
		n.FSM().Read(func(v fsm.View) { z = v.Tree.Len() })
		return z
	}
	threshold(16)
	multi(func(p string) *apipb.MultiOp {
		return &apipb.MultiOp{Op: &apipb.MultiOp_Create{Create: &apipb.CreateRequest{Path: p}}}
	})
	// The write's reply came after this server applied it.
	z := znodes()
	if z < 400 {
		t.Fatalf("%d znodes after creating 400", z)
	}
	threshold(snapshotThreshold(16, z))
	multi(func(p string) *apipb.MultiOp {
		return &apipb.MultiOp{Op: &apipb.MultiOp_Delete{Delete: &apipb.DeleteRequest{Path: p, Version: -1}}}
	})
	threshold(16)
}
