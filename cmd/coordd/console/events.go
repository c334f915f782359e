package console

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/coordd/coordd/client"
)

// eventJSON is one watch event of the feed.
type eventJSON struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Zxid string `json:"zxid"` // hex, as zkCli prints it
	// Received is when the console received it (Unix milliseconds).
	Received int64 `json:"received"`
	// Note explains a Resync: events may be missing before it.
	Note string `json:"note,omitempty"`
}

// watchingJSON says the feed is live, and how.
type watchingJSON struct {
	Path string `json:"path"`
	How  string `json:"how"`
}

// handleWatch streams the watch events of ?path= and everything below it,
// as "event" events, from one persistent recursive watch (ZooKeeper's
// addWatch PERSISTENT_RECURSIVE) on the console's session: NodeCreated,
// NodeDeleted and NodeDataChanged, in zxid order. The watch is removed when
// the page goes away; if the session ends, a new one takes it up (what
// changed meanwhile is not reported: a "Resync" event says so).
func (c *Console) handleWatch(w http.ResponseWriter, r *http.Request) {
	path, ok := pathParam(w, r)
	if !ok {
		return
	}
	es, ctx, cancel := c.newEventStream(r.Context(), w)
	defer cancel()
	resumed := false
	for ctx.Err() == nil {
		err := c.feed(ctx, es, path, resumed)
		if ctx.Err() != nil {
			return
		}
		_ = es.sendError(err)
		if errors.Is(err, client.ErrBadArguments) || !pause(ctx, time.Second) {
			return
		}
		resumed = true
	}
}

// feed runs one watch until ctx ends or the watch does, and says why.
func (c *Console) feed(ctx context.Context, es *eventStream, path string, resumed bool) error {
	cl, err := c.session(ctx)
	if err != nil {
		return err
	}
	ch, err := cl.AddWatch(ctx, path, client.WatchPersistentRecursive)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.StopWatch(sctx, ch)
	}()
	if err := es.send("watching", watchingJSON{Path: path, How: "one persistent recursive watch on " + path}); err != nil {
		return err
	}
	if resumed {
		_ = es.send("event", eventJSON{Type: client.EventResync.String(), Path: path, Received: time.Now().UnixMilli(),
			Note: "the watch was set again: changes made meanwhile are not reported"})
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-ch:
			if !ok {
				return client.ErrClosed
			}
			out := eventJSON{Type: ev.Type.String(), Path: ev.Path, Zxid: hexID(ev.Zxid), Received: time.Now().UnixMilli()}
			switch ev.Type {
			case client.EventNotWatching:
				if ev.Err != nil {
					return ev.Err
				}
				return errors.New("console: the watch was removed")
			case client.EventResync:
				out.Zxid, out.Note = "", "events may be missing before this one"
				if ev.Err != nil {
					out.Note += ": " + ev.Err.Error()
				}
			}
			if err := es.send("event", out); err != nil {
				return err
			}
		}
	}
}
