package tree

import "errors"

// Kind is the lifetime class of a znode.
type Kind uint8

// The znode kinds ZooKeeper knows. Sequential is orthogonal and not a kind.
const (
	// Persistent nodes live until deleted.
	Persistent Kind = iota
	// Ephemeral nodes are owned by a session and deleted when it closes.
	Ephemeral
	// Container nodes are reaped once they have had a child and are empty again.
	Container
	// TTL nodes are reaped once childless and unmodified for their TTL.
	TTL
)

// String returns the kind's lower-case name.
func (k Kind) String() string {
	switch k {
	case Persistent:
		return "persistent"
	case Ephemeral:
		return "ephemeral"
	case Container:
		return "container"
	case TTL:
		return "ttl"
	}
	return "unknown"
}

// Stat is a znode's metadata, with every field ZooKeeper reports plus the
// node's kind and TTL.
type Stat struct {
	Czxid          int64 // zxid of the entry that created the node
	Mzxid          int64 // zxid of the entry that last changed its data
	Pzxid          int64 // zxid of the last child create or delete (czxid at first)
	Ctime          int64 // creation time, ms since the Unix epoch (leader clock)
	Mtime          int64 // last data change, ms since the Unix epoch (leader clock)
	Version        int32 // number of setData calls
	Cversion       int32 // number of child creates and deletes
	Aversion       int32 // number of ACL changes
	EphemeralOwner int64 // owning session for ephemerals, else 0
	DataLength     int32
	NumChildren    int32
	Kind           Kind
	TTL            int64 // ms, for TTL nodes; 0 otherwise
}

// EventType says what a change did to a path, in ZooKeeper's watch terms.
type EventType uint8

// The event types a write can produce.
const (
	EventNodeCreated EventType = iota + 1
	EventNodeDeleted
	EventNodeDataChanged
	EventNodeChildrenChanged
)

// String returns ZooKeeper's name for the event type.
func (e EventType) String() string {
	switch e {
	case EventNodeCreated:
		return "NodeCreated"
	case EventNodeDeleted:
		return "NodeDeleted"
	case EventNodeDataChanged:
		return "NodeDataChanged"
	case EventNodeChildrenChanged:
		return "NodeChildrenChanged"
	}
	return "Unknown"
}

// Event is one change made by a write, reported for watches.
type Event struct {
	Type EventType
	Path string
	Zxid int64
	// ACL points to the ACL of the node the event is about when it
	// happened (the deleted node's for NodeDeleted, the parent's for
	// NodeChildrenChanged): a server delivers the event only to sessions
	// that may READ it, as ZooKeeper does since 3.8.4 and 3.9.2. A pointer
	// keeps Event comparable; the ACL is shared and must not be modified.
	ACL *[]ACL
}

// Tx carries what a write needs from its log entry and collects the events
// it produced. Mutations append to Events in the order they happen; a failed
// mutation (or a failed Multi) appends nothing.
type Tx struct {
	Zxid   int64 // log index of the entry making the change
	Now    int64 // leader-stamped time of the entry, ms since the Unix epoch
	Events []Event
	// Auth checks the write's permissions, as its writer's; nil allows
	// everything (the server's own writes: expiry, reaping, and tests).
	Auth Authorizer
}

// Errors returned by tree operations. Each may be wrapped with a reason;
// match them with errors.Is.
var (
	ErrNoNode                  = errors.New("tree: node does not exist")
	ErrNodeExists              = errors.New("tree: node already exists")
	ErrBadVersion              = errors.New("tree: version does not match")
	ErrNotEmpty                = errors.New("tree: node has children")
	ErrNoChildrenForEphemerals = errors.New("tree: ephemeral nodes may not have children")
	ErrBadArguments            = errors.New("tree: bad arguments")
	ErrRuntimeInconsistency    = errors.New("tree: operation not run: an earlier operation of the multi failed")
	ErrRolledBack              = errors.New("tree: operation rolled back: a later operation of the multi failed")
	// ErrNoAuth: the writer lacks the permission the operation needs.
	ErrNoAuth = errors.New("tree: not authorized")
	// ErrInvalidACL: the ACL asked for is empty or malformed, or uses the
	// auth scheme without an authenticated identity.
	ErrInvalidACL = errors.New("tree: invalid ACL")
)

// ErrNotReapable is returned by ReapContainer and ReapTTL when the node is
// not (or no longer) eligible for reaping; the tree is left unchanged. When
// the node does not exist the error also matches ErrNoNode.
var ErrNotReapable = errors.New("tree: node is not reapable")

// ErrBadSnapshot is returned by Read for input that is not a valid snapshot
// (bad header, truncated, checksum mismatch, or inconsistent contents).
var ErrBadSnapshot = errors.New("tree: bad snapshot")
