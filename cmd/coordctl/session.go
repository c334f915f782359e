package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/client"
)

// session is the one coordd session of an invocation, with the goroutine that
// reports its state changes on stderr.
type session struct {
	cl        *client.Client
	closing   atomic.Bool   // close was called: state changes are expected
	expired   chan struct{} // closed when the session expires
	stateDone chan struct{} // closed when States is drained
}

// session returns the invocation's session, opening it on first use.
func (c *cli) session(ctx context.Context) (*client.Client, error) {
	if c.sess == nil {
		s, err := c.connect(ctx)
		if err != nil {
			return nil, err
		}
		c.sess = s
	}
	return c.sess.cl, nil
}

// probeTimeout bounds the first check of whether the servers accept
// connections at all.
const probeTimeout = 2 * time.Second

// connect opens a session within the command timeout and starts reporting
// its state changes. When no server accepts a connection it fails at once;
// otherwise, when none opens the session in time, it says why each failed.
func (c *cli) connect(ctx context.Context) (*session, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	interrupted := func() bool { return errors.Is(parent.Err(), context.Canceled) }
	failed := probe(ctx, c.servers, min(c.timeout, probeTimeout))
	if interrupted() {
		return nil, parent.Err()
	}
	if len(failed) == len(c.servers) {
		return nil, &connectError{what: "cannot connect: no server accepts connections", servers: failures(c.servers, failed, nil)}
	}
	rec := &connectFailures{last: map[string]error{}, changed: make(chan struct{}, 1)}
	ctx, stopTrying := context.WithCancel(ctx)
	defer stopTrying()
	hopeless := make(chan struct{})
	go c.giveUpWhenHopeless(ctx, rec, failed, func() { close(hopeless); stopTrying() })
	cl, err := client.Connect(ctx, c.servers, c.clientOptions(client.WithLogger(slog.New(rec)))...)
	if err != nil {
		select {
		case <-hopeless:
			return nil, &connectError{what: "cannot connect to any server", servers: c.explainTLS(failures(c.servers, failed, rec.get), rec.get)}
		default:
		}
	}
	switch {
	case err == nil:
	case interrupted():
		return nil, parent.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return nil, &connectError{what: "cannot connect to any server", after: c.timeout, servers: c.explainTLS(failures(c.servers, failed, rec.get), rec.get)}
	default:
		return nil, fmt.Errorf("cannot connect: %w", err)
	}
	if err := c.authenticate(ctx, cl); err != nil {
		cctx, ccancel := context.WithTimeout(context.Background(), c.timeout)
		defer ccancel()
		_ = cl.Close(cctx)
		return nil, err
	}
	s := &session{cl: cl, expired: make(chan struct{}), stateDone: make(chan struct{})}
	go s.reportStates(c.stderr, c.inShell)
	return s, nil
}

// reportStates prints the session's state changes after the first
// connection: disconnections, reconnections and expiry.
func (s *session) reportStates(w io.Writer, inShell bool) {
	defer close(s.stateDone)
	expired := false
	for ev := range s.cl.States() {
		if s.closing.Load() {
			continue
		}
		switch ev.State {
		case client.StateDisconnected:
			if ev.Err != nil {
				fmt.Fprintf(w, "coordctl: disconnected from %s: %s; reconnecting\n", ev.Server, errText(ev.Err))
			} else {
				fmt.Fprintf(w, "coordctl: disconnected from %s; reconnecting\n", ev.Server)
			}
		case client.StateReconnected:
			fmt.Fprintf(w, "coordctl: reconnected to %s (session 0x%x)\n", ev.Server, s.cl.SessionID())
		case client.StateSuspended:
			fmt.Fprintf(w, "coordctl: session 0x%x suspended: it may expire (the leader has not confirmed it lately)\n", s.cl.SessionID())
		case client.StateExpired:
			if ev.Err != nil {
				fmt.Fprintf(w, "coordctl: session 0x%x expired: %s\n", s.cl.SessionID(), errText(ev.Err))
			} else {
				fmt.Fprintf(w, "coordctl: session 0x%x expired\n", s.cl.SessionID())
			}
			if inShell {
				fmt.Fprintln(w, "coordctl: the shell's commands will fail from now on; quit and start coordctl again for a new session")
			}
			if !expired {
				expired = true
				close(s.expired)
			}
		}
	}
}

// close closes the session (deleting its ephemerals) and waits, briefly, for
// the state reporter to finish.
func (s *session) close(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s.closing.Store(true)
	err := s.cl.Close(ctx)
	select {
	case <-s.stateDone:
	case <-time.After(2 * time.Second):
	}
	if err != nil {
		return fmt.Errorf("closing the session: %w", err)
	}
	return nil
}

// giveUpWhenHopeless calls giveUp once every server has failed in a way
// that waiting does not mend: it refused the TCP connection (failed, from
// the first probe) or TLS stands in the way (a plaintext coordctl and a
// TLS server, or a certificate one side refuses). Then coordctl says why
// at once instead of after --timeout.
func (c *cli) giveUpWhenHopeless(ctx context.Context, rec *connectFailures, failed map[string]error, giveUp func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-rec.changed:
		}
		hopeless := true
		for _, addr := range c.servers {
			if failed[addr] != nil {
				continue
			}
			if _, ok := c.tlsReason(addr, rec.get(addr)); !ok {
				hopeless = false
				break
			}
		}
		if hopeless {
			giveUp()
			return
		}
	}
}
