package cluster

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/apipb"
)

// coordClient is a public-API client of one server, for its unary calls.
func coordClient(t testing.TB, addr string) apipb.CoordClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return apipb.NewCoordClient(cc)
}

// TestStatusReportsEachMembersRaftView: Status gives every member's own
// term, commit index, last contact with the leader and the requests it
// answered, as that member reports them, whichever server answers.
func TestStatusReportsEachMembersRaftView(t *testing.T) {
	c := New(t, 3, Options{})
	lead := c.LeaderIndex()
	cl := connect(t, c.Members[lead].Cfg.ClientAddr)
	ctx := ctxT(t)
	for i := 0; i < 5; i++ {
		if _, err := cl.Create(ctx, "/s", nil, client.CreateMode{Sequential: true}); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(10*time.Second, cl.LastZxid())
	term := c.Members[lead].Node().Raft().CurrentTerm()

	// Reads on the leader too, for its counters.
	for i := 0; i < 7; i++ {
		if _, _, err := cl.Get(ctx, "/"); err != nil {
			t.Fatal(err)
		}
	}
	api := coordClient(t, c.Members[c.Follower()].Cfg.ClientAddr)
	var resp *apipb.StatusResponse
	c.Eventually(10*time.Second, "every member reports its commit index", func() bool {
		var err error
		resp, err = api.Status(ctx, &apipb.StatusRequest{})
		if err != nil || len(resp.Members) != 3 {
			return false
		}
		for _, m := range resp.Members {
			if m.Commit < cl.LastZxid() {
				return false
			}
		}
		return true
	})
	for _, m := range resp.Members {
		if m.Term != term {
			t.Errorf("member %s: term %d, want %d", m.Id, m.Term, term)
		}
		if m.Commit < m.Applied {
			t.Errorf("member %s: commit %d below applied %d", m.Id, m.Commit, m.Applied)
		}
		// Only the leader's session read and wrote: 5 creates and 7 reads
		// (a create is counted by the server its session is on).
		if m.Id == c.Members[lead].ID {
			if m.Writes < 5 || m.Reads < 7 || m.WriteSeconds <= 0 {
				t.Errorf("leader %s: %d reads, %d writes taking %gs; want at least 7 and 5", m.Id, m.Reads, m.Writes, m.WriteSeconds)
			}
		} else if m.Writes != 0 || m.Reads != 0 {
			t.Errorf("member %s answered %d reads and %d writes; no client used it", m.Id, m.Reads, m.Writes)
		}
		switch {
		case m.Id == c.Members[lead].ID:
			if m.Role != "leader" || m.LastContactMs != 0 {
				t.Errorf("leader %s: role %q, last contact %dms, want leader and 0", m.Id, m.Role, m.LastContactMs)
			}
		case m.LastContactMs < 0 || m.LastContactMs > 5000:
			// Followers hear the leader's heartbeats many times a second.
			t.Errorf("follower %s: last contact %dms ago", m.Id, m.LastContactMs)
		}
	}
}

// TestSessionsCountEachSessionsWatches: the Sessions listing says how many
// watches each session holds on its server, whichever server answers.
func TestSessionsCountEachSessionsWatches(t *testing.T) {
	c := New(t, 3, Options{})
	f := c.Follower()
	cl := connect(t, c.Members[f].Cfg.ClientAddr)
	idle := connect(t, c.Members[f].Cfg.ClientAddr)
	ctx := ctxT(t)
	if _, err := cl.Create(ctx, "/w", nil, client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	// A data watch and a child watch on /w, an exists watch on a missing node.
	if _, _, _, err := cl.GetW(ctx, "/w"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := cl.ChildrenW(ctx, "/w"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := cl.ExistsW(ctx, "/missing"); err != nil {
		t.Fatal(err)
	}
	api := coordClient(t, c.Members[c.LeaderIndex()].Cfg.ClientAddr)
	watches := func(ctx context.Context, id int64) (int64, string, bool) {
		resp, err := api.Sessions(ctx, &apipb.SessionsRequest{})
		if err != nil {
			return 0, "", false
		}
		for _, s := range resp.Sessions {
			if s.Id == id {
				return s.Watches, s.Server, true
			}
		}
		return 0, "", false
	}
	c.Eventually(10*time.Second, "the watches counted", func() bool {
		n, server, ok := watches(ctx, cl.SessionID())
		return ok && n == 3 && server == c.Members[f].ID
	})
	if n, _, ok := watches(ctx, idle.SessionID()); !ok || n != 0 {
		t.Errorf("a session without watches: listed %v with %d watches", ok, n)
	}
	// A watch that fires is gone.
	if _, err := cl.Set(ctx, "/w", []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	c.Eventually(10*time.Second, "the fired data watch uncounted", func() bool {
		n, _, ok := watches(ctx, cl.SessionID())
		return ok && n == 2
	})
}
