package lockrecipe

import (
	"context"
	"sync"
	"time"

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
// Lost channel when the session expires or is closed, when its own node is
// deleted, or when the session has been disconnected for longer than the
// suspend grace (WithSuspendGrace). The default grace is zero: a holder
// counts as lost as soon as the client reports StateDisconnected, like
// Curator's standard policy. A longer grace is unsafe with this client:
// it notices a silently dead server only after 2/3 of the session timeout
// without a message (plus one of its ticks, 1/12 of the timeout), while the
// servers may expire the session one full timeout after they last heard from
// it, which can leave as little as a quarter of the timeout between the
// disconnect event and the moment another client acquires. A grace of zero
// keeps that whole margin; a negative grace means "only on expiry" (unsafe:
// another owner may acquire before this one learns it lost).
//
// A holder that was merely suspended still has its node once the session
// resumes, so others stay blocked until it calls Unlock; it must not go on
// assuming it holds after Lost closed.
type Session struct {
	c     *client.Client
	grace time.Duration

	mu       sync.Mutex
	gen      chan struct{} // closed at the next loss; replaced on resume
	renewed  chan struct{} // closed (and replaced) when gen is replaced or the session ends
	suspend  *time.Timer   // pending grace timer while disconnected
	terminal bool
	done     chan struct{}
}

// SessionOption configures NewSession.
type SessionOption func(*Session)

// WithSuspendGrace sets how long the session may stay disconnected before
// the recipes' holders count as lost (default 0: at once; negative: never,
// only on expiry). See Session for why the default is zero.
func WithSuspendGrace(d time.Duration) SessionOption {
	return func(s *Session) { s.grace = d }
}

// sessions maps each client to its live Session, so that all the recipes of
// one client share one view of its health (one suspend timer, one
// generation).
var sessions sync.Map // *client.Client -> *Session

// NewSession subscribes to c's state changes and returns the Session that
// every recipe of c is built on. Its goroutine ends when the client's session
// expires or the client is closed. Calling NewSession again for the same
// live client returns the same Session (the new options are ignored).
func NewSession(c *client.Client, opts ...SessionOption) *Session {
	s := &Session{c: c, gen: make(chan struct{}), renewed: make(chan struct{}), done: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	if prev, loaded := sessions.LoadOrStore(c, s); loaded {
		return prev.(*Session)
	}
	state, events, stop := c.NotifyStates()
	switch state {
	case client.StateExpired, client.StateClosed:
		stop()
		s.end()
		return s
	case client.StateDisconnected:
		s.disconnected()
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
		case client.StateDisconnected:
			s.disconnected()
		case client.StateConnected, client.StateReconnected:
			s.resumed()
		case client.StateExpired, client.StateClosed:
			s.end()
			return
		}
	}
	s.end()
}

func (s *Session) disconnected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.terminal || s.suspend != nil || s.grace < 0 {
		return
	}
	if s.grace == 0 {
		s.loseLocked()
		return
	}
	gen := s.gen
	s.suspend = time.AfterFunc(s.grace, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gen == gen && s.suspend != nil {
			s.suspend = nil
			s.loseLocked()
		}
	})
}

func (s *Session) resumed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.terminal {
		return
	}
	if s.suspend != nil {
		s.suspend.Stop()
		s.suspend = nil
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
	if s.suspend != nil {
		s.suspend.Stop()
		s.suspend = nil
	}
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
// While the session is suspended past its grace it first waits (bounded by
// ctx) for it to resume, so that a recipe decides nothing on answers from a
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
