package lockrecipe_test

import (
	"errors"
	"testing"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// TestNamingRule: a bare name is a child of its kind's root, a path is
// itself, and what can be neither is refused with the reason.
func TestNamingRule(t *testing.T) {
	cases := []struct {
		name, lock, election string
		reason               string // "" when valid
	}{
		{name: "deploy", lock: "/locks/deploy", election: "/elections/deploy"},
		{name: "team/deploy", lock: "/locks/team/deploy", election: "/elections/team/deploy"},
		{name: "/app/lock", lock: "/app/lock", election: "/app/lock"},
		{name: "/", lock: "/", election: "/"},
		{name: "", reason: "must not be empty"},
		{name: "a//b", reason: `must not contain "//"`},
		{name: "a/", reason: `must not end with "/"`},
		{name: "/app/", reason: `must not end with "/"`},
		{name: "//x", reason: `must not contain "//"`},
	}
	for _, tc := range cases {
		for _, rule := range []struct {
			kind string
			f    func(string) (string, error)
			want string
		}{{"lock", lockrecipe.LockPath, tc.lock}, {"election", lockrecipe.ElectionPath, tc.election}} {
			got, err := rule.f(tc.name)
			if tc.reason == "" {
				if err != nil || got != rule.want {
					t.Errorf("%s %q: %q, %v; want %q", rule.kind, tc.name, got, err, rule.want)
				}
				continue
			}
			var pe *lockrecipe.PathError
			if !errors.As(err, &pe) || pe.Name != tc.name || pe.Reason != tc.reason || !errors.Is(err, client.ErrBadArguments) {
				t.Errorf("%s %q: %q, %v; want a PathError: %s", rule.kind, tc.name, got, err, tc.reason)
			}
		}
	}
}

// TestResolve: a bare name finds the election, or the lock, in use; a
// path is itself; a name both are is refused.
func TestResolve(t *testing.T) {
	c := server(t)
	ctx := ctxT(t)
	cl := connect(t, c.Servers()...)
	resolve := func(name string) (string, error) { t.Helper(); return lockrecipe.Resolve(ctx, cl, name) }

	if p, err := resolve("idle"); err != nil || p != "/locks/idle" {
		t.Fatalf("a name nothing uses: %q, %v; want the lock's path", p, err)
	}
	e := lockrecipe.NewElection(lockrecipe.NewSession(cl), "/elections/sched")
	if err := e.Campaign(ctx, "me"); err != nil {
		t.Fatal(err)
	}
	if p, err := resolve("sched"); err != nil || p != "/elections/sched" {
		t.Fatalf("an election's name: %q, %v", p, err)
	}
	m := lockrecipe.NewMutex(lockrecipe.NewSession(cl), "/locks/deploy")
	if _, err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := resolve("deploy"); err != nil || p != "/locks/deploy" {
		t.Fatalf("a lock's name: %q, %v", p, err)
	}
	if p, err := resolve("/elections/deploy"); err != nil || p != "/elections/deploy" {
		t.Fatalf("a path: %q, %v", p, err)
	}
	both := lockrecipe.NewMutex(lockrecipe.NewSession(cl), "/locks/sched")
	if _, err := both.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve("sched"); !errors.Is(err, lockrecipe.ErrAmbiguousName) {
		t.Fatalf("a name both are: %v, want ErrAmbiguousName", err)
	}
	var pe *lockrecipe.PathError
	if _, err := resolve("a//b"); !errors.As(err, &pe) {
		t.Fatalf("a bad name: %v, want a PathError", err)
	}
}
