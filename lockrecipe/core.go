package lockrecipe

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/coordd/coordd/client"
)

// Token is a fencing token: the creation zxid (Czxid) of the holder's node.
// It grows strictly with every acquisition of one lock, cluster-wide, so a
// resource that remembers the highest token it has seen can refuse a stale
// holder's writes.
type Token int64

// blockerFunc returns the name of the child that kids[i] must wait for,
// or "" when kids[i] holds.
type blockerFunc func(kids []child, i int) string

// waitPredecessor: hold when lowest, else wait for the immediate
// predecessor.
func waitPredecessor(kids []child, i int) string {
	if i == 0 {
		return ""
	}
	return kids[i-1].name
}

// queue is the engine shared by the waiting recipes: one owner's place in
// the sequential children of dir.
type queue struct {
	s       *Session
	dir     string
	prefix  string // of the node name after the GUID, such as "lock-"
	blocker blockerFunc
	// waitChildren makes a waiter watch the children of dir instead of the
	// node blocker names (Semaphore: only its one queued head waits).
	waitChildren bool
	o            options

	mu   sync.Mutex
	busy bool     // acquiring or held
	held *holding // non-nil while held
}

// holding is one acquisition.
type holding struct {
	path       string
	stat       client.Stat
	lost       chan struct{} // closed by the monitor
	stop       chan struct{} // closed to end the monitor
	monDone    chan struct{}
	triedUnset bool // a release attempt had an unknown outcome

	// The watch on the node is set when the program first asks for Lost
	// (watchNode): until then nobody could learn of the node's deletion,
	// and a holder that never looks spares the server a read and an event
	// per acquisition (go-zookeeper's and Curator's locks set none). gone
	// closes when the watch ends: the node was deleted or the session is
	// over, or the holding ended.
	gone     chan struct{}
	watching sync.WaitGroup
	ctx      context.Context // of the watch; cancelled when the holding ends
	cancel   context.CancelFunc
	watchMu  sync.Mutex
	watched  bool // the watch was started
	ended    bool // the monitor is done: no watch may start
}

func newHolding(path string, stat client.Stat) *holding {
	h := &holding{path: path, stat: stat, lost: make(chan struct{}), stop: make(chan struct{}),
		monDone: make(chan struct{}), gone: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

func newQueue(s *Session, dir, prefix string, blocker blockerFunc, opts []Option) *queue {
	return &queue{s: s, dir: dir, prefix: prefix, blocker: blocker, o: buildOptions(opts)}
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// lostChan is the current (or last) acquisition's Lost channel; a closed
// channel when nothing was ever held.
func (q *queue) lostChan() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held == nil {
		return closedChan
	}
	q.watchNode(q.held)
	return q.held.lost
}

func (q *queue) current() *holding {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held
}

func (q *queue) token() Token {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held != nil {
		return Token(q.held.stat.Czxid)
	}
	return 0
}

// node is the owner's node path while held, else "".
func (q *queue) node() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held != nil {
		return q.held.path
	}
	return ""
}

// wouldBlock says whether a node added now after kids would have to wait.
func (q *queue) wouldBlock(names []string) bool {
	kids := sequenced(names)
	kids = append(kids, child{name: protectedPrefix + "-" + q.prefix, seq: 1<<63 - 1})
	return q.blocker(kids, len(kids)-1) != ""
}

// acquire creates the owner's node and waits until it holds (or, with try,
// fails with ErrLocked at once). On error the node is deleted.
func (q *queue) acquire(ctx context.Context, try bool, data []byte) (Token, error) {
	if err := validPath(q.dir); err != nil {
		return 0, err
	}
	q.mu.Lock()
	if q.busy {
		q.mu.Unlock()
		return 0, ErrAlreadyHeld
	}
	q.busy = true
	q.mu.Unlock()
	h, err := q.acquireNode(ctx, try, data)
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		q.busy = false
		return 0, err
	}
	q.held = h
	return Token(h.stat.Czxid), nil
}

