package client

import (
	"context"
	"errors"
	"slices"
	"sort"

	"github.com/coordd/coordd/rpc/apipb"
)

// watchKind is the client-side kind of a watch, as re-registered on resume.
type watchKind int

const (
	kindData  watchKind = iota // GetW, or ExistsW on an existing node
	kindExist                  // ExistsW on an absent node
	kindChild                  // ChildrenW
)

// watcher is one pending one-shot watch of one caller.
type watcher struct {
	path    string
	kind    watchKind
	ch      chan Event
	pending bool // the read registering it has not been answered yet
}

func newWatcher(path string, kind watchKind) *watcher {
	return &watcher{path: path, kind: kind, ch: make(chan Event, 1)}
}

// fire delivers ev and closes the channel. A watcher is fired at most once:
// only its remover from the table fires it.
func (w *watcher) fire(ev Event) {
	w.ch <- ev
	close(w.ch)
}

// firedBy says whether an event of type t fires a watch of kind k.
func firedBy(t apipb.EventType, k watchKind) bool {
	switch t {
	case apipb.EventType_NODE_CREATED:
		return k == kindExist
	case apipb.EventType_NODE_DATA_CHANGED:
		return k == kindData || k == kindExist
	case apipb.EventType_NODE_DELETED:
		return true
	case apipb.EventType_NODE_CHILDREN_CHANGED:
		return k == kindChild
	}
	return false
}

// selects says whether RemoveWatches with kind sel removes a watch of kind k.
func (sel WatchKind) selects(k watchKind) bool {
	switch sel {
	case WatchAny:
		return true
	case WatchData:
		return k == kindData || k == kindExist
	case WatchChild:
		return k == kindChild
	}
	return false
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

// watchPathsLocked lists the paths of the established watches by kind, for
// re-registration on resume. Watches whose registering read is unanswered are
// left out: that read is re-sent and registers them again.
func (c *Client) watchPathsLocked() (data, exist, child []string) {
	for path, l := range c.watches {
		var d, e, ch bool
		for _, w := range l {
			if w.pending {
				continue
			}
			switch w.kind {
			case kindData:
				d = true
			case kindExist:
				e = true
			case kindChild:
				ch = true
			}
		}
		if d {
			data = append(data, path)
		}
		if e {
			exist = append(exist, path)
		}
		if ch {
			child = append(child, path)
		}
	}
	sort.Strings(data)
	sort.Strings(exist)
	sort.Strings(child)
	return data, exist, child
}

// handleEvent dispatches a watch event to the watchers of its path that its
// type fires, each at most once.
func (c *Client) handleEvent(e *apipb.WatchEvent) {
	c.mu.Lock()
	c.noteZxidLocked(e.Zxid)
	// A registration whose read is still unanswered is not fired: the event
	// arrived before that read's reply, so the read already reflects the
	// change and the server armed a fresh watch for the next one.
	ws := c.takeWatchersLocked(e.Path, func(w *watcher) bool { return !w.pending && firedBy(e.Type, w.kind) })
	c.mu.Unlock()
	ev := Event{Type: EventType(e.Type), Path: e.Path, Zxid: e.Zxid}
	for _, w := range ws {
		w.fire(ev)
	}
	if len(ws) == 0 {
		c.log.Debug("client: event without watcher", "type", ev.Type, "path", e.Path)
	}
}

// RemoveWatches removes the session's watches of the given kind on path, on
// the server and in the client; each removed watch's channel receives
// EventNotWatching (Err nil) and is closed. It returns ErrNoWatcher when the
// client has no such watch.
func (c *Client) RemoveWatches(ctx context.Context, path string, kind WatchKind) error {
	c.mu.Lock()
	found := false
	for _, w := range c.watches[path] {
		if kind.selects(w.kind) {
			found = true
			break
		}
	}
	c.mu.Unlock()
	if !found {
		return ErrNoWatcher
	}
	req := &apipb.Request{Op: &apipb.Request_RemoveWatches{RemoveWatches: &apipb.RemoveWatchesRequest{Path: path, Kind: apipb.WatchKind(kind)}}}
	if _, err := c.do(ctx, req, false, nil); err != nil && !errors.Is(err, ErrNoWatcher) {
		return err
	}
	c.mu.Lock()
	ws := c.takeWatchersLocked(path, func(w *watcher) bool { return kind.selects(w.kind) })
	c.mu.Unlock()
	for _, w := range ws {
		w.fire(Event{Type: EventNotWatching, Path: path})
	}
	return nil
}

// StopWatch ends one watch: the one whose channel is ch, as GetW, ExistsW or
// ChildrenW returned it. The client's other watches stay, on the same path
// too (RemoveWatches removes every watch of a kind on a path; this is
// ZooKeeper's removeWatches for a single Watcher). The channel receives
// EventNotWatching (Err nil) and is closed. The server is asked to drop the
// session's watch on the path only when no other watch of the client needs
// it. It returns ErrNoWatcher when ch is not a watch still pending in this
// client (it fired, or was removed, already).
func (c *Client) StopWatch(ctx context.Context, ch <-chan Event) error {
	c.mu.Lock()
	w := c.watcherOfLocked(ch)
	if w == nil {
		c.mu.Unlock()
		return ErrNoWatcher
	}
	// Out of the table first, so that no event can fire it meanwhile.
	c.removeWatcherLocked(w)
	server := WatchData
	if w.kind == kindChild {
		server = WatchChild
	}
	// Pending watches count too: their reads register them on the server.
	shared := slices.ContainsFunc(c.watches[w.path], func(x *watcher) bool { return server.selects(x.kind) })
	c.mu.Unlock()
	w.fire(Event{Type: EventNotWatching, Path: w.path})
	if shared {
		return nil
	}
	req := &apipb.Request{Op: &apipb.Request_RemoveWatches{RemoveWatches: &apipb.RemoveWatchesRequest{Path: w.path, Kind: apipb.WatchKind(server)}}}
	if _, err := c.do(ctx, req, false, nil); err != nil && !errors.Is(err, ErrNoWatcher) {
		// The watch is gone here either way; a server watch left behind
		// fires once, into no channel, when its node changes.
		return err
	}
	return nil
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
