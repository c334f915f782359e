package lockrecipe

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordd/coordd/client"
)

// Election is leader election on a path, built like Mutex: each candidate
// creates an ephemeral sequential child "_c_<guid>-elect-N" holding its
// value, the lowest child is the leader, and every other candidate watches
// only its immediate predecessor, so a leader's end wakes exactly one
// candidate. An Election value is one candidate.
type Election struct {
	q *queue
}

// NewElection returns an Election on path.
func NewElection(s *Session, path string, opts ...Option) *Election {
	return &Election{q: newQueue(s, path, "elect-", waitPredecessor, opts)}
}

// Campaign enters the election with value and blocks until this candidate
// leads or ctx ends (then its node is deleted before Campaign returns). It
// returns ErrAlreadyHeld if this candidate already campaigns or leads, and
// ErrLockLost if its node vanished while waiting.
func (e *Election) Campaign(ctx context.Context, value string) error {
	_, err := e.q.acquire(ctx, false, []byte(value))
	return err
}

// Resign leaves the election (deletes this candidate's node), handing
// leadership to the next candidate. It returns ErrNotHeld when not leading.
func (e *Election) Resign(ctx context.Context) error { return e.q.release(ctx) }

// Proclaim replaces the leader's value (observers see the new value),
// only while this candidate still leads with its node unchanged by others.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	return e.q.setData(ctx, []byte(value))
}

// Lost is closed when this leader can no longer be sure it leads (see
// Mutex.Lost).
func (e *Election) Lost() <-chan struct{} { return e.q.lostChan() }

// Token returns the leader's fencing token (its node's creation zxid), or 0
// when not leading.
func (e *Election) Token() Token { return e.q.token() }

// GuardedMulti applies ops only while this candidate still leads (see
// Mutex.GuardedMulti).
func (e *Election) GuardedMulti(ctx context.Context, ops ...client.Op) ([]client.OpResult, error) {
	return e.q.guardedMulti(ctx, ops...)
}

// Leader returns the current leader's value as seen by this session's
// server, or ErrNoLeader when nobody campaigns.
func (e *Election) Leader(ctx context.Context) (string, error) {
	v, _, _, err := e.leader(ctx, false)
	return v, err
}

// leaderNode identifies one leadership: the leader's node name and creation
// zxid (a name is not reused within an election, the zxid never).
type leaderNode struct {
	name  string
	czxid int64
}

// leader reads the lowest candidate's value and node; with watch it also
// returns a watch on that node (or, when there is no candidate, on the
// children).
func (e *Election) leader(ctx context.Context, watch bool) (string, leaderNode, <-chan client.Event, error) {
	c := e.q.s.c
	for {
		names, _, err := c.Children(ctx, e.q.dir)
		if err != nil && !errors.Is(err, client.ErrNoNode) {
			return "", leaderNode{}, nil, fmt.Errorf("lockrecipe: election %s: %w", e.q.dir, err)
		}
		kids := sequenced(names)
		if len(kids) == 0 {
			if !watch {
				return "", leaderNode{}, nil, ErrNoLeader
			}
			if err != nil { // the election node does not exist
				_, ok, ch, err := c.ExistsW(ctx, e.q.dir)
				if err != nil {
					return "", leaderNode{}, nil, fmt.Errorf("lockrecipe: election %s: %w", e.q.dir, err)
				}
				if ok {
					continue
				}
				return "", leaderNode{}, ch, ErrNoLeader
			}
			names, _, ch, err := c.ChildrenW(ctx, e.q.dir)
			if err != nil {
				continue
			}
			if len(sequenced(names)) > 0 {
				continue // the watch left behind fires once, harmlessly
			}
			return "", leaderNode{}, ch, ErrNoLeader
		}
		p := join(e.q.dir, kids[0].name)
		var (
			data []byte
			st   client.Stat
			ch   <-chan client.Event
		)
		if watch {
			data, st, ch, err = c.GetW(ctx, p)
		} else {
			data, st, err = c.Get(ctx, p)
		}
		if errors.Is(err, client.ErrNoNode) {
			continue
		}
		if err != nil {
			return "", leaderNode{}, nil, fmt.Errorf("lockrecipe: election %s: %w", e.q.dir, err)
		}
		return string(data), leaderNode{kids[0].name, st.Czxid}, ch, nil
	}
}

// Observe reports the leader's value each time the leadership changes (a
// new leader, even one with the same value as the last, or a Proclaim of
// another value), starting with the current one. An empty string means
// that nobody leads. The channel is closed when ctx ends or the session
// ends. Observers watch only the leader's node (or, with no leader, the
// candidates' parent).
func (e *Election) Observe(ctx context.Context) <-chan string {
	out := make(chan string)
	go func() {
		defer close(out)
		var (
			last     string
			lastNode leaderNode
			first    = true
		)
		for {
			v, node, ch, err := e.leader(ctx, true)
			if err != nil && !errors.Is(err, ErrNoLeader) {
				if ctx.Err() != nil || e.q.s.ended() || sessionGone(err) {
					return
				}
				if !pause(ctx, retryPause) {
					return
				}
				continue
			}
			if first || v != last || node != lastNode {
				select {
				case out <- v:
				case <-ctx.Done():
					e.q.s.stopWatch(ctx, ch)
					return
				}
				last, lastNode, first = v, node, false
			}
			select {
			case ev := <-ch:
				if ev.Type == client.EventNotWatching && ev.Err != nil {
					return
				}
			case <-ctx.Done():
				e.q.s.stopWatch(ctx, ch)
				return
			}
		}
	}()
	return out
}
