package lockrecipe

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/coordd/coordd/client"
)

// Barrier holds processes back while its node exists: Set creates the
// node, Remove deletes it, Wait blocks until it is gone.
type Barrier struct {
	s    *Session
	path string
	o    options
}

// NewBarrier returns a Barrier on path (a persistent node; its missing
// ancestors are created as containers). WithACL applies to them.
func NewBarrier(s *Session, path string, opts ...Option) *Barrier {
	return &Barrier{s: s, path: path, o: buildOptions(opts)}
}

// Set raises the barrier (creates its node). Setting a raised barrier is
// not an error.
func (b *Barrier) Set(ctx context.Context) error {
	if err := validPath(b.path); err != nil {
		return err
	}
	for {
		_, err := b.s.c.Create(ctx, b.path, nil, client.CreateMode{ACL: b.o.acl})
		switch {
		case err == nil, errors.Is(err, client.ErrNodeExists):
			return nil
		case errors.Is(err, client.ErrNoNode):
			if err := b.s.ensureParents(ctx, parent(b.path), b.o.acl); err != nil {
				return err
			}
		default:
			return fmt.Errorf("lockrecipe: set barrier %s: %w", b.path, err)
		}
	}
}

// Remove lowers the barrier (deletes its node), releasing the waiters.
// Removing a lowered barrier is not an error.
func (b *Barrier) Remove(ctx context.Context) error {
	err := b.s.c.Delete(ctx, b.path, -1)
	if err == nil || errors.Is(err, client.ErrNoNode) {
		return nil
	}
	return fmt.Errorf("lockrecipe: remove barrier %s: %w", b.path, err)
}

// Wait blocks until the barrier is lowered or ctx ends.
func (b *Barrier) Wait(ctx context.Context) error {
	for {
		// GetW on an absent node leaves no watch behind.
		_, _, ch, err := b.s.c.GetW(ctx, b.path)
		if errors.Is(err, client.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lockrecipe: wait barrier %s: %w", b.path, err)
		}
		if err := b.s.waitEvent(ctx, ch); err != nil {
			return fmt.Errorf("lockrecipe: wait barrier %s: %w", b.path, err)
		}
	}
}

// waitEvent waits for a watch event; an end of the session or of ctx is an
// error. A watch given up on when ctx ends is stopped (stopWatch).
func (s *Session) waitEvent(ctx context.Context, ch <-chan client.Event) error {
	select {
	case ev := <-ch:
		if ev.Type == client.EventNotWatching && ev.Err != nil {
			return ev.Err
		}
		return nil
	case <-ctx.Done():
		s.stopWatch(ctx, ch)
		return ctx.Err()
	}
}

func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// DoubleBarrier lets n participants start together and finish together
// (ZooKeeper's double barrier): Enter blocks until n participants have
// entered, Leave until every participant has left. Each participant is an
// ephemeral sequential child "_c_<guid>-p-N" of the barrier's path, so a
// participant whose session ends counts as gone; the one that completes
// the count creates "<path>/ready", and the last to leave deletes it
// together with its own node, in one transaction (so a crash cannot leave
// "ready" behind to let the next round's first Enter through at once).
//
// On leaving, the lowest participant waits for the highest to go and every
// other one deletes its node and waits for the lowest, so each departure
// wakes at most one or two waiters. A DoubleBarrier value is one
// participant, for one round.
type DoubleBarrier struct {
	s    *Session
	path string
	n    int
	o    options

	node string // own node while entered
}

// NewDoubleBarrier returns a DoubleBarrier on path for n participants.
func NewDoubleBarrier(s *Session, path string, n int, opts ...Option) *DoubleBarrier {
	return &DoubleBarrier{s: s, path: path, n: max(n, 1), o: buildOptions(opts)}
}

const readyName = "ready"

