package lockrecipe

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/coordd/coordd/client"
)

// The naming rule. Every recipe works on a path. Programs that let people
// name a lock or an election (coordctl's lock, elect and locks) also take a
// bare name, which stands for a child of the root of its kind; a name that
// starts with "/" is a path and taken as it is:
//
//	a lock, semaphore or read/write lock NAME   LocksRoot/NAME
//	an election NAME                            ElectionsRoot/NAME
//
// So "coordctl lock deploy" and "coordctl lock /locks/deploy" take one lock,
// and "coordctl locks scheduler" finds the election "coordctl elect
// scheduler" runs (Resolve).
const (
	// LocksRoot holds the locks, semaphores and read/write locks named
	// without a path.
	LocksRoot = "/locks"
	// ElectionsRoot holds the elections named without a path.
	ElectionsRoot = "/elections"
)

// ErrAmbiguousName is returned by Resolve when a bare name is both a lock's
// and an election's (both paths exist): the caller must give the path.
var ErrAmbiguousName = errors.New("lockrecipe: name is both a lock and an election")

// PathError is a recipe path, or a name, that cannot be one. It matches
// client.ErrBadArguments.
type PathError struct {
	// Name is the path or name as given.
	Name string
	// Reason says what is wrong with it: "must not be empty", ...
	Reason string
}

// Error says which path or name, and why.
func (e *PathError) Error() string {
	return fmt.Sprintf("lockrecipe: invalid path %q: %s", e.Name, e.Reason)
}

// Unwrap makes a PathError match client.ErrBadArguments, as the server's
// answer to a bad path does.
func (e *PathError) Unwrap() error { return client.ErrBadArguments }

// LockPath returns the path of the lock (semaphore, read/write lock) called
// name: name itself when it starts with "/", else LocksRoot/name.
func LockPath(name string) (string, error) { return under(LocksRoot, name) }

// ElectionPath returns the path of the election called name: name itself
// when it starts with "/", else ElectionsRoot/name.
func ElectionPath(name string) (string, error) { return under(ElectionsRoot, name) }

// Resolve returns the path a name stands for when its kind is not known,
// as for Inspect: a path is itself; a bare name is the lock's path or the
// election's, whichever exists on c's server (LockPath when neither does;
// ErrAmbiguousName when both do).
func Resolve(ctx context.Context, c *client.Client, name string) (string, error) {
	lock, err := LockPath(name)
	if err != nil || strings.HasPrefix(name, "/") {
		return lock, err
	}
	election, err := ElectionPath(name)
	if err != nil {
		return "", err
	}
	_, isLock, err := c.Exists(ctx, lock)
	if err != nil {
		return "", fmt.Errorf("lockrecipe: %s: %w", lock, err)
	}
	_, isElection, err := c.Exists(ctx, election)
	if err != nil {
		return "", fmt.Errorf("lockrecipe: %s: %w", election, err)
	}
	switch {
	case isLock && isElection:
		return "", fmt.Errorf("%w: %s and %s both exist", ErrAmbiguousName, lock, election)
	case isElection:
		return election, nil
	}
	return lock, nil
}

// under is the path of name below root (see the naming rule).
func under(root, name string) (string, error) {
	p := name
	if !strings.HasPrefix(name, "/") {
		if name == "" {
			return "", &PathError{Name: name, Reason: "must not be empty"}
		}
		p = root + "/" + name
	}
	if reason := pathFault(p); reason != "" {
		return "", &PathError{Name: name, Reason: reason}
	}
	return p, nil
}

// validPath checks a recipe's path as far as the recipes need (the server
// checks the rest of ZooKeeper's rules).
func validPath(p string) error {
	if reason := pathFault(p); reason != "" {
		return &PathError{Name: p, Reason: reason}
	}
	return nil
}

// pathFault says what makes p no path, or "".
func pathFault(p string) string {
	switch {
	case p == "":
		return "must not be empty"
	case p[0] != '/':
		return `must start with "/"`
	case len(p) > 1 && strings.HasSuffix(p, "/"):
		return `must not end with "/"`
	case strings.Contains(p, "//"):
		return `must not contain "//"`
	}
	return ""
}
