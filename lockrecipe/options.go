package lockrecipe

import (
	"fmt"

	"github.com/coordd/coordd/client"
)

// Option configures a recipe (NewMutex, NewRWMutex, NewElection, ...).
type Option func(*options)

type options struct {
	observer func(LockEvent)
	acl      []client.ACL
	hooks    hooks
}

// hooks let tests inject faults into the protected create, and changes
// between two requests of Queue.Take (see export_test.go); all nil in
// production.
type hooks struct {
	guid         func() string
	beforeCreate func(path string) error    // non-nil error: skip the create, report this error
	afterCreate  func(created string) error // non-nil error: the create applied but report this error
	queueMissing func(path string)          // Take found no queue node, before it watches for one
}

func buildOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithObserver makes the recipe report what it does to f, synchronously,
// from the goroutine doing it (f must be quick and must not call the
// recipe). Tests use it to count wakeups.
func WithObserver(f func(LockEvent)) Option {
	return func(o *options) { o.observer = f }
}

// WithACL gives acl to every node the recipe creates: its contenders' (or
// items', or the barrier's) nodes and the container parents it makes. The
// sessions using the recipe need READ, CREATE and DELETE on the parents
// and everything on their own nodes: client.CreatorAll gives that to the
// identities the creating session authenticated as (AddAuth first), and
// keeps everyone else out. Without it nodes get client.OpenACL.
func WithACL(acl []client.ACL) Option {
	return func(o *options) { o.acl = acl }
}

// LockEventKind says what a LockEvent reports.
type LockEventKind int

const (
	// LockCreated: the owner's node was created (Node).
	LockCreated LockEventKind = iota + 1
	// LockAdopted: a create's reply was lost and the owner found its node
	// (Node) by GUID, owned by its session.
	LockAdopted
	// LockForeignDeleted: a node with the owner's GUID but another session
	// as owner (Node) was found and deleted, not adopted.
	LockForeignDeleted
	// LockWatching: the owner must wait and watches Watched.
	LockWatching
	// LockWoken: the watch on Watched fired (a watch event was delivered)
	// and the owner re-lists the children.
	LockWoken
	// LockAcquired: the owner holds (Node).
	LockAcquired
	// LockReleased: the owner deleted its node (Node) on Unlock, or after a
	// failed or cancelled attempt.
	LockReleased
)

var lockEventNames = map[LockEventKind]string{
	LockCreated: "created", LockAdopted: "adopted", LockForeignDeleted: "foreign-deleted",
	LockWatching: "watching", LockWoken: "woken", LockAcquired: "acquired", LockReleased: "released",
}

// String returns the kind's name, such as "woken".
func (k LockEventKind) String() string {
	if s, ok := lockEventNames[k]; ok {
		return s
	}
	return fmt.Sprintf("LockEventKind(%d)", int(k))
}

// LockEvent is one step of a recipe, reported to WithObserver's function.
type LockEvent struct {
	// Kind says what happened.
	Kind LockEventKind
	// Node is the owner's node (full path), when known.
	Node string
	// Watched is the watched node (full path) for LockWatching and
	// LockWoken.
	Watched string
}

func (o *options) emit(ev LockEvent) {
	if o.observer != nil {
		o.observer(ev)
	}
}
