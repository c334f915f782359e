package console

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// contenderJSON is one holder or waiter of a lock or election.
type contenderJSON struct {
	Node    string `json:"node"`
	Kind    string `json:"kind"`
	Session string `json:"session"`
	Server  string `json:"server"`
	// Token is the fencing token (the node's creation zxid), in decimal
	// (as COORD_LOCK_TOKEN gives it) and hex (as zkCli prints a zxid).
	Token    string `json:"token"`
	TokenHex string `json:"tokenHex"`
	Since    string `json:"since"`
	// Value is the node's data (an election candidate's value), when it is
	// text.
	Value string `json:"value,omitempty"`
	// LockDelayUntil is set when the contender's session expired and its
	// node is kept for a lock-delay until then (RFC 3339, UTC).
	LockDelayUntil string `json:"lockDelayUntil,omitempty"`
}

// locksJSON is the state of a lock or election path.
type locksJSON struct {
	Path      string          `json:"path"`
	Semaphore bool            `json:"semaphore"`
	Holders   []contenderJSON `json:"holders"`
	Waiting   []contenderJSON `json:"waiting"`
	// At is when the console read it (RFC 3339, UTC).
	At string `json:"at"`
}

func newLocksJSON(cs lockrecipe.Contenders, servers map[string]string) locksJSON {
	conv := func(ks []lockrecipe.Contender) []contenderJSON {
		out := make([]contenderJSON, 0, len(ks))
		for _, k := range ks {
			j := contenderJSON{
				Node: k.Node, Kind: k.Kind, Session: hexID(k.Session), Token: strconv.FormatInt(int64(k.Token), 10), TokenHex: hexID(int64(k.Token)),
				Since: k.Created.UTC().Format(time.RFC3339Nano),
			}
			j.Server = servers[j.Session]
			if utf8.Valid(k.Data) {
				j.Value = string(k.Data)
			}
			if !k.LockDelayUntil.IsZero() {
				j.LockDelayUntil = k.LockDelayUntil.UTC().Format(time.RFC3339Nano)
			}
			out = append(out, j)
		}
		return out
	}
	return locksJSON{
		Path: cs.Path, Semaphore: cs.Semaphore, Holders: conv(cs.Holders), Waiting: conv(cs.Waiting),
		At: time.Now().UTC().Format(time.RFC3339Nano),
	}
}

// handleLocks streams the holders and waiters of the lock, semaphore,
// read/write lock or election at ?path=, again at every change, as
// "contenders" events; a failure is a "failure" event and the stream goes
// on (with a new session, if the console's expired).
func (c *Console) handleLocks(w http.ResponseWriter, r *http.Request) {
	path, ok := pathParam(w, r)
	if !ok {
		return
	}
	es, ctx, cancel := c.newEventStream(r.Context(), w)
	defer cancel()
	for ctx.Err() == nil {
		cl, err := c.session(ctx)
		if err == nil {
			err = lockrecipe.WatchContenders(ctx, cl, path, func(cs lockrecipe.Contenders) {
				sctx, scancel := context.WithTimeout(ctx, callTimeout)
				defer scancel()
				_ = es.send("contenders", newLocksJSON(cs, c.sessionServers(sctx)))
			})
		}
		if ctx.Err() != nil {
			return
		}
		_ = es.sendError(err)
		if errors.Is(err, client.ErrBadArguments) || !pause(ctx, time.Second) {
			return
		}
	}
}
