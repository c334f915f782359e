package rpc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/coordd/coordd/rpc/apipb"
)

// connectRefused reports whether the server refuses a new session, and why.
func connectRefused(t *testing.T, n *Node) (bool, string) {
	t.Helper()
	_, first := dialRaw(t, n.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 4000})
	if first.GetConnected() != nil {
		return false, ""
	}
	return true, first.String()
}

// TestJoinerServesNothingUntilAdded: a server started with Join serves no
// session until the leader adds it; then, as a non-voter, it serves one.
// Once removed it ends its sessions and refuses new ones.
func TestJoinerServesNothingUntilAdded(t *testing.T) {
	_, leader := threeNodes(t)
	n4 := joiner(t, "4")
	if refused, why := connectRefused(t, n4); !refused || !strings.Contains(why, "has no leader") {
		t.Fatalf("a joiner outside any configuration accepted a session (%v: %s)", refused, why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := (admin{leader}).AddMember(ctx, &apipb.AddMemberRequest{Id: "4", PeerAddress: n4.cfg.PeerAddr, NonVoter: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, n4.inConfiguration)
	var s *rawSession
	waitFor(t, func() bool {
		ss, first := dialRaw(t, n4.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 4000})
		s = ss
		return first.GetConnected() != nil
	})
	if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/via-4"}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("a write through the non-voter: %v", r)
	}

	if _, err := (admin{leader}).RemoveMember(ctx, &apipb.RemoveMemberRequest{Id: "4"}); err != nil {
		t.Fatal(err)
	}
	// The removed server learns of its removal (the entry that removes it
	// is sent to it), ends the session and refuses new ones.
	waitFor(t, func() bool { return !n4.inConfiguration() })
	waitFor(t, func() bool { return len(n4.engine.Local()) == 0 })
	if refused, _ := connectRefused(t, n4); !refused {
		t.Fatal("a removed server accepted a session")
	}
}

// TestJoinDataDir: --join accepts an empty data dir and, on a restart, the
// state it received by joining; it refuses the state of a server that
// bootstrapped, and changes nothing in it. A server among Peers bootstraps
// even with Join, so one set of flags serves every server.
func TestJoinDataDir(t *testing.T) {
	// A bootstrapped server's data dir, restarted with Join.
	cfg := testConfig(t, "1")
	n, err := NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, n)
	n.Close()
	before := dirListing(t, cfg.DataDir)
	cfg.Join = true
	if _, err := NewNode(cfg); !errors.Is(err, ErrJoinNotEmpty) || !strings.Contains(err.Error(), "without --join") {
		t.Fatalf("joining with a bootstrapped data dir: %v, want ErrJoinNotEmpty", err)
	}
	if after := dirListing(t, cfg.DataDir); after != before {
		t.Fatalf("the refused start changed the data dir:\n%s\nthen\n%s", before, after)
	}
	// With its id among the peers, Join bootstraps (and restarts) as usual.
	cfg.Peers = []Peer{{ID: "1", Addr: cfg.PeerAddr}}
	n, err = NewNode(cfg)
	if err != nil {
		t.Fatalf("an initial voter started with --join: %v", err)
	}
	waitLeader(t, n)
	n.Close()
	fresh := testConfig(t, "1")
	fresh.Join, fresh.Peers = true, []Peer{{ID: "1", Addr: fresh.PeerAddr}}
	n, err = NewNode(fresh)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, n)
	n.Close()

	// Without Join, an id missing from the peers list is a mistake.
	bad := testConfig(t, "9")
	bad.Peers = []Peer{{ID: "1", Addr: "127.0.0.1:1"}}
	if _, err := NewNode(bad); err == nil || !strings.Contains(err.Error(), "start it with --join") {
		t.Fatalf("an id missing from the peers: %v", err)
	}
}

// TestJoinerRestarts: a server that joined restarts with Join and its data,
// still a member.
func TestJoinerRestarts(t *testing.T) {
	_, leader := threeNodes(t)
	var cfg Config
	n4 := newTestNodeWith(t, "4", func(c *Config) { c.Join = true; cfg = *c })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := (admin{leader}).AddMember(ctx, &apipb.AddMemberRequest{Id: "4", PeerAddress: n4.cfg.PeerAddr}); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, leader)
	if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/before-restart"}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatal(r)
	}
	want := leader.fsm.AppliedIndex()
	waitFor(t, func() bool { return n4.fsm.AppliedIndex() >= want })
	n4.Close()
	n4, err := NewNode(cfg)
	if err != nil {
		t.Fatalf("restarting a server that joined, with --join: %v", err)
	}
	defer n4.Close()
	waitFor(t, n4.inConfiguration)
	waitFor(t, func() bool { return n4.fsm.AppliedIndex() >= want })
}

// dirListing names every file under dir with its modification time, but
// the data dir's lock: every start takes it, a refused one too, and writes
// its pid in it (dirlock.go); it holds no state.
func dirListing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == lockFile {
			return nil
		}
		b.WriteString(rel)
		if !info.IsDir() {
			b.WriteString(" " + info.ModTime().String())
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestInitialVoterRejoins: an initial voter started with Join and an empty
// data dir, while the others already run a cluster (it was removed and its
// disk wiped, say), does not bootstrap a cluster of its own: it waits to
// be added back, as any joiner does.
func TestInitialVoterRejoins(t *testing.T) {
	nodes, leader := threeNodes(t)
	var gone *Node
	for _, n := range nodes {
		if n != leader {
			gone = n
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := (admin{leader}).RemoveMember(ctx, &apipb.RemoveMemberRequest{Id: gone.ID()}); err != nil {
		t.Fatal(err)
	}
	cfg := gone.cfg
	gone.Close()
	cfg.DataDir, cfg.Join = t.TempDir(), true // the disk wiped; the same flags
	var back *Node
	waitFor(t, func() bool { // the old listeners may take a moment to go
		var err error
		back, err = NewNode(cfg)
		return err == nil
	})
	defer back.Close()
	if back.inConfiguration() {
		t.Fatal("the returning voter bootstrapped a cluster of its own")
	}
	if _, err := (admin{leader}).AddMember(ctx, &apipb.AddMemberRequest{Id: cfg.ID, PeerAddress: cfg.PeerAddr}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, back.inConfiguration)
	waitFor(t, func() bool { return back.fsm.AppliedIndex() >= leader.fsm.AppliedIndex() })
}

// TestAddRefusesStrangers: a server that leads a cluster of its own (it
// was started without --join) is not added, nor one that says it has
// another id; the membership stays as it was.
func TestAddRefusesStrangers(t *testing.T) {
	_, leader := threeNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alone := newTestNode(t, "4") // bootstrapped by itself
	waitLeader(t, alone)
	_, err := (admin{leader}).AddMember(ctx, &apipb.AddMemberRequest{Id: "4", PeerAddress: alone.cfg.PeerAddr})
	wantCode(t, err, codes.FailedPrecondition, "leads a cluster of its own")
	if reasonOf(err) != reasonNotJoining {
		t.Fatalf("reason %q", reasonOf(err))
	}
	j := joiner(t, "5")
	_, err = (admin{leader}).AddMember(ctx, &apipb.AddMemberRequest{Id: "6", PeerAddress: j.cfg.PeerAddr})
	wantCode(t, err, codes.InvalidArgument, "is server 5, not 6")
	resp, err := (admin{leader}).Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, nv := voters(resp); len(v) != 3 || len(nv) != 0 {
		t.Fatalf("refused additions changed the membership: voters %v, non-voters %v", v, nv)
	}
}
