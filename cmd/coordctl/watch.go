package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path"
	"reflect"
	"sort"
	"sync"

	"github.com/coordd/coordd/client"
)

// shellJobs runs what the shell leaves running: the watches of get -w,
// ls -w and stat -w, and watch when the commands come from a pipe or file.
// Their events are printed when they fire, until the shell ends.
type shellJobs struct {
	ctx    context.Context // ended when the shell ends
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startBackground gives the shell its background and returns the function
// that ends it, once everything in it has returned.
func (c *cli) startBackground() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	c.bg = &shellJobs{ctx: ctx, cancel: cancel}
	return func() {
		cancel()
		c.bg.wg.Wait()
	}
}

// run runs f in the background.
func (b *shellJobs) run(f func(ctx context.Context)) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f(b.ctx)
	}()
}

// watcherPrefix starts the text line of an event of a watch the shell left
// running, as zkCli's "WATCHER::" does.
const watcherPrefix = "WATCHER:: "

// forWatcher is the printer of the events of a watch left running.
func (p *printer) forWatcher() *printer {
	return &printer{w: p.w, json: p.json, eventPrefix: watcherPrefix}
}

// watchEvent prints the one event of a watch left by get -w, ls -w or
// stat -w: in a one-shot call it waits for it; in the shell it returns at
// once and prints the event when it fires (as "WATCHER:: TYPE PATH
// zxid=...").
func (x *cmd) watchEvent(ch <-chan client.Event) error {
	if x.bg == nil {
		return x.waitEvent(ch)
	}
	out := x.out.forWatcher()
	x.bg.run(func(ctx context.Context) {
		var (
			ev client.Event
			ok bool
		)
		select {
		case ev, ok = <-ch:
		case <-ctx.Done():
			// The shell ends: an event that fired before is still printed.
			select {
			case ev, ok = <-ch:
			default:
				return
			}
		}
		if !ok {
			ev = client.Event{Type: client.EventNotWatching, Err: errors.New("channel closed")}
		}
		if err := notWatching(ev); err != nil {
			x.printError(err, out.json)
			return
		}
		if err := out.emitEvent(ev); err != nil {
			x.printError(err, out.json)
		}
	})
	return nil
}

// waitEvent waits for the one event of a watch left by get -w, ls -w or
// stat -w and prints it. An interrupt ends the wait quietly.
func (x *cmd) waitEvent(ch <-chan client.Event) error {
	select {
	case ev, ok := <-ch:
		if !ok {
			return errors.New("watch ended without an event")
		}
		if err := notWatching(ev); err != nil {
			return err
		}
		return x.out.emitEvent(ev)
	case <-x.ctx.Done():
		return nil
	}
}

// notWatching turns an EventNotWatching into the error that ended the watch.
func notWatching(ev client.Event) error {
	if ev.Type != client.EventNotWatching {
		return nil
	}
	if ev.Err != nil {
		return fmt.Errorf("%s: watch ended: %w", ev.Path, ev.Err)
	}
	return fmt.Errorf("%s: watch removed", ev.Path)
}

