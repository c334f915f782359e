package lockrecipe

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/coordd/coordd/client"
)

// Contender is one node queued on a recipe's path: a Mutex's or
// ReentrantMutex's lock node, an RWMutex's read or write node, a Semaphore's
// lease or queue node, an Election's candidate.
type Contender struct {
	// Node is the node's name relative to the recipe's path ("leases/..."
	// and "lock/..." for a Semaphore's).
	Node string
	// Kind is what the node's name says it is: "lock", "read", "write",
	// "lease", "elect", or "" for another sequential node.
	Kind string
	// Session is the session that owns the node (its ephemeral owner).
	Session int64
	// Token is the node's fencing token, its creation zxid (what Lock and
	// Acquire return, and Election.Token).
	Token Token
	// Created is the node's creation time.
	Created time.Time
	// Data is the node's data: an Election candidate's value.
	Data []byte
	// LockDelayUntil is set when Session expired and the servers keep the
	// node for a lock-delay (coordd's --lock-delay): a holder that is gone
	// still holds until then, when its node is deleted. Zero otherwise.
	LockDelayUntil time.Time
}

// Contenders are the holders and waiters of a recipe's path, each in queue
// order.
type Contenders struct {
	Path string
	// Semaphore: the path holds a Semaphore's "leases".
	Semaphore bool
	Holders   []Contender
	Waiting   []Contender
}

// Inspect reads who holds the lock, semaphore, read/write lock or election
// at path and who waits, as the recipes of this package (and Curator's)
// lay them out, from the state of c's server. The lowest sequential node
// holds a Mutex or leads an Election; the read nodes ahead of an RWMutex's
// first write node hold together; a Semaphore's leases hold, except the
// newest lease of the head of its internal queue, which waits for a permit
// with the rest of that queue behind it. A path that does not exist has no
// contenders.
func Inspect(ctx context.Context, c *client.Client, path string) (Contenders, error) {
	out, _, err := inspect(ctx, c, path, false)
	return out, err
}

// contendersRefresh is how often WatchContenders reads a non-empty queue
// again without a watch firing: a holder's session may expire while a
// lock-delay keeps its node, which changes no node (see
// Contender.LockDelayUntil).
const contendersRefresh = 2 * time.Second

// WatchContenders calls f with path's contenders (as Inspect reads them)
// now and again after each change, until ctx ends or c's session does, and
// returns why it stopped. It waits on watches: a child watch on each node
// whose children are the queue, and a data watch on each holder (an
// Election's leader may Proclaim a new value); while there are contenders it
// also reads them again every 2 seconds, since a holder whose session
// expired under a lock-delay changes no node. A read that fails for a
// passing reason (a lost connection) is retried after a pause; f sees only
// complete readings, and never the same one twice in a row.
func WatchContenders(ctx context.Context, c *client.Client, path string, f func(Contenders)) error {
	if err := validPath(path); err != nil {
		return err
	}
	var last *Contenders
	for {
		out, chans, err := inspect(ctx, c, path, true)
		if err != nil {
			stopWatches(c, chans)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, client.ErrSessionExpired) || errors.Is(err, client.ErrClosed) {
				return err
			}
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		if last == nil || !reflect.DeepEqual(*last, out) {
			f(out)
			last = &out
		}
		fired, err := waitContenders(ctx, c, path, chans, &last, f)
		stopWatches(c, without(chans, fired))
		if err != nil {
			return err
		}
	}
}

// waitContenders waits for one of chans to fire (and returns its index, as
// waitAny does); meanwhile, while *last holds contenders, it reads them
// again every contendersRefresh and passes a changed reading to f.
func waitContenders(ctx context.Context, c *client.Client, path string, chans []<-chan client.Event, last **Contenders, f func(Contenders)) (int, error) {
	t := time.NewTicker(contendersRefresh)
	defer t.Stop()
	for {
		var tick <-chan time.Time
		if l := *last; len(l.Holders) > 0 || len(l.Waiting) > 0 {
			tick = t.C
		}
		fired, err := waitAny(ctx, chans, tick)
		if fired != tickFired {
			return fired, err
		}
		out, _, err := inspect(ctx, c, path, false)
		if err == nil && !reflect.DeepEqual(**last, out) {
			f(out)
			*last = &out
		}
	}
}

// tickFired is waitAny's answer when tick fired before any watch.
const tickFired = -2

// waitAny waits for the first event on any of chans and returns its index;
// it fails when ctx ends or the event says the session has. It returns
// tickFired if tick (nil: never) fires first.
func waitAny(ctx context.Context, chans []<-chan client.Event, tick <-chan time.Time) (int, error) {
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(tick)})
	for _, ch := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	i, v, ok := reflect.Select(cases)
	switch i {
	case 0:
		return -1, ctx.Err()
	case 1:
		return tickFired, nil
	}
	if ok {
		if ev := v.Interface().(client.Event); ev.Type == client.EventNotWatching && ev.Err != nil {
			return i - 2, ev.Err
		}
	}
	return i - 2, nil
}

func without(chans []<-chan client.Event, i int) []<-chan client.Event {
	if i < 0 || i >= len(chans) {
		return chans
	}
	return append(chans[:i:i], chans[i+1:]...)
}

// stopWatches removes the watches of chans that have not fired.
func stopWatches(c *client.Client, chans []<-chan client.Event) {
	if len(chans) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupAttempt)
	defer cancel()
	for _, ch := range chans {
		_ = c.StopWatch(ctx, ch) // ErrNoWatcher: it fired meanwhile
	}
}