// Enter joins the barrier and blocks until n participants have joined (or
// ctx ends: the participant's node is then deleted).
func (d *DoubleBarrier) Enter(ctx context.Context) error {
	if d.node != "" {
		return ErrAlreadyHeld
	}
	if err := validPath(d.path); err != nil {
		return err
	}
	c := d.s.c
	ready := join(d.path, readyName)
	// Watch "ready" before joining, so its creation cannot be missed.
	_, ok, ch, err := c.ExistsW(ctx, ready)
	if err != nil {
		return fmt.Errorf("lockrecipe: enter %s: %w", d.path, err)
	}
	node, _, err := d.s.createProtected(ctx, &d.o, d.path, d.o.hooks.guidOr(newGUID), "p-", nil, ephemeralSeq)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		_ = d.s.deleteOwn(ctx, node)
		return fmt.Errorf("lockrecipe: enter %s: %w", d.path, err)
	}
	for !ok {
		names, _, err := c.Children(ctx, d.path)
		if err != nil {
			return fail(err)
		}
		kids := sequenced(names)
		if indexOf(kids, base(node)) < 0 {
			return fail(d.s.lostError("node " + node + " vanished"))
		}
		if len(kids) >= d.n {
			if _, err := c.Create(ctx, ready, nil, client.CreateMode{ACL: d.o.acl}); err != nil && !errors.Is(err, client.ErrNodeExists) {
				return fail(err)
			}
			break
		}
		if err := d.s.waitEvent(ctx, ch); err != nil {
			return fail(err)
		}
		if _, ok, ch, err = c.ExistsW(ctx, ready); err != nil {
			return fail(err)
		}
	}
	d.node = node
	return nil
}

// Leave leaves the barrier and blocks until every participant has left (or
// ctx ends; this participant may then have left already).
func (d *DoubleBarrier) Leave(ctx context.Context) error {
	if d.node == "" {
		return ErrNotHeld
	}
	c := d.s.c
	me := base(d.node)
	for {
		names, _, err := c.Children(ctx, d.path)
		if err != nil && !errors.Is(err, client.ErrNoNode) {
			return fmt.Errorf("lockrecipe: leave %s: %w", d.path, err)
		}
		kids := sequenced(names)
		i := indexOf(kids, me)
		var wait string
		switch {
		case len(kids) == 0:
			d.node = ""
			return nil
		case len(kids) == 1 && i == 0:
			done, err := d.leaveLast(ctx)
			if err != nil {
				return fmt.Errorf("lockrecipe: leave %s: %w", d.path, err)
			}
			if !done {
				continue // the own node vanished meanwhile: look again
			}
			d.node = ""
			return nil
		case i == 0:
			wait = kids[len(kids)-1].name
		default:
			if i > 0 {
				if err := c.Delete(ctx, d.node, -1); err != nil && !errors.Is(err, client.ErrNoNode) {
					return fmt.Errorf("lockrecipe: leave %s: %w", d.path, err)
				}
			}
			wait = kids[0].name
		}
		_, _, ch, err := c.GetW(ctx, join(d.path, wait))
		if errors.Is(err, client.ErrNoNode) {
			continue
		}
		if err != nil {
			return fmt.Errorf("lockrecipe: leave %s: %w", d.path, err)
		}
		if err := d.s.waitEvent(ctx, ch); err != nil {
			return fmt.Errorf("lockrecipe: leave %s: %w", d.path, err)
		}
	}
}

// leaveLast deletes the last participant's node and "ready" in one
// transaction, so that no state has "ready" without a participant: a crash
// between two deletes would leave "ready" behind for the next round, whose
// first Enter would pass at once (as would an Enter between them). It
// reports false when the own node was gone already.
func (d *DoubleBarrier) leaveLast(ctx context.Context) (bool, error) {
	c := d.s.c
	res, err := c.Multi(ctx, client.DeleteOp(d.node, -1), client.DeleteOp(join(d.path, readyName), -1))
	switch {
	case err == nil:
		return true, nil
	case len(res) == 2 && res[0].Err == nil && errors.Is(res[1].Err, client.ErrNoNode):
		// No "ready" (a participant gone during Enter never saw it, or it
		// was removed by hand): only the own node is left to delete.
		if err := c.Delete(ctx, d.node, -1); err != nil && !errors.Is(err, client.ErrNoNode) {
			return false, err
		}
		return true, nil
	case len(res) == 2 && errors.Is(res[0].Err, client.ErrNoNode):
		return false, nil
	}
	return false, err
}
