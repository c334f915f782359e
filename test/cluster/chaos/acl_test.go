package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/tlsutil"
)

var flagACL = flag.Bool("chaos.acl", false, "protect every workload node with an ACL: workload clients authenticate (addAuth digest) first, checkers use the --superdigest user, and an unauthenticated observer checks it is refused and sees no event of a protected node")

// The run's credentials. The workloads' user owns every node; super is the
// servers' --superdigest; the observer has neither.
const (
	aclUser, aclPassword     = "chaos", "chaos-secret"
	superUser, superPassword = "super", "chaos-super"
)

// protectedRoots are the workloads' subtrees: with -chaos.acl every node in
// them grants nothing to a session without the workloads' identity.
var protectedRoots = []string{"/reg", "/zkc", "/seqset", "/lock", "/sess", "/watch"}

// protectedPath reports whether p is in a protected subtree.
func protectedPath(p string) bool {
	for _, r := range protectedRoots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// openDir is the one subtree the observer may read: an authenticated
// ticker changes it, so that the observer's watch is seen to work.
const openDir, openTick = "/open", "/open/tick"

// clusterACL is a run's access control: the servers' super digest, and,
// with TLS, the observer's own client certificate (the workloads'
// certificate is an x509 identity that their auth ACLs name).
type clusterACL struct {
	observerTLS *tls.Config
}

// enableACL makes c's servers run with a super user and every workload
// client authenticate. Call it after enableTLS.
func (c *procCluster) enableACL() error {
	ca := &clusterACL{}
	if c.tls != nil {
		now := time.Now().Add(-time.Minute)
		certPEM, keyPEM, err := c.tls.ca.Issue(tlsutil.Request{Kind: tlsutil.ClientCert, Name: "chaos-observer", NotBefore: now, NotAfter: now.Add(24 * time.Hour)})
		if err != nil {
			return fmt.Errorf("acl: observer certificate: %w", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return fmt.Errorf("acl: observer certificate: %w", err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(c.tls.ca.CertPEM)
		ca.observerTLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	c.acl = ca
	return nil
}

// aclFlags are every server's access-control flags.
func (c *procCluster) aclFlags() []string {
	if c.acl == nil {
		return nil
	}
	return []string{"--superdigest", client.Digest(superUser, superPassword)}
}

// dataACL is the ACL of the workloads' persistent nodes: everything for
// the workloads' digest user (nil without -chaos.acl: the open ACL).
func (e *env) dataACL() []client.ACL {
	if e.c.acl == nil {
		return nil
	}
	return client.DigestACL(client.PermAll, aclUser, aclPassword)
}

// creatorACL is the ACL of the nodes a workload creates as it runs
// (sequential nodes, ephemerals, lock nodes): the auth scheme, everything
// for the identities of the creating session (its digest user and, with
// TLS, its certificate's subject).
func (e *env) creatorACL() []client.ACL {
	if e.c.acl == nil {
		return nil
	}
	return client.CreatorAll()
}

// identity says who a client authenticates as.
type identity int

const (
	asWorkload  identity = iota // the workloads' digest user (none without -chaos.acl)
	asSuper                     // the super user (checkers)
	asAnonymous                 // no addAuth; with TLS, the observer's certificate
)

// authenticate adds the digest identity to cl's session, retrying what may
// not have applied (adding it twice changes nothing). It happens once per
// session: the identity is replicated with it and holds after every move.
func authenticate(ctx context.Context, cl *client.Client, user, password string) error {
	var err error
	for i := 0; i < 40 && ctx.Err() == nil; i++ {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		err = cl.AddAuth(octx, "digest", []byte(user+":"+password))
		cancel()
		if err == nil || errors.Is(err, client.ErrAuthFailed) || ended(err) {
			return err
		}
		sleep(ctx, 250*time.Millisecond)
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// helperAuthEnv carries the workloads' credentials to a helper process.
const helperAuthEnv = "COORDD_CHAOS_AUTH"

// helperAuthEnv is what a helper process needs to authenticate.
func (c *procCluster) helperAuthEnv() []string {
	if c.acl == nil {
		return nil
	}
	return []string{helperAuthEnv + "=" + aclUser + ":" + aclPassword}
}

// helperAuth authenticates a helper process's client from its environment
// and returns the ACL its ephemeral gets (nil: open).
func helperAuth(ctx context.Context, cl *client.Client) ([]client.ACL, error) {
	cred := os.Getenv(helperAuthEnv)
	if cred == "" {
		return nil, nil
	}
	user, password, _ := strings.Cut(cred, ":")
	if err := authenticate(ctx, cl, user, password); err != nil {
		return nil, fmt.Errorf("addAuth: %w", err)
	}
	return client.CreatorAll(), nil
}

// aclWork checks access control under faults, beside the other workloads
// (which all run authenticated, so that any refusal of theirs — an identity
// lost in a move between servers — shows on their streams):
//
//   - an unauthenticated observer, over gRPC and over ZooKeeper's protocol
//     (go-zookeeper), reads and writes protected nodes in every way and
//     must be refused with NoAuth each time (an indeterminate outcome is
//     counted, never a success);
//   - the gRPC observer's stream never carries an event about a protected
//     node, though it holds a recursive watch on / and exists watches on
//     nodes the workloads create later (ephemerals of killed clients), and
//     moves between servers like everyone; the go-zookeeper observer's
//     exists watches on those nodes never fire either. A ticker changes an
//     open node, whose events the gRPC observer must receive;
//   - an authenticated prober reads a protected node all along, and after
//     each move of its session to another server finds its identity there
//     (whoAmI), without sending it again;
//   - at the end, a super session finds every protected node's ACL as set.
type aclWork struct {
	e    *env
	seed int64
	ses  *sessionsWork // whose killed clients' ephemerals the observers watch for
	cnt  counters      // observer probes: ok refused, fail leaked, indet unknown

	tickEvents atomic.Int64 // observer's events of the open node
	tickWrites atomic.Int64
	absent     atomic.Int64 // probes that found no node (NoNode, exists false)
	zkProbes   atomic.Int64
	zkWatches  atomic.Int64
	moves      atomic.Int64 // prober's session moves, identity checked after each
	proberOK   atomic.Int64
	watchesSet atomic.Int64

	mu       sync.Mutex
	problems []string
	watched  map[string]bool // paths of ephemerals to come with an exists watch
}

func newACLWork(e *env, seed int64, ses *sessionsWork) *aclWork {
	return &aclWork{e: e, seed: seed, ses: ses, watched: map[string]bool{}}
}

// futureEphemeral names an ephemeral the sessions workload will create
// soon (one of its next killed clients'), not watched yet by anyone here;
// "" if the next few are all watched.
func (a *aclWork) futureEphemeral(rng *rand.Rand) string {
	a.ses.mu.Lock()
	next := len(a.ses.dead)
	a.ses.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := 0; i < 3; i++ {
		p := fmt.Sprintf("/sess/dead-%d", next+1+rng.IntN(3))
		if !a.watched[p] {
			a.watched[p] = true
			return p
		}
	}
	return ""
}

func (a *aclWork) name() string        { return "acl" }
func (a *aclWork) counters() *counters { return &a.cnt }

func (a *aclWork) problem(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.problems) < 100 {
		a.problems = append(a.problems, fmt.Sprintf(format, args...))
	}
}

// setup creates the open node the ticker changes (open ACL).
func (a *aclWork) setup(ctx context.Context, cl *client.Client) error {
	if err := createAll(ctx, cl, openTick, nil); err != nil {
		return err
	}
	return nil
}

func (a *aclWork) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range []func(context.Context){a.observer, a.zkObserver, a.ticker, a.prober} {
		wg.Add(1)
		go func(f func(context.Context)) { defer wg.Done(); f(ctx) }(f)
	}
	wg.Wait()
}

// targets are the protected nodes the observers probe; deletable ones have
// a protected parent (deleting needs DELETE on the parent).
var aclTargets = []struct {
	path      string
	deletable bool
}{
	{"/reg", false}, {"/reg/k0", true}, {"/reg/k1", true}, {"/seqset", false},
	{"/lock", false}, {"/lock/log", true}, {"/sess", false}, {"/sess/live-0", true},
	{"/watch", false}, {"/watch/w0", true}, {"/watch/w1", true},
}

// refusal sorts the outcome of an observer's probe: refused (NoAuth),
// absent (NoNode), unknown (no definite answer), or a leak.
func (a *aclWork) refusal(what string, err error) {
	switch {
	case errors.Is(err, client.ErrNoAuth):
		a.cnt.ok.Add(1)
	case errors.Is(err, client.ErrNoNode):
		a.absent.Add(1)
	case err == nil:
		a.cnt.fail.Add(1)
		a.problem("observer (unauthenticated): %s SUCCEEDED on a protected node", what)
	case indeterminate(err):
		a.cnt.indet.Add(1)
	default:
		a.cnt.fail.Add(1)
		a.problem("observer (unauthenticated): %s answered %v, not NoAuth (an error checked before the ACL?)", what, err)
	}
}

// observer is the unauthenticated gRPC client.
func (a *aclWork) observer(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(a.seed), 6000))
	var cl *client.Client
	var future []<-chan client.Event // exists watches on ephemerals to come
	drainDone := make(chan struct{})
	close(drainDone)
	for n := 0; n < 200000 && ctx.Err() == nil; n++ {
		if cl == nil {
			<-drainDone
			c, _, err := a.e.newClientAs(ctx, "acl-observer", asAnonymous)
			if err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			ch, err := c.AddWatch(octx, "/", client.WatchPersistentRecursive)
			cancel()
			if err != nil {
				_ = c.Close(context.Background())
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			cl = c
			drainDone = make(chan struct{})
			go func() {
				defer close(drainDone)
				for ev := range ch {
					switch {
					case ev.Type == client.EventNotWatching:
						return
					case protectedPath(ev.Path):
						// Also caught on the wire; here it says which watch.
						a.problem("observer's recursive watch on / delivered %v %s (zxid %d), a node it may not read", ev.Type, ev.Path, ev.Zxid)
					case ev.Path == openTick:
						a.tickEvents.Add(1)
					}
				}
			}()
		}
		tg := aclTargets[rng.IntN(len(aclTargets))]
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		var err error
		what := ""
		switch op := rng.IntN(13); op {
		case 0:
			what = "getData " + tg.path
			_, _, err = cl.Get(octx, tg.path)
		case 1:
			what = "getData with a watch " + tg.path
			_, _, _, err = cl.GetW(octx, tg.path)
		case 2:
			what = "getChildren " + tg.path
			_, _, err = cl.Children(octx, tg.path)
		case 3:
			what = "getChildren with a watch " + tg.path
			_, _, _, err = cl.ChildrenW(octx, tg.path)
		case 4:
			what = "exists " + tg.path
			var ok bool
			_, ok, err = cl.Exists(octx, tg.path)
			if err == nil && !ok {
				err = client.ErrNoNode // an absent node: nothing to refuse
			}
		case 5:
			what = "getACL " + tg.path
			_, _, err = cl.GetACL(octx, tg.path)
		case 6:
			what = "setData " + tg.path
			_, err = cl.Set(octx, tg.path, []byte("observer"), -1)
		case 7:
			what = "create under " + tg.path
			_, err = cl.Create(octx, fmt.Sprintf("%s/observer-%d", tg.path, n), nil, client.CreateMode{})
		case 8:
			if !tg.deletable {
				what = "sync+getData " + tg.path
				_, _, err = cl.SyncGet(octx, tg.path)
				break
			}
			what = "delete " + tg.path
			err = cl.Delete(octx, tg.path, -1)
		case 9:
			what = "setACL " + tg.path
			_, err = cl.SetACL(octx, tg.path, client.OpenACL(), -1)
		case 10:
			what = "multi(check, setData) " + tg.path
			_, err = cl.Multi(octx, client.CheckOp(tg.path, -1), client.SetOp(tg.path, []byte("observer"), -1))
		default:
			// An exists watch on an ephemeral a killed client will create
			// later: its creation and deletion must not be told.
			path := a.futureEphemeral(rng)
			if path == "" {
				cancel()
				continue
			}
			var ok bool
			var ch <-chan client.Event
			_, ok, ch, err = cl.ExistsW(octx, path)
			cancel()
			switch {
			case err == nil && ok:
				a.problem("observer: exists %s said it exists, without READ", path)
			case err == nil:
				a.watchesSet.Add(1)
				future = append(future, ch)
			case errors.Is(err, client.ErrNoAuth):
				a.cnt.ok.Add(1) // it exists already: refused
			}
			if ended(err) {
				cl = nil
			}
			sleep(ctx, time.Duration(20+rng.IntN(40))*time.Millisecond)
			continue
		}
		cancel()
		a.refusal(what, err)
		if ended(err) {
			cl = nil
		}
		sleep(ctx, time.Duration(20+rng.IntN(40))*time.Millisecond)
	}
	for _, ch := range future {
		select {
		case ev, ok := <-ch:
			if ok && ev.Type != client.EventNotWatching {
				a.problem("observer's exists watch delivered %v %s (zxid %d), a node it may not read", ev.Type, ev.Path, ev.Zxid)
			}
		default:
		}
	}
	if cl != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_ = cl.Close(cctx)
		cancel()
	}
	<-drainDone
}

// zkObserver probes the same nodes through ZooKeeper's protocol with an
// unchanged ZooKeeper client, unauthenticated, and holds exists watches on
// ephemerals to come (go-zookeeper sends them again with setWatches after
// each reconnect).
func (a *aclWork) zkObserver(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(a.seed), 6100))
	var conn *zk.Conn
	stopClose := func() bool { return false }
	var futures []<-chan zk.Event
	defer func() {
		if conn != nil {
			stopClose()
			conn.Close()
		}
		for _, ch := range futures {
			select {
			case ev, ok := <-ch:
				if ok && ev.Type != zk.EventNotWatching && ev.Type != zk.EventSession {
					a.problem("zk observer's exists watch delivered %v %s, a node it may not read", ev.Type, ev.Path)
				}
			default:
			}
		}
	}()
	for n := 0; n < 200000 && ctx.Err() == nil; n++ {
		if conn == nil {
			c, _, err := zk.Connect(a.e.c.servers(), workloadSessionTimeout, zkObserverOptions(a.e.c, zk.WithLogInfo(false), zk.WithLogger(zkQuietLogger{}))...)
			if err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			conn = c
			stopClose = context.AfterFunc(ctx, c.Close)
		}
		tg := aclTargets[rng.IntN(len(aclTargets))]
		var err error
		what := ""
		switch rng.IntN(7) {
		case 0:
			what = "getData " + tg.path
			_, _, err = conn.Get(tg.path)
		case 1:
			what = "setData " + tg.path
			_, err = conn.Set(tg.path, []byte("zk-observer"), -1)
		case 2:
			what = "getChildren " + tg.path
			_, _, err = conn.Children(tg.path)
		case 3:
			what = "getACL " + tg.path
			_, _, err = conn.GetACL(tg.path)
		case 4:
			what = "create under " + tg.path
			_, err = conn.Create(fmt.Sprintf("%s/zk-observer-%d", tg.path, n), nil, 0, zk.WorldACL(zk.PermAll))
		case 5:
			what = "delete " + tg.path
			if !tg.deletable {
				what = "setACL " + tg.path
				_, err = conn.SetACL(tg.path, zk.WorldACL(zk.PermAll), -1)
				break
			}
			err = conn.Delete(tg.path, -1)
		default:
			path := a.futureEphemeral(rng)
			if path == "" {
				continue
			}
			ok, _, ch, err := conn.ExistsW(path)
			switch {
			case err == nil && ok:
				a.problem("zk observer: exists %s said it exists, without READ", path)
			case err == nil:
				a.zkWatches.Add(1)
				futures = append(futures, ch)
			}
			if errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionExpired) {
				stopClose()
				conn.Close()
				conn = nil
			}
			sleep(ctx, time.Duration(20+rng.IntN(40))*time.Millisecond)
			continue
		}
		a.zkProbes.Add(1)
		switch {
		case errors.Is(err, zk.ErrNoAuth):
			a.cnt.ok.Add(1)
		case errors.Is(err, zk.ErrNoNode):
			a.absent.Add(1)
		case err == nil:
			a.cnt.fail.Add(1)
			a.problem("zk observer (unauthenticated): %s SUCCEEDED on a protected node", what)
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrInvalidACL):
			a.cnt.fail.Add(1)
			a.problem("zk observer (unauthenticated): %s answered %v, not NoAuth", what, err)
		default:
			a.cnt.indet.Add(1)
		}
		if errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionExpired) {
			stopClose()
			conn.Close()
			conn = nil
		}
		sleep(ctx, time.Duration(20+rng.IntN(40))*time.Millisecond)
	}
}

