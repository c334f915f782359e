package lockrecipe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coordd/coordd/client"
)

const (
	// protectedPrefix starts the name of every node made by a protected
	// create, as in Curator: "_c_<guid>-<prefix><sequence>".
	protectedPrefix = "_c_"
	seqDigits       = 10
	// cleanupAttempt bounds one attempt to delete an abandoned node; it is
	// retried until done or the session is gone.
	cleanupAttempt = 2 * time.Second
	retryPause     = 20 * time.Millisecond
)

var (
	ephemeralSeq  = client.CreateMode{Kind: client.Ephemeral, Sequential: true}
	persistentSeq = client.CreateMode{Kind: client.Persistent, Sequential: true}
)

func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func base(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// child is one sequential child of a recipe's node.
type child struct {
	name string
	seq  int64
}

// sequenced parses and sorts the names of sequential children ending in a
// 10-digit counter, skipping anything else.
func sequenced(names []string) []child {
	out := make([]child, 0, len(names))
	for _, n := range names {
		if len(n) <= seqDigits {
			continue
		}
		seq, err := strconv.ParseInt(n[len(n)-seqDigits:], 10, 64)
		if err != nil || seq < 0 {
			continue
		}
		out = append(out, child{name: n, seq: seq})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

func indexOf(kids []child, name string) int {
	for i, k := range kids {
		if k.name == name {
			return i
		}
	}
	return -1
}

// sessionGone reports whether err says the session ended.
func sessionGone(err error) bool {
	return errors.Is(err, client.ErrSessionExpired) || errors.Is(err, client.ErrClosed)
}

// definite reports whether a failed create certainly did not apply: the
// server answered it with an error that is not about availability.
func definite(err error) bool {
	for _, e := range []error{client.ErrNoNode, client.ErrNodeExists, client.ErrBadArguments,
		client.ErrNoChildrenForEphemerals, client.ErrAuthFailed, client.ErrUnimplemented} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// lostError is the error for an owner whose node vanished.
func (s *Session) lostError(what string) error {
	if s.ended() {
		st := s.c.State()
		cause := client.ErrSessionExpired
		if st == client.StateClosed {
			cause = client.ErrClosed
		}
		return fmt.Errorf("%w: %s: %w", ErrLockLost, what, cause)
	}
	return fmt.Errorf("%w: %s", ErrLockLost, what)
}

// detached returns a context for cleanup work that must go on after ctx
// ended: ctx's values without its cancellation, bounded by d.
func detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// stopWatch ends the watch on ch that a waiter gives up on because ctx
// ended, so that abandoned waits do not pile up watches in the client (or on
// the server) until their nodes change. Only that watch: another recipe's
// watch on the same path stays (client.StopWatch).
func (s *Session) stopWatch(ctx context.Context, ch <-chan client.Event) {
	if ch == nil {
		return
	}
	dctx, cancel := detached(ctx, cleanupAttempt)
	defer cancel()
	_ = s.c.StopWatch(dctx, ch) // best effort: an error leaves one watch to fire unread
}

// pause waits d or until ctx ends; false if ctx ended.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ensureParents creates dir and its missing ancestors as containers with
// acl (nil: open).
func (s *Session) ensureParents(ctx context.Context, dir string, acl []client.ACL) error {
	if dir == "/" {
		return nil
	}
	for attempt := 0; ; attempt++ {
		retry := false
		for i := 1; i <= len(dir); i++ {
			if i < len(dir) && dir[i] != '/' {
				continue
			}
			_, err := s.c.Create(ctx, dir[:i], nil, client.CreateMode{Kind: client.Container, ACL: acl})
			switch {
			case err == nil, errors.Is(err, client.ErrNodeExists):
			case errors.Is(err, client.ErrNoNode) && attempt < 20:
				retry = true // an ancestor was reaped meanwhile
			default:
				return fmt.Errorf("lockrecipe: create %s: %w", dir[:i], err)
			}
			if retry {
				break
			}
		}
		if !retry {
			return nil
		}
	}
}

// createProtected creates "<dir>/_c_<guid>-<prefix>N" (a sequential node of
// the given kind) and returns its path and stat. When a create fails
// without a definite answer it looks for the node by GUID before trying
// again: a node of the current session is adopted, one of another session
// deleted. On error no node of this attempt is left behind (unless the
// session itself ended, which removes ephemerals anyway).
func (s *Session) createProtected(ctx context.Context, o *options, dir, guid, prefix string, data []byte, mode client.CreateMode) (string, client.Stat, error) {
	path := join(dir, protectedPrefix+guid+"-"+prefix)
	mode.ACL = o.acl
	for {
		var (
			name string
			st   client.Stat
			err  error
		)
		if o.hooks.beforeCreate != nil {
			err = o.hooks.beforeCreate(path)
		}
		if err == nil {
			name, st, err = s.c.CreateStat(ctx, path, data, mode)
			if err == nil && o.hooks.afterCreate != nil {
				err = o.hooks.afterCreate(name)
			}
		}
		switch {
		case err == nil:
			o.emit(LockEvent{Kind: LockCreated, Node: name})
			return name, st, nil
		case errors.Is(err, client.ErrNoNode):
			if err := s.ensureParents(ctx, dir, o.acl); err != nil {
				return "", client.Stat{}, err
			}
			continue
		case definite(err), sessionGone(err):
			return "", client.Stat{}, fmt.Errorf("lockrecipe: create under %s: %w", dir, err)
		}
		// The create may have applied: find it before doing anything else.
		name, st, ferr := s.findOwn(ctx, o, dir, guid, mode)
		if ferr != nil {
			return "", client.Stat{}, ferr
		}
		if name != "" {
			o.emit(LockEvent{Kind: LockAdopted, Node: name})
			return name, st, nil
		}
		if ctx.Err() != nil {
			return "", client.Stat{}, fmt.Errorf("lockrecipe: create under %s: %w", dir, err)
		}
		if !pause(ctx, retryPause) {
			return "", client.Stat{}, fmt.Errorf("lockrecipe: create under %s: %w", dir, ctx.Err())
		}
	}
}

// findOwn looks for the nodes of dir named with guid. For ephemeral modes
// it adopts the lowest one owned by the current session and deletes the
// others (nodes of an old session are never adopted). It retries until it
// has a definite answer or the session is gone, outliving ctx if needed: an
// unfound node of a live session would block the lock forever.
func (s *Session) findOwn(ctx context.Context, o *options, dir, guid string, mode client.CreateMode) (string, client.Stat, error) {
	mark := protectedPrefix + guid + "-"
	for {
		lctx, cancel := ctx, context.CancelFunc(func() {})
		if ctx.Err() != nil {
			lctx, cancel = detached(ctx, cleanupAttempt)
		}
		name, st, err := s.findOwnOnce(lctx, o, dir, mark, mode)
		cancel()
		if err == nil {
			return name, st, nil
		}
		if sessionGone(err) || s.ended() {
			return "", client.Stat{}, fmt.Errorf("lockrecipe: looking for own node under %s: %w", dir, err)
		}
		time.Sleep(retryPause)
	}
}

func (s *Session) findOwnOnce(ctx context.Context, o *options, dir, mark string, mode client.CreateMode) (string, client.Stat, error) {
	names, _, err := s.c.Children(ctx, dir)
	if errors.Is(err, client.ErrNoNode) {
		return "", client.Stat{}, nil
	}
	if err != nil {
		return "", client.Stat{}, err
	}
	var mine []string
	for _, k := range sequenced(names) {
		if strings.HasPrefix(k.name, mark) {
			mine = append(mine, k.name)
		}
	}
	me := s.c.SessionID()
	var (
		adopted string
		ast     client.Stat
	)
	for _, n := range mine {
		p := join(dir, n)
		st, ok, err := s.c.Exists(ctx, p)
		if err != nil {
			return "", client.Stat{}, err
		}
		if !ok {
			continue
		}
		ours := mode.Kind != client.Ephemeral || st.EphemeralOwner == me
		if ours && adopted == "" {
			adopted, ast = p, st
			continue
		}
		// Another session's node (or a duplicate of ours): never adopt it.
		if err := s.c.Delete(ctx, p, -1); err != nil && !errors.Is(err, client.ErrNoNode) {
			return "", client.Stat{}, err
		}
		if !ours {
			o.emit(LockEvent{Kind: LockForeignDeleted, Node: p})
		}
	}
	return adopted, ast, nil
}

// deleteOwn deletes path (a node of this session), retrying until it is
// gone or the session is, even after ctx ended.
func (s *Session) deleteOwn(ctx context.Context, path string) error {
	for {
		dctx, cancel := detached(ctx, cleanupAttempt)
		err := s.c.Delete(dctx, path, -1)
		cancel()
		switch {
		case err == nil, errors.Is(err, client.ErrNoNode):
			return nil
		case sessionGone(err) || s.ended():
			return err
		}
		time.Sleep(retryPause)
	}
}

func isNoNode(err error) bool { return errors.Is(err, client.ErrNoNode) }
