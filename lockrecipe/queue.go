package lockrecipe

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordd/coordd/client"
)

// Queue is a distributed FIFO queue: each item is a persistent sequential
// child "_c_<guid>-item-N" of the queue's path, taken in sequence order.
// Take is safe with many concurrent takers: a taker reads the head item and
// then deletes it with the version it read; whoever's delete succeeds took
// the item, the others move on to the next one.
//
// Blocked takers watch the queue's children, so a Put wakes every blocked
// taker (one of them gets the item, the others look again): a queue with
// many idle takers has a herd, by design of the recipe.
type Queue struct {
	s    *Session
	path string
	o    options
}

// NewQueue returns a Queue on path.
func NewQueue(s *Session, path string, opts ...Option) *Queue {
	return &Queue{s: s, path: path, o: buildOptions(opts)}
}

// Put appends an item and returns its node's path. A Put whose reply was
// lost finds its item by GUID instead of adding it twice.
func (q *Queue) Put(ctx context.Context, data []byte) (string, error) {
	if err := validPath(q.path); err != nil {
		return "", err
	}
	p, _, err := q.s.createProtected(ctx, &q.o, q.path, newGUID(), "item-", data, persistentSeq)
	return p, err
}

// Take removes and returns the head item, blocking until there is one or
// ctx ends. If the server cannot be reached to finish the delete of the
// chosen item (the session is lost meanwhile), the outcome is unknown: the
// item may have been removed without its data being returned. Take leaves
// no watch behind, whichever way it returns.
func (q *Queue) Take(ctx context.Context) ([]byte, error) {
	c := q.s.c
	// ch is the watch the current pass set, until it fires: stopped
	// (client.StopWatch) before a pass sets another and when Take returns.
	var ch <-chan client.Event
	defer func() { q.s.stopWatch(ctx, ch) }()
	watch := false
	for {
		var (
			names []string
			err   error
		)
		if watch {
			names, _, ch, err = c.ChildrenW(ctx, q.path)
		} else {
			names, _, err = c.Children(ctx, q.path)
		}
		if errors.Is(err, client.ErrNoNode) {
			// No queue node yet: wait for its creation.
			if q.o.hooks.queueMissing != nil {
				q.o.hooks.queueMissing(q.path)
			}
			var ok bool
			_, ok, ch, err = c.ExistsW(ctx, q.path)
			if err == nil && ok {
				q.s.stopWatch(ctx, ch) // created meanwhile: look again
				ch = nil
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("lockrecipe: take from %s: %w", q.path, err)
		}
		for _, k := range sequenced(names) {
			p := join(q.path, k.name)
			data, st, err := c.Get(ctx, p)
			if errors.Is(err, client.ErrNoNode) {
				continue // taken by someone else
			}
			if err != nil {
				return nil, fmt.Errorf("lockrecipe: take %s: %w", p, err)
			}
			// Once Take has chosen an item it finishes the delete even if
			// ctx ends, so an applied delete is not reported as a failure.
			dctx, cancel := detached(ctx, 2*cleanupAttempt)
			err = c.Delete(dctx, p, st.Version)
			cancel()
			if errors.Is(err, client.ErrNoNode) {
				continue // their delete won
			}
			if err != nil {
				return nil, fmt.Errorf("lockrecipe: take %s: %w", p, err)
			}
			return data, nil
		}
		if ch == nil {
			watch = true // empty: look again, this time with a watch
			continue
		}
		err = q.s.waitEvent(ctx, ch)
		ch = nil // fired, or stopped by waitEvent
		if err != nil {
			return nil, fmt.Errorf("lockrecipe: take from %s: %w", q.path, err)
		}
	}
}

// Len returns the number of items, as seen by this session's server.
func (q *Queue) Len(ctx context.Context) (int, error) {
	names, _, err := q.s.c.Children(ctx, q.path)
	if errors.Is(err, client.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return len(sequenced(names)), nil
}