func (q *queue) acquireNode(ctx context.Context, try bool, data []byte) (*holding, error) {
	c := q.s.c
	if try {
		// Fail without creating anything when someone is already there.
		names, _, err := c.Children(ctx, q.dir)
		switch {
		case errors.Is(err, client.ErrNoNode):
		case err != nil:
			return nil, fmt.Errorf("lockrecipe: %s: %w", q.dir, err)
		case q.wouldBlock(names):
			return nil, ErrLocked
		}
	}
	guid := q.o.hooks.guidOr(newGUID)
	path, stat, err := q.s.createProtected(ctx, &q.o, q.dir, guid, q.prefix, data, ephemeralSeq)
	if err != nil {
		return nil, err
	}
	me := base(path)
	fail := func(err error) (*holding, error) {
		if derr := q.s.deleteOwn(ctx, path); derr == nil {
			q.o.emit(LockEvent{Kind: LockReleased, Node: path})
		}
		return nil, err
	}
	for {
		gen, err := q.s.liveGeneration(ctx)
		if err != nil {
			return fail(fmt.Errorf("lockrecipe: %s: %w", q.dir, err))
		}
		names, _, err := c.Children(ctx, q.dir)
		if err != nil {
			if errors.Is(err, client.ErrNoNode) || sessionGone(err) {
				return fail(q.s.lostError("node " + path + " vanished"))
			}
			return fail(fmt.Errorf("lockrecipe: %s: %w", q.dir, err))
		}
		kids := sequenced(names)
		i := indexOf(kids, me)
		if i < 0 {
			return fail(q.s.lostError("node " + path + " vanished"))
		}
		w := q.blocker(kids, i)
		if w == "" {
			select {
			case <-gen:
				// The session was suspended since this pass began: the
				// answer may be stale. Look again once it is back.
				continue
			default:
			}
			h := newHolding(path, stat)
			go q.monitor(h, gen)
			q.o.emit(LockEvent{Kind: LockAcquired, Node: path})
			return h, nil
		}
		if try {
			return fail(ErrLocked)
		}
		watched := join(q.dir, w)
		var ch <-chan client.Event
		if q.waitChildren {
			watched = q.dir
			names, _, ch, err = c.ChildrenW(ctx, q.dir)
			if err == nil {
				kids = sequenced(names)
				if i = indexOf(kids, me); i < 0 || q.blocker(kids, i) == "" {
					continue // changed meanwhile: look again
				}
			}
		} else {
			_, _, ch, err = c.GetW(ctx, watched)
			if errors.Is(err, client.ErrNoNode) {
				continue // gone already: look again
			}
		}
		if sessionGone(err) {
			return fail(q.s.lostError("node " + path + " vanished"))
		}
		if err != nil {
			return fail(fmt.Errorf("lockrecipe: watch %s: %w", watched, err))
		}
		q.o.emit(LockEvent{Kind: LockWatching, Node: path, Watched: watched})
		select {
		case ev := <-ch:
			q.o.emit(LockEvent{Kind: LockWoken, Node: path, Watched: watched})
			if ev.Type == client.EventNotWatching && ev.Err != nil {
				return fail(q.s.lostError(fmt.Sprintf("waiting for %s: %v", watched, ev.Err)))
			}
		case <-ctx.Done():
			q.s.stopWatch(ctx, ch)
			return fail(fmt.Errorf("lockrecipe: waiting for %s: %w", watched, ctx.Err()))
		}
	}
}

func (h hooks) guidOr(f func() string) string {
	if h.guid != nil {
		return h.guid()
	}
	return f()
}

