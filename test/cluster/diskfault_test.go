package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc"
)

// TestDamagedFollowerRefusedThenRebuilt: issue 37's found bug, then the
// README's rebuild ("A server that refuses its data dir"). A 3-server
// cluster takes 2 000 znodes in 10 multis of 200; a follower is stopped,
// 64 bytes of its WAL segment are flipped at 40% of its written part, and
// it is started again. It used to log "skipping log entry", serve, and
// hold 200 znodes fewer than the leader for good. It must refuse to start,
// naming the segment and the offset; and once removed, emptied and added
// again under a new id on the same addresses, it must hold the leader's
// tree.
func TestDamagedFollowerRefusedThenRebuilt(t *testing.T) {
	c := New(t, 3, Options{})
	cl := connect(t, c.Servers()...)
	ctx := ctxT(t)
	if _, err := cl.Create(ctx, "/df", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	for m := range 10 {
		var ops []client.Op
		for i := range 200 {
			ops = append(ops, client.CreateOp(fmt.Sprintf("/df/n%04d", m*200+i), []byte("x"), client.CreateMode{}))
		}
		if _, err := cl.Multi(ctx, ops...); err != nil {
			t.Fatal(err)
		}
	}
	f := c.Follower()
	old := c.Members[f]
	c.Eventually(10*time.Second, "the follower to hold the 2 000 znodes", func() bool { return children(old.Node(), "/df") == 2000 })
	c.Stop(f)

	seg := filepath.Join(old.Cfg.DataDir, "wal", "00000000000000000001-0000000000000000.wal")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	written := len(bytes.TrimRight(b, "\x00"))
	at := written * 4 / 10
	for i := at; i < at+64; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}

	err = c.start(f, 0)
	if !errors.Is(err, rpc.ErrDataDirDamaged) || !strings.Contains(err.Error(), filepath.Base(seg)) || !strings.Contains(err.Error(), "offset ") {
		t.Fatalf("the damaged follower started (or failed otherwise): %v", err)
	}
	t.Logf("refused: %v", err)

	// The rebuild: remove it, empty its data dir, start it with --join under
	// a new id on the same addresses, add it.
	c.RemoveMember(old.ID)
	if err := os.RemoveAll(old.Cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	cfg := old.Cfg
	cfg.ID, cfg.Peers, cfg.Join = "4", nil, true
	cfg.Logger = c.Members[0].Cfg.Logger.With("server", "4")
	cfg.DialPeer = c.Net.Dialer("4")
	c.Net.Register("4", cfg.PeerAddr)
	c.Members = append(c.Members, &Member{ID: "4", Cfg: cfg})
	n := len(c.Members) - 1
	c.Start(n)
	c.AddMember(n, false)
	wantVoters(t, c, strings.Join(without([]string{"1", "2", "3", "4"}, old.ID), ","), "")

	if _, err := cl.Create(ctxT(t), "/df/after", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	leader := c.WaitLeader(15 * time.Second)
	c.Eventually(20*time.Second, "the rebuilt server to hold the leader's tree", func() bool {
		ln, rn := c.Members[leader].Node(), c.Members[n].Node()
		if ln.FSM().AppliedIndex() != rn.FSM().AppliedIndex() {
			return false
		}
		return bytes.Equal(treeBytes(t, ln), treeBytes(t, rn))
	})
	if got := children(c.Members[n].Node(), "/df"); got != 2001 {
		t.Fatalf("the rebuilt server holds %d children of /df, want 2001", got)
	}
}

// children returns how many children path has on server n.
func children(n *rpc.Node, path string) int {
	var k int
	n.FSM().Read(func(v fsm.View) {
		names, _, _ := v.Tree.Children(path)
		k = len(names)
	})
	return k
}

// treeBytes returns server n's tree, encoded.
func treeBytes(t *testing.T, n *rpc.Node) []byte {
	t.Helper()
	var b bytes.Buffer
	var err error
	n.FSM().Read(func(v fsm.View) { _, err = v.Tree.WriteTo(&b) })
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func without(ids []string, id string) []string {
	var out []string
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}