var watchVerb = &verb{
	name:     "watch",
	synopsis: "watch [-p | -R] PATH",
	summary:  "print every change of a node (with -R of its subtree) until interrupted",
	detail: `
Prints every event (type, path, zxid) of PATH until interrupted. If PATH does
not exist it waits for its creation.

With -p, one persistent watch on PATH (ZooKeeper's addWatch PERSISTENT): it
reports NodeCreated, NodeDataChanged, NodeChildrenChanged and NodeDeleted of
PATH, every one, and stays.

With -R, one persistent recursive watch on PATH (addWatch
PERSISTENT_RECURSIVE): it reports NodeCreated, NodeDataChanged and
NodeDeleted of PATH and of every node below it, nodes created later
included, every one. Such a watch reports no NodeChildrenChanged (a child's
creation or deletion is its own event); watch -R prints one for the parent of
each node created or deleted below PATH, right after that event and with its
zxid, as a watch on every node would show it.

Without either, watch keeps a one-shot data watch and child watch on PATH,
re-arming each after it fires, as older servers allow: a change made between
an event and the re-arming of its watch is seen in the state the re-arming
reads, not as an event of its own.

A persistent watch that falls behind, or whose session moved to another
server while things changed, may have missed events: watch says so on
stderr ("events may have been missed") and goes on.

In a shell reading its commands from a pipe or file, watch sets its watch
and the shell goes on with the next command; the events are printed as they
come ("WATCHER:: TYPE PATH zxid=...", or the event's JSON) until the shell
ends.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		recursive := fs.Bool("R", false, "one recursive watch on the whole subtree")
		persistent := fs.Bool("p", false, "one persistent watch on PATH")
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 1); err != nil {
				return err
			}
			if *recursive && *persistent {
				return x.usage("-p and -R exclude each other (a recursive watch is persistent)")
			}
			ctx, cancel := x.deadline()
			cl, err := x.client(ctx)
			cancel()
			if err != nil {
				return err
			}
			var w interface {
				begin(until string) error
				loop() error
				setCmd(*cmd)
			}
			switch {
			case *recursive:
				w = &persistentWatch{x: x, cl: cl, root: args[0], kind: client.WatchPersistentRecursive}
			case *persistent:
				w = &persistentWatch{x: x, cl: cl, root: args[0], kind: client.WatchPersistent}
			default:
				w = &watcher{x: x, cl: cl, root: args[0], nodes: map[string]*watchedNode{}}
			}
			if x.bg == nil || x.interactive {
				if err := w.begin("interrupt (Ctrl-C) to stop"); err != nil {
					return err
				}
				return w.loop()
			}
			// In a script: the watches are set before the next command
			// runs, and the events come in the background.
			wx := &cmd{cli: x.cli, ctx: x.bg.ctx, verb: x.verb, out: x.out.forWatcher()}
			w.setCmd(wx)
			if err := w.begin("until the shell ends"); err != nil {
				return err
			}
			x.bg.run(func(context.Context) {
				if err := w.loop(); err != nil {
					x.printError(err, wx.out.json)
				}
			})
			return nil
		}
	},
}

// persistentWatch runs watch -p and watch -R: one persistent watch, its
// events printed as they come.
type persistentWatch struct {
	x    *cmd
	cl   *client.Client
	root string
	kind client.WatchKind // WatchPersistent or WatchPersistentRecursive
	ch   <-chan client.Event
}

func (w *persistentWatch) setCmd(x *cmd) { w.x = x }

// begin sets the watch and says so on stderr, with until (how the watch
// ends).
func (w *persistentWatch) begin(until string) error {
	ctx, cancel := w.x.deadline()
	defer cancel()
	ch, err := w.cl.AddWatch(ctx, w.root, w.kind)
	if err != nil {
		return nodeError(w.root, err)
	}
	w.ch = ch
	// Read after the watch is in place: a creation after this read is an
	// event.
	if _, ok, err := w.cl.Exists(ctx, w.root); err != nil {
		return nodeError(w.root, err)
	} else if !ok {
		fmt.Fprintf(w.x.stderr, "coordctl: %s: node does not exist; waiting for its creation\n", w.root)
	}
	what := w.root
	if w.kind == client.WatchPersistentRecursive {
		what += " and its descendants"
	}
	fmt.Fprintf(w.x.stderr, "coordctl: watching %s; %s\n", what, until)
	return nil
}

// loop prints the events until the verb's context ends (an interrupt, or
// the end of the shell), then prints those already received and removes
// the watch.
func (w *persistentWatch) loop() error {
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.x.ctx), w.x.timeout)
		defer cancel()
		_ = w.cl.StopWatch(ctx, w.ch) // the session may be gone already
	}()
	for {
		select {
		case ev, ok := <-w.ch:
			if err := w.handle(ev, ok); err != nil {
				return err
			}
		case <-w.x.ctx.Done():
			for {
				select {
				case ev, ok := <-w.ch:
					if err := w.handle(ev, ok); err != nil {
						return err
					}
				default:
					return nil
				}
			}
		}
	}
}

// handle prints one event (ok false: the channel was closed).
func (w *persistentWatch) handle(ev client.Event, ok bool) error {
	if !ok {
		return fmt.Errorf("%s: watch ended", w.root)
	}
	switch ev.Type {
	case client.EventNotWatching:
		return notWatching(ev)
	case client.EventResync:
		fmt.Fprintf(w.x.stderr, "coordctl: %s: events may have been missed (%v)\n", w.root, ev.Err)
		return nil
	}
	if err := w.x.out.emitEvent(ev); err != nil {
		return err
	}
	if w.kind == client.WatchPersistentRecursive && ev.Path != w.root &&
		(ev.Type == client.EventNodeCreated || ev.Type == client.EventNodeDeleted) {
		parent := path.Dir(ev.Path)
		return w.x.out.emitEvent(client.Event{Type: client.EventNodeChildrenChanged, Path: parent, Zxid: ev.Zxid})
	}
	return nil
}

// watcher runs the watch verb without -p or -R: it keeps a data (exists)
// watch and a child watch armed on the node. Everything runs in one
// goroutine; the pending watch channels are selected together, and the
// events ready at once are printed in zxid order.
type watcher struct {
	x       *cmd
	cl      *client.Client
	root    string
	nodes   map[string]*watchedNode
	pending []pendingWatch
}

func (w *watcher) setCmd(x *cmd) { w.x = x }

// watchedNode is the watch state of one node.
type watchedNode struct {
	data, child bool // a watch of that kind is armed (or fired, unhandled)
	lastType    client.EventType
	lastZxid    int64 // the last event printed, to print each event once
}

type pendingWatch struct {
	path  string
	child bool
	ch    <-chan client.Event
}

type firedWatch struct {
	pendingWatch
	ev client.Event
}

// begin arms the watches of the root and says so on stderr, with until
// (how the watch ends).
func (w *watcher) begin(until string) error {
	exists, err := w.arm(w.root)
	if err != nil {
		return nodeError(w.root, err)
	}
	if !exists {
		fmt.Fprintf(w.x.stderr, "coordctl: %s: node does not exist; waiting for its creation\n", w.root)
	}
	fmt.Fprintf(w.x.stderr, "coordctl: watching %s; %s\n", w.root, until)
	return nil
}

// loop prints the events and re-arms the watches until the verb's context
// ends (an interrupt, or the end of the shell).
func (w *watcher) loop() error {
	for {
		batch, ok := w.next()
		if !ok {
			return nil // interrupted
		}
		for _, f := range batch {
			if err := w.handle(f); err != nil {
				if w.x.ctx.Err() != nil {
					continue // interrupted while re-arming: print the rest
				}
				return err
			}
		}
	}
}

// next waits for a watch to fire and returns it with every other one already
// fired, sorted by zxid; ok is false when the verb was interrupted. Once it
// is, the watches that had fired are still returned (once), with ok.
func (w *watcher) next() (batch []firedWatch, ok bool) {
	if len(w.pending) == 0 && w.x.ctx.Err() != nil {
		return nil, false
	}
	cases := make([]reflect.SelectCase, 0, len(w.pending)+1)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.x.ctx.Done())})
	for _, p := range w.pending {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.ch)})
	}
	i, v, recvOK := reflect.Select(cases)
	taken := map[int]client.Event{}
	if i > 0 {
		first := client.Event{Type: client.EventNotWatching, Path: w.pending[i-1].path, Err: errors.New("channel closed")}
		if recvOK {
			first = v.Interface().(client.Event)
		}
		taken[i-1] = first
	}
	// Collect whatever else has fired already: the client delivered those
	// before this one's successors, so sorting by zxid restores the order.
	for j, p := range w.pending {
		if _, done := taken[j]; done {
			continue
		}
		select {
		case ev, ok := <-p.ch:
			if !ok {
				ev = client.Event{Type: client.EventNotWatching, Path: p.path, Err: errors.New("channel closed")}
			}
			taken[j] = ev
		default:
		}
	}
	rest := w.pending[:0:0]
	for j, p := range w.pending {
		if ev, done := taken[j]; done {
			batch = append(batch, firedWatch{pendingWatch: p, ev: ev})
		} else {
			rest = append(rest, p)
		}
	}
	w.pending = rest
	if i == 0 {
		// Interrupted: what had fired is printed, and nothing waits more.
		w.pending = nil
		if len(batch) == 0 {
			return nil, false
		}
	}
	sort.SliceStable(batch, func(a, b int) bool { return batch[a].ev.Zxid < batch[b].ev.Zxid })
	return batch, true
}

// handle prints a fired watch's event (once per event per node) and re-arms.
func (w *watcher) handle(f firedWatch) error {
	if err := notWatching(f.ev); err != nil {
		return err
	}
	n := w.nodes[f.path]
	if n == nil {
		n = &watchedNode{}
		w.nodes[f.path] = n
	}
	if f.child {
		n.child = false
	} else {
		n.data = false
	}
	if f.ev.Type != n.lastType || f.ev.Zxid != n.lastZxid {
		n.lastType, n.lastZxid = f.ev.Type, f.ev.Zxid
		if err := w.x.out.emitEvent(f.ev); err != nil {
			return err
		}
	}
	if _, err := w.arm(f.path); err != nil {
		return fmt.Errorf("%s: re-arming the watch: %w", f.path, err)
	}
	return nil
}

// arm arms the watches of path that are not armed and reports whether the
// node exists.
func (w *watcher) arm(path string) (bool, error) {
	n := w.nodes[path]
	if n == nil {
		n = &watchedNode{}
		w.nodes[path] = n
	}
	ctx, cancel := w.x.deadline()
	defer cancel()
	if !n.data {
		_, ok, ch, err := w.cl.ExistsW(ctx, path)
		if err != nil {
			return false, err
		}
		n.data = true
		w.pending = append(w.pending, pendingWatch{path: path, ch: ch})
		if !ok {
			return false, nil // the exists watch reports the creation
		}
	}
	if n.child {
		return true, nil
	}
	_, _, ch, err := w.cl.ChildrenW(ctx, path)
	if errors.Is(err, client.ErrNoNode) {
		return false, nil // deleted meanwhile: the data watch reports it
	}
	if err != nil {
		return false, err
	}
	n.child = true
	w.pending = append(w.pending, pendingWatch{path: path, child: true, ch: ch})
	return true, nil
}
