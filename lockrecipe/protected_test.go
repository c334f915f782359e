package lockrecipe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/test/cluster"
)

// lossErrors are the ways a create can fail without saying whether it
// applied.
var lossErrors = []error{
	context.DeadlineExceeded,
	fmt.Errorf("injected: %w", client.ErrConnectionLoss),
	fmt.Errorf("injected: %w", client.ErrOperationTimeout),
}

// TestLostCreateReplyAdopted: the create reaches the log but its reply is
// lost; the recipe finds its node by GUID, sees it is its session's, and
// adopts it: acquired once, no orphan.
func TestLostCreateReplyAdopted(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	for i, lossErr := range lossErrors {
		t.Run(fmt.Sprint(lossErr), func(t *testing.T) {
			path := fmt.Sprintf("/adopt%d", i)
			var rec recorder
			var lost atomic.Int32
			cl := connect(t, c.Servers()...)
			m := lockrecipe.NewMutex(lockrecipe.NewSession(cl), path, rec.option(),
				lockrecipe.WithLoseCreateReply(func(string) error {
					if lost.Add(1) == 1 {
						return lossErr
					}
					return nil
				}))
			tok, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			kids := children(t, obs, path)
			if len(kids) != 1 || path+"/"+kids[0] != m.Node() {
				t.Fatalf("children %v, holder %s", kids, m.Node())
			}
			st, _, _ := obs.Exists(ctx, m.Node())
			if st.EphemeralOwner != cl.SessionID() || st.Czxid != int64(tok) {
				t.Fatalf("stat %+v, session %d, token %d", st, cl.SessionID(), tok)
			}
			if rec.count(lockrecipe.LockAdopted) != 1 || rec.count(lockrecipe.LockCreated) != 0 || lost.Load() != 1 {
				t.Fatalf("adopted %d, created %d, creates %d", rec.count(lockrecipe.LockAdopted), rec.count(lockrecipe.LockCreated), lost.Load())
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if kids := children(t, obs, path); len(kids) != 0 {
				t.Fatalf("orphans: %v", kids)
			}
		})
	}
}

// TestLostCreateRequestRetried: the create never reached the server; the
// lookup finds nothing and the create is retried with the same GUID.
func TestLostCreateRequestRetried(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	var n atomic.Int32
	var paths []string
	m := lockrecipe.NewMutex(session(t, c.Servers()...), "/retry", lockrecipe.WithFailCreate(func(p string) error {
		paths = append(paths, p)
		if n.Add(1) <= 2 {
			return fmt.Errorf("injected: %w", client.ErrConnectionLoss)
		}
		return nil
	}))
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Two lost requests, then (maybe after creating the parent) the create
	// that applies: all with the attempt's one GUID.
	if len(paths) < 3 {
		t.Fatalf("create attempts %v", paths)
	}
	for _, p := range paths {
		if p != paths[0] {
			t.Fatalf("create attempts %v, want one GUID", paths)
		}
	}
	if kids := children(t, obs, "/retry"); len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
}

// TestLostCreateForeignNodeDeleted: a node carrying the attempt's GUID but
// owned by another session (an older one) is deleted, never adopted —
// whether or not the attempt's own create applied.
func TestLostCreateForeignNodeDeleted(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	for _, applied := range []bool{false, true} {
		t.Run(fmt.Sprintf("own-create-applied=%v", applied), func(t *testing.T) {
			path := fmt.Sprintf("/foreign-%v", applied)
			const guid = "0123456789abcdef0123456789abcdef"
			old := connect(t, c.Servers()...)
			foreign, err := old.Create(ctx, path+"/_c_"+guid+"-lock-", nil, client.CreateMode{Kind: client.Ephemeral, Sequential: true})
			if errors.Is(err, client.ErrNoNode) {
				_, _ = old.Create(ctx, path, nil, client.CreateMode{Kind: client.Container})
				foreign, err = old.Create(ctx, path+"/_c_"+guid+"-lock-", nil, client.CreateMode{Kind: client.Ephemeral, Sequential: true})
			}
			if err != nil {
				t.Fatal(err)
			}
			fst, _, err := old.Exists(ctx, foreign)
			if err != nil {
				t.Fatal(err)
			}
			var rec recorder
			var once atomic.Bool
			lose := func() error {
				if once.CompareAndSwap(false, true) {
					return fmt.Errorf("injected: %w", client.ErrConnectionLoss)
				}
				return nil
			}
			opts := []lockrecipe.Option{rec.option(), lockrecipe.WithGUID(func() string { return guid })}
			if applied {
				opts = append(opts, lockrecipe.WithLoseCreateReply(func(string) error { return lose() }))
			} else {
				opts = append(opts, lockrecipe.WithFailCreate(func(string) error { return lose() }))
			}
			cl := connect(t, c.Servers()...)
			m := lockrecipe.NewMutex(lockrecipe.NewSession(cl), path, opts...)
			if _, err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			// (The name may come back: once the foreign node is gone the
			// container can be reaped, and a re-created parent numbers its
			// children from 0 again. The node is told apart by its czxid.)
			if st, ok, _ := old.Exists(ctx, foreign); ok && st.Czxid == fst.Czxid {
				t.Fatalf("foreign node %s survived", foreign)
			}
			if int64(m.Token()) == fst.Czxid {
				t.Fatal("adopted another session's node")
			}
			if ev, ok := rec.last(lockrecipe.LockForeignDeleted); !ok || ev.Node != foreign {
				t.Fatalf("foreign-deleted event %+v %v", ev, ok)
			}
			kids := children(t, old, path)
			st, _, _ := old.Exists(ctx, m.Node())
			if len(kids) != 1 || path+"/"+kids[0] != m.Node() || st.EphemeralOwner != cl.SessionID() {
				t.Fatalf("children %v, holder %s owned by %d (want %d)", kids, m.Node(), st.EphemeralOwner, cl.SessionID())
			}
			if applied != (rec.count(lockrecipe.LockAdopted) == 1) {
				t.Fatalf("adopted %d times", rec.count(lockrecipe.LockAdopted))
			}
		})
	}
}

// TestLostCreateReplyAcrossServerStop: on a 3-node cluster the create
// applies, then the client's server stops before the recipe hears the
// reply (a real connection loss); the client fails over and the recipe
// adopts its node on another server: acquired once, no orphan.
func TestLostCreateReplyAcrossServerStop(t *testing.T) {
	c := cluster.New(t, 3, cluster.Options{})
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	var rec recorder
	var once atomic.Bool
	stopped := -1
	m := lockrecipe.NewMutex(lockrecipe.NewSession(cl), "/stop", rec.option(),
		lockrecipe.WithLoseCreateReply(func(string) error {
			if !once.CompareAndSwap(false, true) {
				return nil
			}
			// Read the address once: the client fails over as soon as its
			// server stops, and comparing against its new server would
			// stop that one too (a majority gone).
			addr := cl.Server()
			for i, mb := range c.Members {
				if mb.Cfg.ClientAddr == addr {
					stopped = i
					c.Stop(i)
					break
				}
			}
			return fmt.Errorf("injected after stopping %s: %w", addr, client.ErrConnectionLoss)
		}))
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if stopped < 0 || cl.Server() == c.Members[stopped].Cfg.ClientAddr {
		t.Fatalf("client still on the stopped server %d", stopped)
	}
	if rec.count(lockrecipe.LockAdopted) != 1 {
		t.Fatalf("adopted %d", rec.count(lockrecipe.LockAdopted))
	}
	obs := connect(t, c.Servers()...)
	if err := obs.Sync(ctx, "/stop"); err != nil {
		t.Fatal(err)
	}
	kids := children(t, obs, "/stop")
	if len(kids) != 1 || "/stop/"+kids[0] != m.Node() || !strings.Contains(kids[0], "-lock-") {
		t.Fatalf("children %v, holder %s", kids, m.Node())
	}
	c.Start(stopped)
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := obs.Sync(ctx, "/stop"); err != nil {
		t.Fatal(err)
	}
	if kids := children(t, obs, "/stop"); len(kids) != 0 {
		t.Fatalf("orphans %v", kids)
	}
}

// TestLockTinyTimeoutsLeaveNoOrphans: Lock calls whose ctx ends at every
// point of the attempt — before the create is sent, while it is in flight
// (its reply is then really lost to the recipe), while waiting — all fail
// with the ctx error and leave no node behind.
func TestLockTinyTimeoutsLeaveNoOrphans(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	obs := connect(t, c.Servers()...)
	holder := lockrecipe.NewMutex(session(t, c.Servers()...), "/tiny")
	if _, err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	m := lockrecipe.NewMutex(session(t, c.Servers()...), "/tiny", rec.option())
	for i := 0; i < 100; i++ {
		tctx, cancel := context.WithTimeout(ctx, time.Duration(i)*100*time.Microsecond)
		_, err := m.Lock(tctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock %d: %v", i, err)
		}
	}
	if kids := children(t, obs, "/tiny"); len(kids) != 1 {
		t.Fatalf("orphans: %v", kids)
	}
	t.Logf("100 timed-out Locks: %d created, %d adopted after a lost reply, %d waited", rec.count(lockrecipe.LockCreated), rec.count(lockrecipe.LockAdopted), rec.count(lockrecipe.LockWatching))
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
}
