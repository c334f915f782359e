package lockrecipe_test

import (
	"errors"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/test/cluster"
)

// TestSessionLostOnSuspension: when its only server stops, a holder counts
// as lost when the client suspends the session (the leader confirmed
// nothing it sent in the last T - V - M), not at the disconnect, and before
// the session can expire. Its node survives the restart (a new leader gives
// every session a full timeout), so Unlock still works, and the session
// takes the lock again. (A 2s margin leaves the restart time before the
// client gives the session up, T after it last sent.)
func TestSessionLostOnSuspension(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	cl := connectWith(t, c.Servers(), client.WithSuspendMargin(2*time.Second))
	m := lockrecipe.NewMutex(lockrecipe.NewSession(cl), "/susp")
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if conf := cl.Confirmation(); !conf.Vouched || conf.VouchInterval != 100*time.Millisecond {
		t.Fatalf("confirmation %+v: want vouches every 100ms (tick 200ms)", conf)
	}
	c.Stop(0)
	select {
	case <-m.Lost():
	case <-ctx.Done():
		t.Fatal("Lost never closed")
	}
	lostAt := time.Now()
	conf := cl.Confirmation()
	if conf.Margin != 2*time.Second {
		t.Fatalf("margin %v, want the 2s asked for", conf.Margin)
	}
	if !conf.Suspended || lostAt.Before(conf.SuspendAt()) || !lostAt.Before(conf.EarliestExpiry()) {
		t.Fatalf("Lost closed at %v; suspension due at %v, earliest expiry %v (suspended: %v)",
			lostAt.Format(time.StampMilli), conf.SuspendAt().Format(time.StampMilli), conf.EarliestExpiry().Format(time.StampMilli), conf.Suspended)
	}
	c.Start(0)
	c.WaitLeader(10 * time.Second)
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the session was confirmed again: %v", err)
	}
	if _, err := m.Lock(ctx); err != nil || closed(m.Lost()) {
		t.Fatalf("Lock after the session was confirmed again: %v (lost %v)", err, closed(m.Lost()))
	}
}

// TestSessionEnded: once the client is closed, the Session is done and
// recipes fail with the client's error instead of hanging.
func TestSessionEnded(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	s := lockrecipe.NewSession(cl)
	m := lockrecipe.NewMutex(s, "/ended")
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("Session not done after Close")
	}
	select {
	case <-m.Lost():
	case <-ctx.Done():
		t.Fatal("Lost open after Close")
	}
	if err := m.Unlock(ctx); !errors.Is(err, lockrecipe.ErrLockLost) || !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Unlock after Close: %v", err)
	}
	if _, err := lockrecipe.NewMutex(s, "/ended").Lock(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Lock after Close: %v", err)
	}
}

// TestSessionOnePerClient: a second NewSession on a client returns the
// first, so all its recipes share one view of the session.
func TestSessionOnePerClient(t *testing.T) {
	c := server(t)
	cl := connect(t, c.Servers()...)
	if a, b := lockrecipe.NewSession(cl), lockrecipe.NewSession(cl); a != b {
		t.Fatal("two Sessions for one client")
	}
}

// TestSessionWhileProgramReadsStates: a program that reads the client's
// States channel itself (to log the connection, say) takes nothing from the
// Session. The Session sees the session suspended and confirmed again, so a
// holder counts as lost and the next Lock works; the program sees the
// events too.
func TestSessionWhileProgramReadsStates(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	cl := connectWith(t, c.Servers(), client.WithSuspendMargin(2*time.Second))
	m := lockrecipe.NewMutex(lockrecipe.NewSession(cl), "/shared-states")
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	seen := make(chan client.State, 64)
	go func() {
		for ev := range cl.States() {
			seen <- ev.State
		}
		close(seen)
	}()
	c.Stop(0)
	cluster.Eventually(t, 10*time.Second, "the holder to count as lost", func() bool { return closed(m.Lost()) })
	c.Start(0)
	c.WaitLeader(10 * time.Second)
	for _, want := range []client.State{client.StateDisconnected, client.StateSuspended, client.StateReconnected} {
	wait:
		for {
			select {
			case st := <-seen:
				if st == want {
					break wait
				}
			case <-ctx.Done():
				t.Fatalf("the program's States reader never saw %v", want)
			}
		}
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after a resumed session: %v", err)
	}
	if _, err := m.Lock(ctx); err != nil || closed(m.Lost()) {
		t.Fatalf("Lock after the session resumed: %v (lost %v)", err, closed(m.Lost()))
	}
}
