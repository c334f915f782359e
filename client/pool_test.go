package client

import (
	"errors"
	"testing"
)

// TestPoolSharesOneConnection: sessions given the same Pool are
// independent sessions over one TCP connection per server; a stream that
// breaks is resumed over that connection, one session closing leaves the
// other working, and the connection stays for the next session.
func TestPoolSharesOneConnection(t *testing.T) {
	cl := newFakeCluster()
	s := cl.newServer(t, "s1")
	p := NewPool()
	defer p.Close()
	ctx := ctxT(t)

	c1 := connect(t, []*fakeServer{s}, WithPool(p))
	c2 := connect(t, []*fakeServer{s}, WithPool(p))
	if c1.SessionID() == c2.SessionID() {
		t.Fatalf("both clients got session %d", c1.SessionID())
	}
	if _, err := c1.Create(ctx, "/a", []byte("1"), CreateMode{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Create(ctx, "/e", nil, CreateMode{Kind: Ephemeral}); err != nil {
		t.Fatal(err)
	}
	if n := s.tcpConns.Load(); n != 1 {
		t.Fatalf("%d TCP connections for two pooled sessions, want 1", n)
	}

	// Both streams break; both sessions resume, over the same connection.
	nextState(t, c1, StateConnected)
	nextState(t, c2, StateConnected)
	s.killStreams()
	nextState(t, c1, StateDisconnected)
	nextState(t, c1, StateReconnected)
	nextState(t, c2, StateDisconnected)
	nextState(t, c2, StateReconnected)
	if _, err := c1.Set(ctx, "/a", []byte("2"), -1); err != nil {
		t.Fatal(err)
	}
	if n := s.tcpConns.Load(); n != 1 {
		t.Fatalf("%d TCP connections after the streams broke, want 1", n)
	}

	// Closing one session does not disturb the other.
	if err := c1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if data, _, err := c2.Get(ctx, "/a"); err != nil || string(data) != "2" {
		t.Fatalf("Get after the other session closed: %q %v", data, err)
	}
	if err := c2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if cl.exists("/e") {
		t.Fatal("ephemeral of the closed session still there")
	}
	// The connection outlives its sessions: the next one reuses it.
	c3 := connect(t, []*fakeServer{s}, WithPool(p))
	if _, _, err := c3.Get(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	if n := s.tcpConns.Load(); n != 1 {
		t.Fatalf("%d TCP connections after a new session, want 1", n)
	}

	// A closed pool refuses new sessions, with the reason.
	p.Close()
	if _, err := Connect(ctx, []string{s.addr}, WithPool(p)); !errors.Is(err, errPoolClosed) {
		t.Fatalf("Connect through a closed pool: %v", err)
	}
}
