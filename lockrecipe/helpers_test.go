package lockrecipe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/test/cluster"
)

// server starts a single-node cluster for the test.
func server(t *testing.T) *cluster.Cluster {
	t.Helper()
	return cluster.New(t, 1, cluster.Options{})
}

func connect(t testing.TB, servers ...string) *client.Client {
	t.Helper()
	return connectWith(t, servers)
}

// connectWith connects a client with a 4s session and opts.
func connectWith(t testing.TB, servers []string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, servers, append([]client.Option{client.WithSessionTimeout(4 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("connect %v: %v", servers, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func session(t testing.TB, servers ...string) *lockrecipe.Session {
	t.Helper()
	return lockrecipe.NewSession(connect(t, servers...))
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recorder collects LockEvents.
type recorder struct {
	mu  sync.Mutex
	evs []lockrecipe.LockEvent
}

func (r *recorder) observe(ev lockrecipe.LockEvent) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) option() lockrecipe.Option { return lockrecipe.WithObserver(r.observe) }

func (r *recorder) count(k lockrecipe.LockEventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.evs {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// last returns the last event of kind k, if any.
func (r *recorder) last(k lockrecipe.LockEventKind) (lockrecipe.LockEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.evs) - 1; i >= 0; i-- {
		if r.evs[i].Kind == k {
			return r.evs[i], true
		}
	}
	return lockrecipe.LockEvent{}, false
}

func children(t testing.TB, c *client.Client, path string) []string {
	t.Helper()
	kids, _, err := c.Children(context.Background(), path)
	if err != nil && err != client.ErrNoNode {
		t.Fatalf("children %s: %v", path, err)
	}
	return kids
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// lockResult is the outcome of a Lock run in a goroutine.
type lockResult struct {
	tok lockrecipe.Token
	err error
}

func goLock(ctx context.Context, f func(context.Context) (lockrecipe.Token, error)) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		tok, err := f(ctx)
		ch <- lockResult{tok, err}
	}()
	return ch
}

func waitResult(t testing.TB, ch <-chan lockResult, what string) lockResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	return lockResult{}
}

// pending asserts that ch has no result yet.
func pending(t testing.TB, ch <-chan lockResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned early: %v %v", what, r.tok, r.err)
	default:
	}
}
