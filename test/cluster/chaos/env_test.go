package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/apipb"
)

// env is what every workload shares.
type env struct {
	c      *procCluster
	start  time.Time
	tl     *timeline
	outDir string
	logf   func(string, ...any)

	mu        sync.Mutex
	observers []*zxObserver
	clients   []*client.Client
	// authProblems are refusals of authenticated requests that no
	// zxObserver sees (ZooKeeper's protocol), with -chaos.acl.
	authProblems []string
}

// since is the run time now.
func (e *env) since() time.Duration { return time.Since(e.start) }

// opTimeout bounds one client call: longer than a failover, so that most
// calls made during a fault still get a definite answer.
const opTimeout = 5 * time.Second

// workloadSessionTimeout is the timeout every workload client asks for.
const workloadSessionTimeout = 6 * time.Second

// newClient connects a workload client whose stream is observed for the
// per-session order check; with -chaos.acl it authenticates as the
// workloads' user first.
func (e *env) newClient(ctx context.Context, name string) (*client.Client, *zxObserver, error) {
	return e.newClientAs(ctx, name, asWorkload)
}

// newAdminClient connects a checker's client: with -chaos.acl, the super
// user, who may read everything.
func (e *env) newAdminClient(ctx context.Context, name string) (*client.Client, *zxObserver, error) {
	return e.newClientAs(ctx, name, asSuper)
}

// newClientAs connects a client observed like newClient's, as who.
func (e *env) newClientAs(ctx context.Context, name string, who identity) (*client.Client, *zxObserver, error) {
	acl := e.c.acl != nil
	obs := &zxObserver{name: name, anonymous: acl && who == asAnonymous}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	opts := []client.Option{
		client.WithSessionTimeout(workloadSessionTimeout),
		client.WithDialTimeout(time.Second),
		client.WithDialOptions(grpc.WithStreamInterceptor(obs.intercept))}
	if obs.anonymous && e.c.tls != nil {
		opts = append(opts, client.WithTLS(e.c.acl.observerTLS))
	} else {
		opts = e.c.clientOptions(opts...)
	}
	cl, err := client.Connect(cctx, e.c.servers(), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", name, err)
	}
	if acl && who != asAnonymous {
		user, password := aclUser, aclPassword
		if who == asSuper {
			user, password = superUser, superPassword
		}
		if err := authenticate(cctx, cl, user, password); err != nil {
			closeCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_ = cl.Close(closeCtx)
			cancel()
			return nil, nil, fmt.Errorf("%s: addAuth digest %s: %w", name, user, err)
		}
	}
	obs.session = cl.SessionID()
	e.mu.Lock()
	e.observers = append(e.observers, obs)
	e.clients = append(e.clients, cl)
	e.mu.Unlock()
	return cl, obs, nil
}

// closeClients closes every client that newClient made.
func (e *env) closeClients() {
	e.mu.Lock()
	cls := e.clients
	e.clients = nil
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, cl := range cls {
		wg.Add(1)
		go func(cl *client.Client) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_ = cl.Close(ctx)
		}(cl)
	}
	wg.Wait()
}

// indeterminate says whether a write's error leaves its outcome unknown.
// Only definite server answers (BadVersion, NodeExists, NoNode, ...) are
// failures; everything else may or may not have been applied.
func indeterminate(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, client.ErrBadVersion), errors.Is(err, client.ErrNodeExists),
		errors.Is(err, client.ErrNoNode), errors.Is(err, client.ErrNotEmpty),
		errors.Is(err, client.ErrBadArguments), errors.Is(err, client.ErrNoChildrenForEphemerals):
		return false
	}
	return true
}

// ended says whether the client's session is gone (a new client is needed).
func ended(err error) bool {
	return errors.Is(err, client.ErrSessionExpired) || errors.Is(err, client.ErrClosed)
}

// counters are a workload's operation counts.
type counters struct{ ok, fail, indet atomic.Int64 }

func (c *counters) String() string {
	return fmt.Sprintf("ok %d, failed %d, indeterminate %d", c.ok.Load(), c.fail.Load(), c.indet.Load())
}

// verdict is a checker's result.
type verdict struct {
	pass         bool
	inconclusive bool
	notes        []string // always printed
	problems     []string // why it failed
}

func (v *verdict) failf(format string, args ...any) {
	v.pass = false
	if len(v.problems) < 50 {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	} else if len(v.problems) == 50 {
		v.problems = append(v.problems, "... (more problems elided)")
	}
}

func (v *verdict) notef(format string, args ...any) {
	v.notes = append(v.notes, fmt.Sprintf(format, args...))
}

