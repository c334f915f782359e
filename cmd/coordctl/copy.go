package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/client"
)

// The copy verb: a subtree of a running ZooKeeper ensemble (or anything
// that speaks ZooKeeper's protocol, coordd included) copied into coordd.

var copyVerb = &verb{
	name:     "copy",
	synopsis: "copy [--on-conflict fail|skip|overwrite] ZK-SERVERS SRC-PATH [DST-PATH]",
	summary:  "copy a subtree from a ZooKeeper ensemble into coordd",
	detail: `
Copies the subtree at SRC-PATH of the ZooKeeper ensemble ZK-SERVERS
(host:port,...) to DST-PATH (default: SRC-PATH) in the coordd cluster of
--servers, parents before children, with each node's data, as persistent
nodes: ZooKeeper does not tell its clients which nodes are containers or TTL
nodes (their stat's ephemeralOwner is 0), so re-create those with create -c
or -t where it matters. Ephemeral nodes are left out (they belong to the
source's sessions); sequential nodes keep their names, and each parent's
sequence counter is raised past the highest copied number, so that later
sequential creates there never reuse one. Missing ancestors of DST-PATH are
created, empty. ZooKeeper's /zookeeper subtree is never copied, nor the
root's own data.

ACLs are copied: each node is created open (so that its children can be
created whatever its ACL) and gets the source's ACL once the whole subtree
is there. --from-auth gives the ZooKeeper session identities (as --auth
gives coordd's): it must be allowed to read every node, and needs ADMIN (or
the super user) where an ACL has digests, which ZooKeeper hides otherwise. Versions,
zxids, times and TTL clocks start afresh, and copy never deletes anything.

A node that already exists in coordd is a conflict:
  fail       stop there, exit status 1, code NodeExists (the default)
  skip       leave it as it is and go on with its children (re-running
             with skip resumes an interrupted copy)
  overwrite  set its data to the source's and go on

Stop the source's writers first: the copy reads one node at a time, not a
snapshot (a later run with --on-conflict overwrite catches up with changed
data). Prints how many nodes it copied, skipped and overwrote.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		conflict := fs.String("on-conflict", "fail", "what to do with a node that exists in coordd: fail, skip or overwrite")
		maxBump := fs.Int64("max-seq-raise", 1_000_000, "the most a parent's sequence counter is raised; above it the counter is left and a warning says so")
		var fromAuth authList
		fs.Var(&fromAuth, "from-auth", "an identity for the ZooKeeper session, `SCHEME:CREDENTIALS` (digest:user:password), as often as needed: it must read every node, and have ADMIN to see digests in their ACLs")
		return func(x *cmd, args []string) error {
			args, err := x.interleaved(fs, args)
			if err != nil {
				return err
			}
			if len(args) < 2 || len(args) > 3 {
				return x.usage("want ZK-SERVERS SRC-PATH [DST-PATH]")
			}
			switch *conflict {
			case "fail", "skip", "overwrite":
			default:
				return x.usage("--on-conflict: want fail, skip or overwrite, not %q", *conflict)
			}
			var sources []string
			for _, s := range strings.Split(args[0], ",") {
				if s = strings.TrimSpace(s); s != "" {
					addr, err := normalizeServer(s)
					if err != nil {
						return x.usage("ZK-SERVERS: %v", strings.TrimPrefix(err.Error(), "--servers: "))
					}
					sources = append(sources, addr)
				}
			}
			if len(sources) == 0 {
				return x.usage("ZK-SERVERS: no server given")
			}
			c := &copier{x: x, conflict: *conflict, maxBump: *maxBump, fromAuth: fromAuth, src: args[1], dst: args[1],
				seqs: map[string]int64{}, acls: map[string][]client.ACL{}}
			if len(args) == 3 {
				c.dst = args[2]
			}
			for _, p := range []string{c.src, c.dst} {
				if !strings.HasPrefix(p, "/") || (len(p) > 1 && strings.HasSuffix(p, "/")) || path.Clean(p) != p {
					return x.usage("%q is not a znode path", p)
				}
			}
			err = c.run(sources)
			out := c.summary()
			if err != nil {
				x.out.emit(out, func(w io.Writer) { writeCopy(w, out) })
				return err
			}
			return x.out.emit(out, func(w io.Writer) { writeCopy(w, out) })
		}
	},
}

// copier copies one subtree.
type copier struct {
	x        *cmd
	conflict string
	maxBump  int64
	fromAuth authList
	src, dst string
	zc       *zk.Conn
	cl       *client.Client

	mu                                               sync.Mutex // the counts and seqs, updated by the workers
	copied, ephemeral, existing, overwritten, raised int
	seqs                                             map[string]int64        // coordd parent -> highest sequence number copied under it
	acls                                             map[string][]client.ACL // coordd path -> the ACL to give it once the copy is done
	aclsSet                                          int
	warnings                                         []string
}

type copyJSON struct {
	From        string   `json:"from"`
	To          string   `json:"to"`
	Copied      int      `json:"copied"`
	Ephemeral   int      `json:"skippedEphemeral"`
	Existing    int      `json:"existing"`
	Overwritten int      `json:"overwritten"`
	SeqRaised   int      `json:"sequenceCountersRaised"`
	ACLsSet     int      `json:"aclsSet"`
	Warnings    []string `json:"warnings"`
}

func (c *copier) summary() copyJSON {
	return copyJSON{From: c.src, To: c.dst, Copied: c.copied, Ephemeral: c.ephemeral, Existing: c.existing,
		Overwritten: c.overwritten, SeqRaised: c.raised, ACLsSet: c.aclsSet, Warnings: append([]string{}, c.warnings...)}
}

func writeCopy(w io.Writer, o copyJSON) {
	fmt.Fprintf(w, "copied %d znodes from %s to %s: %d ephemerals left out, %d existed (%d overwritten), %d sequence counters raised, %d ACLs set\n",
		o.Copied, o.From, o.To, o.Ephemeral, o.Existing, o.Overwritten, o.SeqRaised, o.ACLsSet)
	for _, warn := range o.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
}

// quietZK drops go-zookeeper's logs (its connection chatter).
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// run connects to both sides and copies.
func (c *copier) run(sources []string) error {
	zc, events, err := zk.Connect(sources, c.x.sessionTimeout, zk.WithLogger(quietZK{}), zk.WithLogInfo(false))
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer zc.Close()
	c.zc = zc
	wait := time.NewTimer(c.x.timeout)
	defer wait.Stop()
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.State == zk.StateHasSession
		case <-wait.C:
			return &cliError{code: "ConnectionFailed", status: 1, msg: fmt.Sprintf("copy: no session with ZooKeeper at %s within %v", strings.Join(sources, ","), c.x.timeout)}
		case <-c.x.ctx.Done():
			return c.x.ctx.Err()
		}
	}
	go func() { // drain: go-zookeeper drops events nobody reads, but keep up anyway
		for range events {
		}
	}()
	for _, a := range c.fromAuth {
		scheme, cred, _ := strings.Cut(a, ":")
		if err := zc.AddAuth(scheme, []byte(cred)); err != nil {
			return fmt.Errorf("copy: authenticating to ZooKeeper (%s): %w", scheme, err)
		}
	}
	ctx, cancel := c.x.deadline()
	cl, err := c.x.client(ctx)
	cancel()
	if err != nil {
		return err
	}
	c.cl = cl
	if err := c.ancestors(); err != nil {
		return err
	}
	if err := c.walk(); err != nil {
		return err
	}
	if err := c.raiseCounters(); err != nil {
		return err
	}
	return c.setACLs()
}

// setACLs gives the copied nodes their ACLs. Every node was created open,
// so that the copy could create its children whatever the ACL, and gets
// its own once the whole subtree is there.
func (c *copier) setACLs() error {
	paths := make([]string, 0, len(c.acls))
	for p := range c.acls {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := c.op(func(ctx context.Context) error { _, err := c.cl.SetACL(ctx, p, c.acls[p], -1); return err }); err != nil {
			return fmt.Errorf("copy: setting the ACL of %s: %w", p, err)
		}
		c.aclsSet++
	}
	return nil
}

// op runs one coordd operation within --timeout.
func (c *copier) op(f func(ctx context.Context) error) error {
	ctx, cancel := c.x.deadline()
	defer cancel()
	return f(ctx)
}

// ancestors creates the missing ancestors of the destination, empty.
func (c *copier) ancestors() error {
	var missing []string
	for p := path.Dir(c.dst); p != "/" && c.dst != "/"; p = path.Dir(p) {
		missing = append([]string{p}, missing...)
	}
	for _, p := range missing {
		err := c.op(func(ctx context.Context) error {
			_, err := c.cl.Create(ctx, p, nil, client.CreateMode{})
			return err
		})
		if err != nil && !errors.Is(err, client.ErrNodeExists) {
			return fmt.Errorf("copy: creating %s: %w", p, err)
		}
	}
	return nil
}

// target maps a source path to its coordd path.
func (c *copier) target(p string) string {
	rel := strings.TrimPrefix(p, c.src)
	if c.src == "/" {
		rel = p
	}
	if c.dst == "/" {
		return path.Clean("/" + rel)
	}
	return c.dst + strings.TrimSuffix(rel, "/")
}

// copyWorkers is how many nodes are copied at once: each copy waits for a
// write to commit, and concurrent writes share the cost of committing.
const copyWorkers = 16

// walk copies the subtree: a node is queued once its parent is copied,
// and copyWorkers workers copy the queued nodes.
func (c *copier) walk() error {
	q := newWorkQueue(c.src)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var first error
	for range copyWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p, ok := q.pop()
				if !ok {
					return
				}
				kids, err := c.copyNode(p)
				if err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					q.stop()
				}
				q.push(kids...)
				q.done()
			}
		}()
	}
	wg.Wait()
	if first == nil && c.x.ctx.Err() != nil {
		first = c.x.ctx.Err()
	}
	return first
}

// copyNode copies the node at source path p and returns its children's
// paths (none for a node that is not to be copied).
func (c *copier) copyNode(p string) ([]string, error) {
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return nil, nil
	}
	if err := c.x.ctx.Err(); err != nil {
		return nil, err
	}
	data, st, err := c.zc.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil // deleted at the source meanwhile
	}
	if err != nil {
		return nil, sourceError("reading", p, err)
	}
	if st.EphemeralOwner != 0 {
		c.count(&c.ephemeral)
		return nil, nil // an ephemeral has no children
	}
	acl, err := c.sourceACL(p)
	if err != nil {
		return nil, err
	}
	if err := c.put(p, data, acl); err != nil {
		return nil, err
	}
	kids, _, err := c.zc.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, sourceError("listing", p, err)
	}
	sort.Strings(kids)
	out := make([]string, len(kids))
	for i, k := range kids {
		out[i] = path.Join(p, k)
	}
	return out, nil
}

// count adds one to a counter of the copy.
func (c *copier) count(n *int) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

// workQueue holds the nodes to copy; it is finished when nothing is
// queued and no node is being copied (one being copied may queue more).
type workQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	items   []string
	pending int // queued or being copied
	stopped bool
}

func newWorkQueue(first string) *workQueue {
	q := &workQueue{items: []string{first}, pending: 1}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *workQueue) push(items ...string) {
	q.mu.Lock()
	q.items = append(q.items, items...)
	q.pending += len(items)
	q.mu.Unlock()
	q.cond.Broadcast()
}

// pop takes a node to copy; false when the copy is finished or stopped.
func (q *workQueue) pop() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && q.pending > 0 && !q.stopped {
		q.cond.Wait()
	}
	if q.stopped || len(q.items) == 0 {
		return "", false
	}
	p := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return p, true
}

// done says a popped node is copied (its children pushed).
func (q *workQueue) done() {
	q.mu.Lock()
	q.pending--
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *workQueue) stop() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// sourceError reports a failed read of the source; a refusal (NoAuth) says
// how to get past it.
func sourceError(what, p string, err error) error {
	msg := fmt.Sprintf("copy: %s %s from ZooKeeper: %v", what, p, err)
	if errors.Is(err, zk.ErrNoAuth) {
		return &cliError{code: "NoAuth", status: 1, msg: msg + " (give copy an identity allowed to read it: --from-auth SCHEME:CREDENTIALS)"}
	}
	return errors.New(msg)
}

// sourceACL reads the ACL of source node p; nil when it is open (world:
// anyone with every permission, what a node created without one gets).
func (c *copier) sourceACL(p string) ([]client.ACL, error) {
	zacl, _, err := c.zc.GetACL(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, sourceError("reading the ACL of", p, err)
	}
	if len(zacl) == 1 && zacl[0].Scheme == "world" && zacl[0].ID == "anyone" && client.Perm(zacl[0].Perms) == client.PermAll {
		return nil, nil
	}
	acl := make([]client.ACL, 0, len(zacl))
	for _, a := range zacl {
		if a.Scheme == "digest" && strings.HasSuffix(a.ID, ":x") {
			return nil, &cliError{code: "NoAuth", status: 1, msg: fmt.Sprintf("copy: ZooKeeper shows the ACL of %s with its digests hidden (%s): copy as an identity with ADMIN on it, or the super user (--from-auth)", p, a.ID)}
		}
		acl = append(acl, client.ACL{Perms: client.Perm(a.Perms), Scheme: a.Scheme, ID: a.ID})
	}
	return acl, nil
}

// put creates one node in coordd, open, or handles the conflict; acl (nil:
// open) is the ACL setACLs gives it at the end.
func (c *copier) put(src string, data []byte, acl []client.ACL) error {
	dst := c.target(src)
	if dst == "/" {
		return nil // the root is there already; its own data is not copied
	}
	parent := path.Dir(dst)
	if n, ok := sequenceOf(path.Base(dst)); ok {
		c.mu.Lock()
		if cur, seen := c.seqs[parent]; !seen || n > cur {
			c.seqs[parent] = n
		}
		c.mu.Unlock()
	}
	err := c.op(func(ctx context.Context) error {
		_, err := c.cl.Create(ctx, dst, data, client.CreateMode{})
		return err
	})
	switch {
	case err == nil:
		c.count(&c.copied)
		c.setACLLater(dst, acl, false)
		return nil
	case !errors.Is(err, client.ErrNodeExists):
		return fmt.Errorf("copy: creating %s: %w", dst, err)
	}
	c.count(&c.existing)
	switch c.conflict {
	case "skip":
		return nil
	case "overwrite":
		c.setACLLater(dst, acl, true)
		var cur []byte
		err := c.op(func(ctx context.Context) (err error) { cur, _, err = c.cl.Get(ctx, dst); return err })
		if err != nil {
			return fmt.Errorf("copy: reading %s: %w", dst, err)
		}
		if string(cur) == string(data) {
			return nil
		}
		if err := c.op(func(ctx context.Context) error { _, err := c.cl.Set(ctx, dst, data, -1); return err }); err != nil {
			return fmt.Errorf("copy: overwriting %s: %w", dst, err)
		}
		c.count(&c.overwritten)
		return nil
	}
	return fmt.Errorf("copy: %s: %w (run again with --on-conflict skip to resume, or overwrite to replace data)", dst, err)
}

// setACLLater records that dst gets acl once the copy is done. A node the
// copy created is open already; one it overwrites gets the source's ACL,
// open or not.
func (c *copier) setACLLater(dst string, acl []client.ACL, existed bool) {
	if acl == nil && !existed {
		return
	}
	if acl == nil {
		acl = client.OpenACL()
	}
	c.mu.Lock()
	c.acls[dst] = acl
	c.mu.Unlock()
}

// sequenceOf returns the sequence number a name ends with (ten digits, as
// ZooKeeper appends them).
func sequenceOf(name string) (int64, bool) {
	if len(name) < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[len(name)-10:], 10, 64)
	if err != nil || strings.ContainsAny(name[len(name)-10:], "+-") {
		return 0, false
	}
	return n, true
}

// raiseCounters makes each parent's next sequential create number higher
// than any copied under it: coordd numbers a parent's sequential children
// by the count of children ever created there, which the copy did not
// bring along. A create and a delete of a scratch child raise it by one;
// they go in multis of many.
func (c *copier) raiseCounters() error {
	parents := make([]string, 0, len(c.seqs))
	for p := range c.seqs {
		parents = append(parents, p)
	}
	sort.Strings(parents)
	for _, parent := range parents {
		want := c.seqs[parent] + 1 // the next number must be past the highest
		probe := path.Join(parent, ".coordctl-copy-seq-")
		var name string
		if err := c.op(func(ctx context.Context) (err error) {
			name, err = c.cl.Create(ctx, probe, nil, client.CreateMode{Sequential: true})
			return err
		}); err != nil {
			return fmt.Errorf("copy: raising the sequence counter of %s: %w", parent, err)
		}
		if err := c.op(func(ctx context.Context) error { return c.cl.Delete(ctx, name, -1) }); err != nil {
			return fmt.Errorf("copy: raising the sequence counter of %s: %w", parent, err)
		}
		cur, _ := sequenceOf(name)
		need := want - (cur + 1)
		if need <= 0 {
			continue
		}
		if need > c.maxBump {
			c.warnings = append(c.warnings, fmt.Sprintf("%s: the sequence counter is %d, below the highest copied number %d; raising it would take %d creates (more than --max-seq-raise): sequential creates there may meet existing names", parent, cur+1, want-1, need))
			continue
		}
		scratch := path.Join(parent, ".coordctl-copy-seq")
		for need > 0 {
			batch := min(need, 500)
			ops := make([]client.Op, 0, 2*batch)
			for range batch {
				ops = append(ops, client.CreateOp(scratch, nil, client.CreateMode{}), client.DeleteOp(scratch, -1))
			}
			if err := c.op(func(ctx context.Context) error { _, err := c.cl.Multi(ctx, ops...); return err }); err != nil {
				return fmt.Errorf("copy: raising the sequence counter of %s: %w", parent, err)
			}
			need -= batch
		}
		c.raised++
	}
	return nil
}