// monitor closes h.lost when the session is lost (gen), when the node is
// deleted (once watchNode watches it), or when the holding ends (h.stop).
// The node is watched by a goroutine of its own, so a watch call held up by
// a disconnection never delays noticing the loss of the session.
func (q *queue) monitor(h *holding, gen <-chan struct{}) {
	defer close(h.monDone)
	select {
	case <-gen:
	case <-h.gone:
	case <-h.stop:
	}
	close(h.lost)
	h.cancel()
	h.watchMu.Lock()
	h.ended = true
	h.watchMu.Unlock()
	h.watching.Wait()
}

// watchNode starts watching h's node for its deletion, once, unless the
// holding has ended.
func (q *queue) watchNode(h *holding) {
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	if h.watched || h.ended {
		return
	}
	h.watched = true
	h.watching.Add(1)
	go func() {
		defer h.watching.Done()
		defer close(h.gone)
		for {
			_, _, ch, err := q.s.c.GetW(h.ctx, h.path)
			if err != nil {
				return // deleted, session over, or stopped
			}
			select {
			case ev := <-ch:
				if ev.Type == client.EventNodeDataChanged {
					continue // Proclaim: still ours
				}
				return
			case <-h.ctx.Done():
				return
			}
		}
	}()
}

// release deletes the owner's node. When the node is already gone it
// reports ErrLockLost (unless an earlier release attempt may have deleted
// it). After a release with an unknown outcome (ctx ended), the owner still
// counts as holding, so release can be called again.
func (q *queue) release(ctx context.Context) error {
	q.mu.Lock()
	h := q.held
	q.mu.Unlock()
	if h == nil {
		return ErrNotHeld
	}
	err := q.s.c.Delete(ctx, h.path, -1)
	switch {
	case err == nil:
	case errors.Is(err, client.ErrNoNode):
		if !h.triedUnset {
			err = q.s.lostError("node " + h.path + " was gone at release")
		} else {
			err = nil
		}
	case sessionGone(err):
		err = q.s.lostError("release " + h.path)
	default:
		q.mu.Lock()
		h.triedUnset = true
		q.mu.Unlock()
		return fmt.Errorf("lockrecipe: release %s: %w", h.path, err)
	}
	if err == nil {
		q.o.emit(LockEvent{Kind: LockReleased, Node: h.path})
	}
	close(h.stop)
	<-h.monDone
	q.mu.Lock()
	q.held = nil
	q.busy = false
	q.mu.Unlock()
	return err
}

// guardedMulti runs ops only if the owner's node still exists with the
// version it had (a check op in front of the caller's ops, one multi).
func (q *queue) guardedMulti(ctx context.Context, ops ...client.Op) ([]client.OpResult, error) {
	h := q.current()
	if h == nil {
		return nil, ErrNotHeld
	}
	q.mu.Lock()
	version := h.stat.Version
	q.mu.Unlock()
	all := append([]client.Op{client.CheckOp(h.path, version)}, ops...)
	res, err := q.s.c.Multi(ctx, all...)
	if len(res) > 0 {
		if e := res[0].Err; e != nil && (errors.Is(e, client.ErrNoNode) || errors.Is(e, client.ErrBadVersion)) {
			return res[1:], q.s.lostError("guard on " + h.path + " failed")
		}
		res = res[1:]
	}
	if sessionGone(err) {
		return res, q.s.lostError("guarded multi: " + err.Error())
	}
	return res, err
}

// setData replaces the owner's node data, keeping the stat (and so the
// guard's version) current.
func (q *queue) setData(ctx context.Context, data []byte) error {
	h := q.current()
	if h == nil {
		return ErrNotHeld
	}
	q.mu.Lock()
	version := h.stat.Version
	q.mu.Unlock()
	st, err := q.s.c.Set(ctx, h.path, data, version)
	switch {
	case err == nil:
		q.mu.Lock()
		h.stat = st
		q.mu.Unlock()
		return nil
	case errors.Is(err, client.ErrNoNode), errors.Is(err, client.ErrBadVersion), sessionGone(err):
		return q.s.lostError("set " + h.path + ": " + err.Error())
	}
	return fmt.Errorf("lockrecipe: set %s: %w", h.path, err)
}
