package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/coordd/coordd/rpc/apipb"
)

// DefaultWatchBuffer is the number of events a persistent watch's channel
// holds for its reader by default (see WithWatchBuffer and AddWatch).
const DefaultWatchBuffer = 1024

// WithWatchBuffer sets how many events the channel of each persistent
// watch (AddWatch) holds for a reader that falls behind (default
// DefaultWatchBuffer). Beyond that the client drops events and tells the
// reader with an EventResync (see AddWatch). Each channel is allocated at
// its full size: a program with thousands of persistent watches may want
// a smaller one.
func WithWatchBuffer(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.watchBuffer = n
		}
	}
}

// watchKind is the client-side kind of a watch, as re-registered on resume.
type watchKind int

const (
	kindData       watchKind = iota // GetW, or ExistsW on an existing node
	kindExist                       // ExistsW on an absent node
	kindChild                       // ChildrenW
	kindPersistent                  // AddWatch(WatchPersistent)
	kindRecursive                   // AddWatch(WatchPersistentRecursive)
)

// The bits of WatchEvent.kinds: the kinds of the session's watches on the
// server that an event matched.
const (
	bitData       = 1 // a data watch (getData, exists) on the path, one-shot
	bitChild      = 2 // a child watch (getChildren) on the path, one-shot
	bitPersistent = 4 // a persistent watch on the path
	bitRecursive  = 8 // a recursive watch on the path or an ancestor
)

// bit is the WatchEvent.kinds bit of watches of kind k.
func (k watchKind) bit() uint32 {
	switch k {
	case kindData, kindExist:
		return bitData
	case kindChild:
		return bitChild
	case kindPersistent:
		return bitPersistent
	}
	return bitRecursive
}

func (k watchKind) persistent() bool { return k == kindPersistent || k == kindRecursive }

// watcher is one watch of one caller: one-shot (GetW, ExistsW, ChildrenW)
// or persistent (AddWatch). Its channel is sent on, and closed, only with
// Client.mu held, and never blocks: a one-shot channel has room for its one
// event; a persistent one has room for buffer events, one EventResync and
// the final EventNotWatching (see deliver).
type watcher struct {
	path    string
	kind    watchKind
	ch      chan Event
	pending bool // the request registering it has not been answered yet

	// Persistent watches only.
	buffer     int  // events queued at most
	overflowed bool // an EventResync for an overflow is the last thing queued
	done       bool // the final event was sent and the channel closed
}

func newWatcher(path string, kind watchKind) *watcher {
	return &watcher{path: path, kind: kind, ch: make(chan Event, 1)}
}

func newPersistentWatcher(path string, kind watchKind, buffer int) *watcher {
	return &watcher{path: path, kind: kind, ch: make(chan Event, buffer+2), buffer: buffer}
}

// fire ends the watch with ev, its last event, and closes the channel. A
// one-shot watch gets exactly one event (its remover from the table fires
// it); a persistent one gets ev after those it already queued, and nothing
// more. Client.mu is held.
func (w *watcher) fire(ev Event) {
	if w.done {
		return
	}
	w.done = true
	w.ch <- ev
	close(w.ch)
}

// deliver queues ev on a persistent watch, never blocking. While fewer than
// w.buffer items wait in the channel, ev is queued. When the reader has
// fallen that far behind, ev is dropped and an EventResync (Err
// ErrWatchOverflow) is queued instead, last, in the slot kept for it; from
// then on events are dropped until the reader has taken that EventResync
// (the channel is empty again): each dropped event was received before the
// reader can act on the EventResync, so the state it then re-reads
// reflects the change. Client.mu is held.
func (w *watcher) deliver(ev Event) {
	if w.done {
		return
	}
	if w.overflowed {
		if len(w.ch) > 0 {
			return // the EventResync is still unread: ev is covered by the re-read
		}
		w.overflowed = false
	}
	if len(w.ch) < w.buffer {
		w.ch <- ev
		return
	}
	w.overflowed = true
	// Above w.buffer, the last item queued is an EventResync already (only
	// they use the extra slot), which serves.
	if len(w.ch) == w.buffer {
		w.ch <- Event{Type: EventResync, Path: w.path, Err: ErrWatchOverflow}
	}
}

// resync tells a persistent watch's reader that events may have been
// missed (why: err), unless an EventResync is already the last thing
// queued. Client.mu is held.
func (w *watcher) resync(err error) {
	if w.done || w.overflowed || len(w.ch) > w.buffer {
		return
	}
	w.ch <- Event{Type: EventResync, Path: w.path, Err: err}
}

