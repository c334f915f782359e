package lockrecipe_test

import (
	"errors"
	"testing"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// TestWithACL: a mutex's nodes, and the parents it makes, carry the ACL
// WithACL gives; with CreatorAll two sessions of the same identity take
// turns, and a session of no identity can neither take the lock nor see or
// delete its holder's node.
func TestWithACL(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	var owners [2]*client.Client
	for i := range owners {
		owners[i] = connect(t, c.Servers()...)
		if err := owners[i].AddAuth(ctx, "digest", []byte("locker:pw")); err != nil {
			t.Fatal(err)
		}
	}
	opt := lockrecipe.WithACL(client.CreatorAll())
	m := lockrecipe.NewMutex(lockrecipe.NewSession(owners[0]), "/acl/locks/a", opt)
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	want := client.DigestACL(client.PermAll, "locker", "pw")
	for _, p := range []string{"/acl", "/acl/locks", "/acl/locks/a", m.Node()} {
		acl, _, err := owners[0].GetACL(ctx, p)
		if err != nil || len(acl) != 1 || acl[0] != want[0] {
			t.Fatalf("%s: %v %v, want %v", p, acl, err, want)
		}
	}
	stranger := connect(t, c.Servers()...)
	if _, err := lockrecipe.NewMutex(lockrecipe.NewSession(stranger), "/acl/locks/a").TryLock(ctx); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("a stranger's TryLock: %v", err)
	}
	if err := stranger.Delete(ctx, m.Node(), -1); !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("a stranger deletes the holder's node: %v", err)
	}
	// The same identity on another session: it waits its turn, then holds.
	m2 := lockrecipe.NewMutex(lockrecipe.NewSession(owners[1]), "/acl/locks/a", opt)
	if _, err := m2.TryLock(ctx); !errors.Is(err, lockrecipe.ErrLocked) {
		t.Fatalf("TryLock while held: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
