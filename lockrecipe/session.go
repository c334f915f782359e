package lockrecipe

import (
	"context"
	"sync"

	"github.com/coordd/coordd/client"
)

// Session is the recipes' view of one client.Client: it follows the
// client's state through a subscription of its own (client.NotifyStates) and
// fans the session's health out to every recipe built on it. Create one
// Session per client and build every recipe of that client on it. The
// program may read the client's States channel as it likes: the Session does
// not share it.
//
// # When a holder counts as lost
//
// A recipe that holds something (a lock, a permit, leadership) closes its
// Lost channel when the client suspends the session (client.StateSuspended),
// when the session expires or is closed, or when its own node is deleted.
//
// The client suspends the session before the leader can expire it. The
// servers vouch for the session: they tell the client which of its requests
// the leader has heard of, in a term a majority confirmed afterwards; no
// leader expires the session before the session timeout T has passed since
// the client sent the last such request (sent). So Lost closes at
//
//	sent + T - V - M
//
// at the latest, where V is the server's vouch interval (half its tick:
// 500ms with coordd's default 1s tick) and M the client's margin
// (client.WithSuspendMargin; by default max(T/50, 50ms), which covers the
// drift between the client's clock and the leader's and a late timer). The
// next owner can acquire only after the leader expired the session, at
// sent + T at the earliest: a holder that stops within V + M of Lost
// closing, by its own clock, never overlaps the next one. With T = 10s and
// the default tick, Lost closes 700ms before the earliest expiry; with
// T = 4s and a 200ms tick, 180ms before.
//
// A disconnect alone does not close Lost: the client moves to another
// server, and the session stays confirmed if a server vouches for it in
// time. A leader change alone does not either, when it takes less than
// about T - 2V - M - T/3 (a new leader gives every session a full timeout).
// Against a server too old to vouch, the client suspends the session at
// every disconnect, and Lost closes then.
//
// A holder that was suspended still has its node once the session is
// confirmed again, so others stay blocked until it calls Unlock; it must not
// go on assuming it holds after Lost closed (another owner may have taken
// the lock if the session expired meanwhile). Fencing tokens (Token,
// GuardedMulti) protect what a late holder writes regardless.
type Session struct {
	c *client.Client

	mu       sync.Mutex
	gen      chan struct{} // closed at the next loss; replaced on resume
	renewed  chan struct{} // closed (and replaced) when gen is replaced or the session ends
	terminal bool
	done     chan struct{}
}

// sessions maps each client to its live Session, so that all the recipes of
// one client share one view of its health (one generation).
var sessions sync.Map // *client.Client -> *Session

// NewSession subscribes to c's state changes and returns the Session that
// every recipe of c is built on. Its goroutine ends when the client's session
// expires or the client is closed. Calling NewSession again for the same
// live client returns the same Session.
func NewSession(c *client.Client) *Session {
	s := &Session{c: c, gen: make(chan struct{}), renewed: make(chan struct{}), done: make(chan struct{})}
	if prev, loaded := sessions.LoadOrStore(c, s); loaded {
		return prev.(*Session)
	}
	state, events, stop := c.NotifyStates()
	switch state {
	case client.StateExpired, client.StateClosed:
		stop()
		s.end()
		return s
	default:
		// Suspended, or disconnected while suspended.
		if state == client.StateSuspended || c.Confirmation().Suspended {
			s.suspended()
		}
	}
	go s.run(events, stop)
	return s
}

// Client returns the session's client.
func (s *Session) Client() *client.Client { return s.c }

// Done is closed when the client's session has ended (expired or closed).
func (s *Session) Done() <-chan struct{} { return s.done }

func (s *Session) run(events <-chan client.StateEvent, stop func()) {
	defer stop()
	for ev := range events {
		switch ev.State {
		case client.StateSuspended:
			s.suspended()
		case client.StateConnected, client.StateReconnected:
			s.resumed()
		case client.StateExpired, client.StateClosed:
			s.end()
			return
		}
	}
	s.end()
}

// suspended makes every holder of the current generation lost.
func (s *Session) suspended() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.terminal {
		s.loseLocked()
	}
}

// resumed starts a new generation after a loss.
func (s *Session) resumed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.terminal {
		return
	}
	select {
	case <-s.gen:
		s.gen = make(chan struct{})
		close(s.renewed)
		s.renewed = make(chan struct{})
	default:
	}
}

func (s *Session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.terminal {
		return
	}
	s.terminal = true
	s.loseLocked()
	close(s.renewed)
	close(s.done)
	sessions.CompareAndDelete(s.c, s)
}

func (s *Session) loseLocked() {
	select {
	case <-s.gen:
	default:
		close(s.gen)
	}
}

// liveGeneration returns a channel that closes at the session's next loss.
// While the session is suspended it first waits (bounded by ctx) for the
// leader to confirm it again, so that a recipe decides nothing on answers from a
// suspended session. Once the session has ended it returns the closed
// channel at once.
func (s *Session) liveGeneration(ctx context.Context) (<-chan struct{}, error) {
	for {
		s.mu.Lock()
		gen, renewed, terminal := s.gen, s.renewed, s.terminal
		s.mu.Unlock()
		select {
		case <-gen:
		default:
			return gen, nil
		}
		if terminal {
			return gen, nil
		}
		select {
		case <-renewed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// ended reports whether the client's session is over.
func (s *Session) ended() bool {
	switch s.c.State() {
	case client.StateExpired, client.StateClosed:
		return true
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