// firedBy says whether an event of type t fires a one-shot watch of kind k.
func firedBy(t apipb.EventType, k watchKind) bool {
	switch t {
	case apipb.EventType_NODE_CREATED:
		return k == kindExist
	case apipb.EventType_NODE_DATA_CHANGED:
		return k == kindData || k == kindExist
	case apipb.EventType_NODE_DELETED:
		return k == kindData || k == kindExist || k == kindChild
	case apipb.EventType_NODE_CHILDREN_CHANGED:
		return k == kindChild
	}
	return false
}

// oneShotBits are the kinds an event of type t fires on a server older than
// persistent watches, which sends no kinds.
func oneShotBits(t apipb.EventType) uint32 {
	switch t {
	case apipb.EventType_NODE_CREATED, apipb.EventType_NODE_DATA_CHANGED:
		return bitData
	case apipb.EventType_NODE_CHILDREN_CHANGED:
		return bitChild
	case apipb.EventType_NODE_DELETED:
		return bitData | bitChild
	}
	return 0
}

// valid reports whether sel is one of the WatchKinds.
func (sel WatchKind) valid() bool { return sel >= WatchAny && sel <= WatchPersistentRecursive }

// selects says whether RemoveWatches with kind sel removes a watch of kind k.
func (sel WatchKind) selects(k watchKind) bool {
	switch sel {
	case WatchAny:
		return true
	case WatchData:
		return k == kindData || k == kindExist
	case WatchChild:
		return k == kindChild
	case WatchPersistent:
		return k == kindPersistent
	case WatchPersistentRecursive:
		return k == kindRecursive
	}
	return false
}

// serverKind is the kind RemoveWatches names on the server to remove the
// server's watch behind a watch of kind k.
func serverKind(k watchKind) WatchKind {
	switch k {
	case kindChild:
		return WatchChild
	case kindPersistent:
		return WatchPersistent
	case kindRecursive:
		return WatchPersistentRecursive
	}
	return WatchData
}

