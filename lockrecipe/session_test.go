package lockrecipe_test

import (
	"errors"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/test/cluster"
)

// TestSessionSuspendPolicy: with the default grace a holder counts as lost
// as soon as its connection breaks, though its node survives a quick
// reconnect (so Unlock still works); with a long grace a quick reconnect
// keeps it.
func TestSessionSuspendPolicy(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	strict := lockrecipe.NewMutex(session(t, c.Servers()...), "/susp/a")
	lenient := lockrecipe.NewMutex(lockrecipe.NewSession(connect(t, c.Servers()...), lockrecipe.WithSuspendGrace(time.Minute)), "/susp/b")
	if _, err := strict.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lenient.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	c.Stop(0)
	cluster.Eventually(t, 10*time.Second, "the strict holder to count as lost", func() bool { return closed(strict.Lost()) })
	c.Start(0)
	c.WaitLeader(10 * time.Second)
	// Both sessions resume; the lenient holder still holds.
	if closed(lenient.Lost()) {
		t.Fatal("lenient holder lost its lock over a short disconnect")
	}
	if err := lenient.Unlock(ctx); err != nil {
		t.Fatalf("lenient Unlock: %v", err)
	}
	if err := strict.Unlock(ctx); err != nil {
		t.Fatalf("strict Unlock after a resumed session: %v", err)
	}
	if _, err := strict.Lock(ctx); err != nil || closed(strict.Lost()) {
		t.Fatalf("Lock after resuming: %v (lost %v)", err, closed(strict.Lost()))
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
// Session. The Session sees the connection break and come back, so a holder
// counts as lost and the next Lock works; the program sees both events too.
func TestSessionWhileProgramReadsStates(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
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
	for _, want := range []client.State{client.StateDisconnected, client.StateReconnected} {
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