// ticker changes the open node, authenticated like any workload.
func (a *aclWork) ticker(ctx context.Context) {
	var cl *client.Client
	for n := 0; n < 100000 && ctx.Err() == nil; n++ {
		if cl == nil {
			var err error
			if cl, _, err = a.e.newClient(ctx, "acl-ticker"); err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		_, err := cl.Set(octx, openTick, []byte(fmt.Sprint(n)), -1)
		cancel()
		if err == nil {
			a.tickWrites.Add(1)
		}
		if ended(err) {
			cl = nil
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// prober is an authenticated client that reads a protected node all along
// and, after every move of its session, checks that its identity came
// along (it never sends it again).
func (a *aclWork) prober(ctx context.Context) {
	var cl *client.Client
	server := ""
	for n := 0; n < 100000 && ctx.Err() == nil; n++ {
		if cl == nil {
			var err error
			if cl, _, err = a.e.newClient(ctx, "acl-prober"); err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			server = cl.Server()
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		_, _, err := cl.Get(octx, "/reg/k0")
		if err == nil {
			a.proberOK.Add(1)
			if now := cl.Server(); now != server && now != "" {
				ids, werr := cl.WhoAmI(octx)
				if werr == nil {
					if !hasDigest(ids, aclUser) {
						a.problem("prober (session %#x) moved from %s to %s: whoAmI says %v, without its digest identity", cl.SessionID(), server, now, ids)
					} else {
						a.moves.Add(1)
					}
					server = now
				}
			}
		} else if errors.Is(err, client.ErrNoAuth) {
			a.problem("prober (session %#x, authenticated, on %s): getData /reg/k0 refused: %v", cl.SessionID(), cl.Server(), err)
		}
		cancel()
		if ended(err) {
			cl = nil
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

func hasDigest(ids []client.Identity, user string) bool {
	for _, id := range ids {
		if id.Scheme == "digest" && id.ID == user {
			return true
		}
	}
	return false
}

// check gathers the observers' findings and the streams' (no event about
// a protected node on the observer's, no NoAuth on anyone else's), and
// reads every protected node's ACL as the super user.
func (a *aclWork) check(ctx context.Context, cl *client.Client, v *verdict) {
	a.mu.Lock()
	for _, p := range a.problems {
		v.failf("%s", p)
	}
	a.mu.Unlock()
	a.e.mu.Lock()
	obs := append([]*zxObserver(nil), a.e.observers...)
	a.e.mu.Unlock()
	var refusedElsewhere, leaks, anonEvents, authMoves int64
	for _, o := range obs {
		o.mu.Lock()
		for _, l := range o.leaks {
			v.failf("%s", l)
		}
		leaks += int64(len(o.leaks))
		if o.anonymous {
			anonEvents += o.events
		} else {
			authMoves += int64(max(o.streams-1, 0))
			refusedElsewhere += o.noAuth
			for _, x := range o.noAuthSeen {
				v.failf("authenticated client refused: %s", x)
			}
		}
		o.mu.Unlock()
	}
	a.e.mu.Lock()
	for _, p := range a.e.authProblems {
		v.failf("%s", p)
	}
	a.e.mu.Unlock()
	want := client.DigestACL(client.PermAll, aclUser, aclPassword)[0]
	checked := 0
	for _, tg := range aclTargets {
		if strings.HasPrefix(tg.path, "/sess/") {
			continue // an ephemeral: gone with a session that expired
		}
		acl, st, err := cl.GetACL(ctx, tg.path)
		if err != nil {
			v.failf("super getACL %s: %v", tg.path, err)
			continue
		}
		checked++
		if len(acl) != 1 || acl[0] != want || st.Aversion != 0 {
			v.failf("%s: ACL %v (aversion %d), want %v as set up", tg.path, acl, st.Aversion, want)
		}
	}
	if kids, _, err := cl.Children(ctx, "/seqset"); err == nil && len(kids) > 0 {
		p := "/seqset/" + kids[0]
		if acl, _, err := cl.GetACL(ctx, p); err != nil || !containsACL(acl, want) {
			v.failf("%s: ACL %v (%v), want the creator's (auth scheme), digest %s among them", p, acl, err, aclUser)
		}
		checked++
	}
	v.notef("observers: %s probes (gRPC and %d over ZooKeeper's protocol; ok = refused with NoAuth), %d found no node; %d exists watches on ephemerals to come (%d over ZooKeeper's protocol), none fired",
		&a.cnt, a.zkProbes.Load(), a.absent.Load(), a.watchesSet.Load()+a.zkWatches.Load(), a.zkWatches.Load())
	v.notef("observer's stream: %d events, %d of the open node (of %d writes), %d about protected nodes; %d NoAuth answers to authenticated clients (whose sessions moved %d times)",
		anonEvents, a.tickEvents.Load(), a.tickWrites.Load(), leaks, refusedElsewhere, authMoves)
	v.notef("prober: %d reads of a protected node, %d session moves with its identity found on the new server (never sent again); super read %d ACLs as set up",
		a.proberOK.Load(), a.moves.Load(), checked)
	if a.cnt.ok.Load() == 0 {
		v.failf("the observers were never refused: no probe got an answer")
	}
	if a.tickWrites.Load() > 5 && a.tickEvents.Load() == 0 {
		v.failf("the observer's recursive watch on / saw none of the open node's %d changes: the watch check proves nothing", a.tickWrites.Load())
	}
}

func containsACL(acl []client.ACL, want client.ACL) bool {
	for _, x := range acl {
		if x == want {
			return true
		}
	}
	return false
}

// zkObserverOptions are the go-zookeeper observer's options: with TLS, the
// observer's own certificate. (Generic, as zkOptions.)
func zkObserverOptions[O ~func(*zk.Conn)](c *procCluster, opts ...O) []O {
	if c.tls != nil {
		cfg := c.acl.observerTLS
		opts = append(opts, O(zk.WithDialer(func(network, addr string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
		})))
	}
	return opts
}

// authProblem records a refusal of an authenticated request.
func (e *env) authProblem(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.authProblems) < 20 {
		e.authProblems = append(e.authProblems, fmt.Sprintf(format, args...))
	}
}

// zkAuthenticate adds the workloads' identity to a go-zookeeper
// connection's session, with -chaos.acl.
func zkAuthenticate(e *env, c *zk.Conn) error {
	if e.c.acl == nil {
		return nil
	}
	return c.AddAuth("digest", []byte(aclUser+":"+aclPassword))
}