// zxObserver watches one client's gRPC session streams and checks that
// the zxids it receives (connect responses, replies, watch events) never go
// backwards, across reconnections to other servers.
type zxObserver struct {
	name    string
	session int64

	mu         sync.Mutex
	streams    int
	last       int64
	lastWhat   string
	messages   int64
	stale      int64
	violations []string
	// Events received on a stream before its first reply: the ones the
	// server fires when it re-registers the watches of a resumed session.
	resuming bool
	resumed  map[string]bool // path@zxid

	// With -chaos.acl: an anonymous client's stream must carry no event
	// about a protected node (leaks); any other client's, no NoAuth.
	anonymous  bool
	events     int64
	leaks      []string
	noAuth     int64
	noAuthSeen []string
}

// checkACL looks at a message for what access control forbids; o.mu is
// held.
func (o *zxObserver) checkACL(target string, sm *apipb.ServerMessage) {
	switch k := sm.Kind.(type) {
	case *apipb.ServerMessage_Event:
		if !o.anonymous {
			return
		}
		o.events++
		if protectedPath(k.Event.Path) && len(o.leaks) < 20 {
			o.leaks = append(o.leaks, fmt.Sprintf("%s (session %#x, unauthenticated): event %v %s (zxid %d) from %s about a node it may not read",
				o.name, o.session, k.Event.Type, k.Event.Path, k.Event.Zxid, target))
		}
	case *apipb.ServerMessage_Response:
		if o.anonymous || k.Response.Error != apipb.ErrorCode_NO_AUTH {
			return
		}
		o.noAuth++
		if len(o.noAuthSeen) < 20 {
			o.noAuthSeen = append(o.noAuthSeen, fmt.Sprintf("%s (session %#x): reply xid %d from %s: NoAuth %s", o.name, o.session, k.Response.Xid, target, k.Response.Message))
		}
	}
}

// resumeEvent says whether the event was fired by a watch re-registration.
func (o *zxObserver) resumeEvent(path string, zxid int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.resumed[fmt.Sprintf("%s@%d", path, zxid)]
}

func (o *zxObserver) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return s, err
	}
	o.mu.Lock()
	o.streams++
	seq := o.streams
	o.mu.Unlock()
	return &obsStream{ClientStream: s, o: o, seq: seq, target: cc.Target()}, nil
}

type obsStream struct {
	grpc.ClientStream
	o      *zxObserver
	seq    int
	target string
}

func (s *obsStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		if sm, ok := m.(*apipb.ServerMessage); ok {
			s.o.observe(s.seq, s.target, sm)
		}
	}
	return err
}

func (o *zxObserver) observe(seq int, target string, sm *apipb.ServerMessage) {
	var z int64
	var what string
	switch k := sm.Kind.(type) {
	case *apipb.ServerMessage_Connected:
		z, what = k.Connected.Zxid, fmt.Sprintf("connect response from %s", target)
	case *apipb.ServerMessage_Response:
		z, what = k.Response.Zxid, fmt.Sprintf("reply xid %d (%T, error %v) from %s", k.Response.Xid, k.Response.Result, k.Response.Error, target)
	case *apipb.ServerMessage_Event:
		z, what = k.Event.Zxid, fmt.Sprintf("event %v %s from %s", k.Event.Type, k.Event.Path, target)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.messages++
	o.checkACL(target, sm)
	if seq != o.streams {
		// A message of a stream the client has already replaced: not part
		// of the session's current order.
		o.stale++
		return
	}
	if z == 0 {
		return
	}
	switch k := sm.Kind.(type) {
	case *apipb.ServerMessage_Connected:
		// The connect response states the server's applied index: it must
		// not be behind what the client has seen (single system image), but
		// the events that resuming fires may carry older zxids, so it does
		// not raise the bar.
		o.resuming = true
		if z < o.last && len(o.violations) < 20 {
			o.violations = append(o.violations, fmt.Sprintf("%s (session %#x): %s at zxid %d, behind the %d (%s) the client had seen",
				o.name, o.session, what, z, o.last, o.lastWhat))
		}
		return
	case *apipb.ServerMessage_Response:
		o.resuming = false
	case *apipb.ServerMessage_Event:
		if o.resuming {
			if o.resumed == nil {
				o.resumed = map[string]bool{}
			}
			o.resumed[fmt.Sprintf("%s@%d", k.Event.Path, z)] = true
		}
	}
	if z < o.last {
		if len(o.violations) < 20 {
			o.violations = append(o.violations, fmt.Sprintf("%s (session %#x): zxid went back from %d (%s) to %d (%s), stream #%d",
				o.name, o.session, o.last, o.lastWhat, z, what, seq))
		}
		return
	}
	o.last, o.lastWhat = z, what
}