// takeWatchersLocked removes and returns the watchers on path that match.
func (c *Client) takeWatchersLocked(path string, match func(*watcher) bool) []*watcher {
	var taken, kept []*watcher
	for _, w := range c.watches[path] {
		if match(w) {
			taken = append(taken, w)
		} else {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		delete(c.watches, path)
	} else {
		c.watches[path] = kept
	}
	return taken
}

// removeWatcherLocked drops w from the table without firing it.
func (c *Client) removeWatcherLocked(w *watcher) {
	l := c.watches[w.path]
	for i, x := range l {
		if x == w {
			l = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(c.watches, w.path)
	} else {
		c.watches[w.path] = l
	}
}

// needsServerWatchLocked says whether a watch of the client still needs the
// session's server watch of kind sel on path (a pending one counts: its
// request registers it).
func (c *Client) needsServerWatchLocked(path string, sel WatchKind) bool {
	return slices.ContainsFunc(c.watches[path], func(x *watcher) bool { return sel.selects(x.kind) })
}

// watchPaths are the paths of the established watches by kind.
type watchPaths struct {
	data, exist, child, persistent, recursive []string
}

// watchPathsLocked lists the paths of the established watches by kind, for
// re-registration on resume. Watches whose registering request is
// unanswered are left out: that request is re-sent and registers them
// again.
func (c *Client) watchPathsLocked() watchPaths {
	var out watchPaths
	for path, l := range c.watches {
		var has [kindRecursive + 1]bool
		for _, w := range l {
			if !w.pending {
				has[w.kind] = true
			}
		}
		for k, list := range map[watchKind]*[]string{kindData: &out.data, kindExist: &out.exist, kindChild: &out.child,
			kindPersistent: &out.persistent, kindRecursive: &out.recursive} {
			if has[k] {
				*list = append(*list, path)
			}
		}
	}
	for _, l := range [][]string{out.data, out.exist, out.child, out.persistent, out.recursive} {
		sort.Strings(l)
	}
	return out
}

// resyncLocked tells every established persistent watch that events may
// have been missed: the session moved to a server (whose applied zxid is
// serverZxid) that re-registered them without firing what changed
// meanwhile. Nothing is sent when nothing changed since the last zxid the
// client saw.
func (c *Client) resyncLocked(serverZxid int64) {
	if serverZxid <= c.lastZxid {
		return
	}
	for _, l := range c.watches {
		for _, w := range l {
			if w.kind.persistent() && !w.pending {
				w.resync(ErrConnectionLoss)
			}
		}
	}
}

// parentPath returns the parent of an absolute path, and false for "/".
func parentPath(p string) (string, bool) {
	if p == "/" || !strings.HasPrefix(p, "/") {
		return "", false
	}
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", true
	}
	return p[:i], true
}

// handleEvent dispatches a watch event to the watchers the server says it
// matched (WatchEvent.kinds): the one-shot watches of its path that its
// type fires, each at most once and then gone; the persistent watches of
// its path; the recursive watches of its path and of every ancestor. This
// is what ZooKeeper's Java client does from its own tables; every watcher
// of one event gets it once, however many of the session's watches it
// matched on the server.
func (c *Client) handleEvent(e *apipb.WatchEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteZxidLocked(e.Zxid)
	ev := Event{Type: EventType(e.Type), Path: e.Path, Zxid: e.Zxid}
	kinds := e.Kinds
	if kinds == 0 {
		kinds = oneShotBits(e.Type) // a server older than persistent watches
	}
	n := 0
	if kinds&(bitData|bitChild) != 0 {
		// A registration whose read is still unanswered is not fired: the
		// event arrived before that read's reply, so the read already
		// reflects the change and the server armed a fresh watch for the
		// next one.
		for _, w := range c.takeWatchersLocked(e.Path, func(w *watcher) bool {
			return !w.pending && !w.kind.persistent() && kinds&w.kind.bit() != 0 && firedBy(e.Type, w.kind)
		}) {
			w.fire(ev)
			n++
		}
	}
	// A persistent watch whose AddWatch is unanswered is left out likewise:
	// the event came before the server registered it.
	if kinds&bitPersistent != 0 {
		for _, w := range c.watches[e.Path] {
			if w.kind == kindPersistent && !w.pending {
				w.deliver(ev)
				n++
			}
		}
	}
	if kinds&bitRecursive != 0 && e.Type != apipb.EventType_NODE_CHILDREN_CHANGED {
		for p, ok := e.Path, true; ok; p, ok = parentPath(p) {
			for _, w := range c.watches[p] {
				if w.kind == kindRecursive && !w.pending {
					w.deliver(ev)
					n++
				}
			}
		}
	}
	if n == 0 {
		c.log.Debug("client: event without watcher", "type", ev.Type, "path", e.Path)
	}
}

// AddWatch sets a persistent watch on path, which need not exist, and
// returns its channel. kind is WatchPersistent or WatchPersistentRecursive
// (anything else fails with ErrBadArguments), as ZooKeeper's addWatch
// modes PERSISTENT and PERSISTENT_RECURSIVE:
//
//   - WatchPersistent receives EventNodeCreated, EventNodeDataChanged,
//     EventNodeChildrenChanged and EventNodeDeleted of path;
//   - WatchPersistentRecursive receives EventNodeCreated,
//     EventNodeDataChanged and EventNodeDeleted of path and of every node
//     below it, nodes created later included, never
//     EventNodeChildrenChanged (ZooKeeper's rule: a child's creation or
//     deletion is its own EventNodeCreated or EventNodeDeleted).
//
// The watch stays after firing, until RemoveWatches or StopWatch removes it
// or the session ends; its last event is then EventNotWatching (Err nil
// when removed, else ErrSessionExpired or ErrClosed) and the channel is
// closed. Events arrive in zxid order, each before any reply that reflects
// its change; one change reaches each matching watch of the client once,
// also beside one-shot watches on the same path. The events of changes
// made before AddWatch returns are not delivered: read the state after it.
//
// The channel never blocks the client: it holds WithWatchBuffer events
// (default DefaultWatchBuffer). A reader that falls further behind
// receives an EventResync with Err ErrWatchOverflow after the events
// queued, and the events that come while it has not taken that
// EventResync are dropped. After a failover to another server, the
// channel receives an EventResync with Err ErrConnectionLoss, since the
// server re-registers the watch without reporting what changed meanwhile
// (ZooKeeper's rule; none is sent if nothing changed). An EventResync
// means: events may be missing before it, re-read what the watch covers;
// the watch itself goes on. (ZooKeeper's Java client queues without
// bound, so one stalled watcher grows the client's memory; etcd cancels a
// watch whose reader fell behind and the caller watches again. Dropping
// with an EventResync keeps memory bounded and the watch in place, and a
// reader that re-reads on EventResync misses no change.)
func (c *Client) AddWatch(ctx context.Context, path string, kind WatchKind) (<-chan Event, error) {
	var wk watchKind
	switch kind {
	case WatchPersistent:
		wk = kindPersistent
	case WatchPersistentRecursive:
		wk = kindRecursive
	default:
		return nil, fmt.Errorf("%w: AddWatch takes WatchPersistent or WatchPersistentRecursive, not %v", ErrBadArguments, kind)
	}
	w := newPersistentWatcher(path, wk, c.opts.watchBuffer)
	req := &apipb.Request{Op: &apipb.Request_AddWatch{AddWatch: &apipb.AddWatchRequest{Path: path, Recursive: wk == kindRecursive}}}
	if _, err := c.do(ctx, req, false, w); err != nil {
		return nil, err
	}
	return w.ch, nil
}

// RemoveWatches removes the session's watches of the given kind on path, on
// the server and in the client: WatchAny every kind, persistent ones
// included; WatchData those of GetW and ExistsW; WatchChild those of
// ChildrenW; WatchPersistent and WatchPersistentRecursive those of
// AddWatch. Each removed watch's channel receives EventNotWatching (Err
// nil) and is closed. It returns ErrNoWatcher when the client has no such
// watch, and ErrBadArguments for an unknown kind.
func (c *Client) RemoveWatches(ctx context.Context, path string, kind WatchKind) error {
	if !kind.valid() {
		return fmt.Errorf("%w: unknown watch kind %v", ErrBadArguments, kind)
	}
	c.mu.Lock()
	found := c.needsServerWatchLocked(path, kind)
	c.mu.Unlock()
	if !found {
		return ErrNoWatcher
	}
	req := &apipb.Request{Op: &apipb.Request_RemoveWatches{RemoveWatches: &apipb.RemoveWatchesRequest{Path: path, Kind: apipb.WatchKind(kind)}}}
	if _, err := c.do(ctx, req, false, nil); err != nil && !errors.Is(err, ErrNoWatcher) {
		return err
	}
	c.mu.Lock()
	for _, w := range c.takeWatchersLocked(path, func(w *watcher) bool { return kind.selects(w.kind) }) {
		w.fire(Event{Type: EventNotWatching, Path: path})
	}
	c.mu.Unlock()
	return nil
}

// CheckWatches asks the server whether the session has a watch of the given
// kind on path (selected as by RemoveWatches) and returns nil if so,
// ErrNoWatcher if not. It changes nothing.
func (c *Client) CheckWatches(ctx context.Context, path string, kind WatchKind) error {
	if !kind.valid() {
		return fmt.Errorf("%w: unknown watch kind %v", ErrBadArguments, kind)
	}
	req := &apipb.Request{Op: &apipb.Request_CheckWatches{CheckWatches: &apipb.CheckWatchesRequest{Path: path, Kind: apipb.WatchKind(kind)}}}
	_, err := c.do(ctx, req, false, nil)
	return err
}

// StopWatch ends one watch: the one whose channel is ch, as GetW, ExistsW,
// ChildrenW or AddWatch returned it. The client's other watches stay, on
// the same path too (RemoveWatches removes every watch of a kind on a path;
// this is ZooKeeper's removeWatches for a single Watcher). The channel
// receives EventNotWatching (Err nil) after any event already queued, and
// is closed. The server is asked to drop the session's watch on the path
// only when no other watch of the client needs it. It returns ErrNoWatcher
// when ch is not a watch still in place in this client (a one-shot watch
// that fired, or a watch removed already).
func (c *Client) StopWatch(ctx context.Context, ch <-chan Event) error {
	c.mu.Lock()
	w := c.watcherOfLocked(ch)
	if w == nil {
		c.mu.Unlock()
		return ErrNoWatcher
	}
	// Out of the table first, so that no event can reach it meanwhile.
	c.removeWatcherLocked(w)
	w.fire(Event{Type: EventNotWatching, Path: w.path})
	server := serverKind(w.kind)
	shared := c.needsServerWatchLocked(w.path, server)
	c.mu.Unlock()
	if shared {
		return nil
	}
	req := &apipb.Request{Op: &apipb.Request_RemoveWatches{RemoveWatches: &apipb.RemoveWatchesRequest{Path: w.path, Kind: apipb.WatchKind(server)}}}
	if _, err := c.do(ctx, req, false, nil); err != nil && !errors.Is(err, ErrNoWatcher) {
		// The watch is gone here either way; a server watch left behind
		// fires into no channel when its node changes.
		return err
	}
	return nil
}

// dropAbandonedLocked is told that the server registered w, whose caller
// had stopped waiting: unless another watch of the client needs it, the
// server's persistent watch is removed, so that it does not send events
// for nobody for the rest of the session.
func (c *Client) dropAbandonedLocked(w *watcher) {
	if !w.kind.persistent() || c.terminal != nil || c.closing {
		return
	}
	server := serverKind(w.kind)
	if c.needsServerWatchLocked(w.path, server) {
		return
	}
	req := &apipb.Request{Op: &apipb.Request_RemoveWatches{RemoveWatches: &apipb.RemoveWatchesRequest{Path: w.path, Kind: apipb.WatchKind(server)}}}
	c.enqueueLocked(&call{req: req, internal: true, done: make(chan result, 1)})
}

// watcherOfLocked returns the watcher whose channel is ch, or nil.
func (c *Client) watcherOfLocked(ch <-chan Event) *watcher {
	for _, l := range c.watches {
		for _, w := range l {
			if (<-chan Event)(w.ch) == ch {
				return w
			}
		}
	}
	return nil
}
