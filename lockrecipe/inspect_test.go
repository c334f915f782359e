package lockrecipe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// describe is a Contenders in short: "H:<kind>@<session> ... | W:..." in
// queue order, for comparisons.
func describe(cs lockrecipe.Contenders, names map[int64]string) string {
	var b strings.Builder
	for _, h := range cs.Holders {
		fmt.Fprintf(&b, "H:%s@%s ", h.Kind, names[h.Session])
	}
	b.WriteString("|")
	for _, w := range cs.Waiting {
		fmt.Fprintf(&b, " W:%s@%s", w.Kind, names[w.Session])
	}
	return b.String()
}

// waitInspect polls Inspect until it reads want.
func waitInspect(t *testing.T, c *client.Client, path string, names map[int64]string, want string) lockrecipe.Contenders {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs, err := lockrecipe.Inspect(ctxT(t), c, path)
		if err != nil {
			t.Fatal(err)
		}
		got := describe(cs, names)
		if got == want {
			return cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect(%s) = %q, want %q", path, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInspectMutex: the holder, with its token, then the waiters in the
// order they came; a missing path has no contenders; a bad path is refused.
func TestInspectMutex(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	look := connect(t, c.Servers()...)
	if cs, err := lockrecipe.Inspect(ctx, look, "/nothing"); err != nil || len(cs.Holders)+len(cs.Waiting) != 0 {
		t.Fatalf("a missing path: %+v, %v", cs, err)
	}
	if _, err := lockrecipe.Inspect(ctx, look, "no/slash"); !errors.Is(err, client.ErrBadArguments) {
		t.Fatalf("a bad path: %v, want ErrBadArguments", err)
	}
	names := map[int64]string{}
	var mus []*lockrecipe.Mutex
	for i, name := range []string{"a", "b", "c"} {
		s := session(t, c.Servers()...)
		names[s.Client().SessionID()] = name
		m := lockrecipe.NewMutex(s, "/locks/m")
		mus = append(mus, m)
		if i == 0 {
			if _, err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		go func() { _, _ = m.Lock(ctx) }()
		want := "H:lock@a |"
		for _, n := range []string{"b", "c"}[:i] {
			want += " W:lock@" + n
		}
		waitInspect(t, look, "/locks/m", names, want)
	}
	cs := waitInspect(t, look, "/locks/m", names, "H:lock@a | W:lock@b W:lock@c")
	if cs.Holders[0].Token != mus[0].Token() || cs.Holders[0].Created.IsZero() || !strings.HasSuffix(mus[0].Node(), cs.Holders[0].Node) {
		t.Errorf("holder %+v, want token %d and node %s", cs.Holders[0], mus[0].Token(), mus[0].Node())
	}
	if err := mus[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitInspect(t, look, "/locks/m", names, "H:lock@b | W:lock@c")
}

// TestInspectRWMutexAndSemaphore: readers ahead of the first writer hold
// together; a semaphore's leases hold, its queued head waits first.
func TestInspectRWMutexAndSemaphore(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	look := connect(t, c.Servers()...)
	names := map[int64]string{}
	sess := func(name string) *lockrecipe.Session {
		s := session(t, c.Servers()...)
		names[s.Client().SessionID()] = name
		return s
	}
	r1, r2, w := lockrecipe.NewRWMutex(sess("r1"), "/rw"), lockrecipe.NewRWMutex(sess("r2"), "/rw"), lockrecipe.NewRWMutex(sess("w"), "/rw")
	for _, r := range []*lockrecipe.RWMutex{r1, r2} {
		if _, err := r.RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _, _ = w.Lock(ctx) }()
	waitInspect(t, look, "/rw", names, "H:read@r1 H:read@r2 | W:write@w")

	s1, s2, s3 := lockrecipe.NewSemaphore(sess("s1"), "/sem", 1), lockrecipe.NewSemaphore(sess("s2"), "/sem", 1), lockrecipe.NewSemaphore(sess("s3"), "/sem", 1)
	if _, err := s1.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = s2.Acquire(ctx) }()
	waitInspect(t, look, "/sem", names, "H:lease@s1 | W:lease@s2")
	go func() { _, _ = s3.Acquire(ctx) }()
	cs := waitInspect(t, look, "/sem", names, "H:lease@s1 | W:lease@s2 W:lock@s3")
	if !cs.Semaphore || !strings.HasPrefix(cs.Holders[0].Node, "leases/") || !strings.HasPrefix(cs.Waiting[1].Node, "lock/") {
		t.Errorf("semaphore contenders: %+v", cs)
	}
}

// TestWatchContendersFollowsHandoffs: WatchContenders reports each handoff
// of a lock and each value an election's leader proclaims, as they happen,
// and stops when its context ends.
func TestWatchContendersFollowsHandoffs(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	look := connect(t, c.Servers()...)
	names := map[int64]string{}
	seen := make(chan string, 100)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- lockrecipe.WatchContenders(wctx, look, "/el", func(cs lockrecipe.Contenders) {
			d := describe(cs, names)
			if len(cs.Holders) > 0 {
				d += " " + string(cs.Holders[0].Data)
			}
			seen <- d
		})
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-seen:
			if got != want {
				t.Fatalf("reported %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing reported; want %q", want)
		}
	}
	next("|") // nobody yet, and the path does not exist
	var els []*lockrecipe.Election
	for _, name := range []string{"a", "b"} {
		s := session(t, c.Servers()...)
		names[s.Client().SessionID()] = name
		els = append(els, lockrecipe.NewElection(s, "/el"))
	}
	if err := els[0].Campaign(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	next("H:elect@a | one")
	go func() { _ = els[1].Campaign(ctx, "two") }()
	next("H:elect@a | W:elect@b one")
	if err := els[0].Proclaim(ctx, "uno"); err != nil {
		t.Fatal(err)
	}
	next("H:elect@a | W:elect@b uno")
	if err := els[0].Resign(ctx); err != nil {
		t.Fatal(err)
	}
	next("H:elect@b | two")
	stop()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WatchContenders returned %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchContenders did not return when its context ended")
	}
}