// inspect reads path's contenders; with watch it also returns the watches
// that fire on the next change.
func inspect(ctx context.Context, c *client.Client, path string, watch bool) (Contenders, []<-chan client.Event, error) {
	out := Contenders{Path: path}
	if err := validPath(path); err != nil {
		return out, nil, err
	}
	r := &reader{c: c, watch: watch}
	names, exists, err := r.children(ctx, path)
	if err != nil || !exists {
		return out, r.chans, wrapInspect(path, err)
	}
	for _, n := range names {
		out.Semaphore = out.Semaphore || n == "leases"
	}
	if out.Semaphore {
		leases, err := r.sequenced(ctx, join(path, "leases"), "leases/")
		if err != nil {
			return out, r.chans, wrapInspect(path, err)
		}
		queue, err := r.sequenced(ctx, join(path, "lock"), "lock/")
		if err != nil {
			return out, r.chans, wrapInspect(path, err)
		}
		// Only the head of the internal queue adds a lease while it waits:
		// its newest lease (if any) waits, every other lease holds.
		waitingLease := -1
		if len(queue) > 0 {
			for i := len(leases) - 1; i >= 0; i-- {
				if leases[i].Session == queue[0].Session {
					waitingLease = i
					break
				}
			}
		}
		for i, l := range leases {
			if i != waitingLease {
				out.Holders = append(out.Holders, l)
			}
		}
		if waitingLease >= 0 {
			out.Waiting = append(out.Waiting, leases[waitingLease])
			queue = queue[1:]
		}
		out.Waiting = append(out.Waiting, queue...)
		return out, r.chans, r.watchHolders(ctx, out.Holders, path)
	}
	kids, err := r.get(ctx, path, "", names)
	if err != nil {
		return out, r.chans, wrapInspect(path, err)
	}
	// The lowest node holds; for a read/write lock, every read node before
	// the first write node holds together.
	holders := 0
	for i, k := range kids {
		if i == 0 || (k.Kind == "read" && kids[i-1].Kind == "read" && holders == i) {
			holders = i + 1
		}
	}
	out.Holders, out.Waiting = kids[:holders:holders], kids[holders:]
	return out, r.chans, r.watchHolders(ctx, out.Holders, path)
}

func wrapInspect(path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("lockrecipe: inspecting %s: %w", path, err)
}

// reader reads a recipe's nodes, collecting watches when asked to.
type reader struct {
	c     *client.Client
	watch bool
	chans []<-chan client.Event
}

// children lists dir's children; a missing dir has none (and, with watch,
// a watch for its creation).
func (r *reader) children(ctx context.Context, dir string) ([]string, bool, error) {
	for {
		if !r.watch {
			names, _, err := r.c.Children(ctx, dir)
			if errors.Is(err, client.ErrNoNode) {
				return nil, false, nil
			}
			return names, err == nil, err
		}
		names, _, ch, err := r.c.ChildrenW(ctx, dir)
		if err == nil {
			r.chans = append(r.chans, ch)
			return names, true, nil
		}
		if !errors.Is(err, client.ErrNoNode) {
			return nil, false, err
		}
		_, ok, ch, err := r.c.ExistsW(ctx, dir)
		if err != nil {
			return nil, false, err
		}
		if ok { // created meanwhile: list it
			_ = r.c.StopWatch(ctx, ch)
			continue
		}
		r.chans = append(r.chans, ch)
		return nil, false, nil
	}
}

// sequenced reads dir's sequential children, in sequence order.
func (r *reader) sequenced(ctx context.Context, dir, prefix string) ([]Contender, error) {
	names, _, err := r.children(ctx, dir)
	if err != nil {
		return nil, err
	}
	return r.get(ctx, dir, prefix, names)
}

// get reads the sequential nodes among names, children of dir, in
// sequence order; those deleted meanwhile are left out (the child watch
// on dir, if any, fires for them).
func (r *reader) get(ctx context.Context, dir, prefix string, names []string) ([]Contender, error) {
	var out []Contender
	for _, k := range sequenced(names) {
		data, st, err := r.c.Get(ctx, join(dir, k.name))
		if errors.Is(err, client.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c := Contender{
			Node: prefix + k.name, Kind: contenderKind(k.name), Session: st.EphemeralOwner,
			Token: Token(st.Czxid), Created: time.UnixMilli(st.Ctime), Data: data,
		}
		if st.LockDelayUntil > 0 {
			c.LockDelayUntil = time.UnixMilli(st.LockDelayUntil)
		}
		out = append(out, c)
	}
	return out, nil
}

// watchHolders leaves a data watch on each holder, so that a leader's new
// value is seen (and its deletion, twice, harmlessly).
func (r *reader) watchHolders(ctx context.Context, holders []Contender, path string) error {
	if !r.watch {
		return nil
	}
	for _, h := range holders {
		_, _, ch, err := r.c.GetW(ctx, join(path, h.Node))
		if errors.Is(err, client.ErrNoNode) {
			continue // gone already: a child watch fires for it
		}
		if err != nil {
			return wrapInspect(path, err)
		}
		r.chans = append(r.chans, ch)
	}
	return nil
}

// contenderKind is the recipe word before a node's sequence number:
// "..-lock-0000000001" is a lock node.
func contenderKind(name string) string {
	word := strings.TrimSuffix(name[:len(name)-seqDigits], "-")
	word = word[strings.LastIndexAny(word, "-_/")+1:]
	switch word {
	case "lock", "read", "write", "lease", "elect":
		return word
	}
	return ""
}
