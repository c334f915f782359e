package client

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// State is the state of a Client's session, as reported on States.
type State int

const (
	// StateConnecting is the zero State: the session is not established yet.
	// Connect returns only once it is, so it never appears on States.
	StateConnecting State = iota
	// StateConnected: the session was established (the first event of every
	// Client).
	StateConnected
	// StateDisconnected: the stream to the server broke; the client is trying
	// the servers and the session may still be alive. Calls wait. Code that
	// relies on the session (a lock) acts on StateSuspended, which follows
	// if the session may be lost.
	StateDisconnected
	// StateReconnected: the session is fine again: after StateDisconnected,
	// the same session was resumed on a server (pending requests were
	// re-sent and watches re-registered); after StateSuspended, the leader
	// confirmed the session again.
	StateReconnected
	// StateExpired: the session is gone (terminal). Every pending and later
	// call fails with ErrSessionExpired.
	StateExpired
	// StateClosed: Close was called (terminal, always the last event; the
	// States channel is closed after it).
	StateClosed
	// StateSuspended: the session may be lost. The leader has not confirmed
	// a request sent in the last T - V - M (session timeout, the server's
	// vouch interval, WithSuspendMargin), so it may expire the session
	// V + M from now, and anything the session holds (a lock) may then pass
	// to another owner: code that relies on the session stops relying on it
	// now. Against a server that does not vouch (older than vouches), it
	// follows every StateDisconnected. The client stays connected, or goes
	// on reconnecting; StateReconnected follows once the leader confirms the
	// session again (StateExpired if it expired). While suspended, a
	// reconnection is reported as StateSuspended again, with its server.
	StateSuspended
)

var stateNames = [...]string{"Connecting", "Connected", "Disconnected", "Reconnected", "Expired", "Closed", "Suspended"}

// String returns the state's name, such as "Connected".
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// StateEvent reports a state change of a Client.
type StateEvent struct {
	// State is the new state.
	State State
	// Server is the address of the server involved (connected to, or lost).
	Server string
	// Err is the cause of a StateDisconnected or StateExpired, else nil.
	Err error
}

// NodeKind is a znode's lifetime class.
type NodeKind int

const (
	// Persistent nodes live until deleted.
	Persistent NodeKind = iota
	// Ephemeral nodes are deleted when the session that created them ends.
	Ephemeral
	// Container nodes are deleted by the server once they have had a child and
	// are empty again.
	Container
	// TTL nodes are deleted by the server when they have had no children and
	// no change for CreateMode.TTL.
	TTL
)

var kindNames = [...]string{"persistent", "ephemeral", "container", "ttl"}

// String returns the kind's lowercase name, such as "ephemeral".
func (k NodeKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("NodeKind(%d)", int(k))
}

// MarshalText encodes the kind as its name.
func (k NodeKind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(kindNames) {
		return nil, fmt.Errorf("client: unknown node kind %d", int(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText decodes a kind's name.
func (k *NodeKind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n == string(b) {
			*k = NodeKind(i)
			return nil
		}
	}
	return fmt.Errorf("client: unknown node kind %q", b)
}

// CreateMode says what kind of node Create makes.
type CreateMode struct {
	// Kind is the node's lifetime class.
	Kind NodeKind
	// Sequential appends a 10-digit counter to the name.
	Sequential bool
	// TTL is the time to live of a TTL node (millisecond resolution); it must
	// be zero for other kinds.
	TTL time.Duration
	// ACL is the new node's ACL (nil: OpenACL, everyone may do anything).
	// Creating needs CREATE on the parent.
	ACL []ACL
}

// Stat is a znode's metadata, named as ZooKeeper names it. Its JSON form uses
// ZooKeeper's field names; TTL is written in milliseconds as "ttlMs".
type Stat struct {
	Czxid          int64         `json:"czxid"`           // zxid of the create
	Mzxid          int64         `json:"mzxid"`           // zxid of the last data change
	Pzxid          int64         `json:"pzxid"`           // zxid of the last child create or delete
	Ctime          int64         `json:"ctime"`           // creation time, ms since the epoch
	Mtime          int64         `json:"mtime"`           // last data change time, ms since the epoch
	Version        int32         `json:"version"`         // number of data changes
	Cversion       int32         `json:"cversion"`        // number of child creates and deletes
	Aversion       int32         `json:"aversion"`        // number of ACL changes
	EphemeralOwner int64         `json:"ephemeralOwner"`  // owning session of an ephemeral node, else 0
	DataLength     int32         `json:"dataLength"`      // length of the data
	NumChildren    int32         `json:"numChildren"`     // number of children
	Kind           NodeKind      `json:"kind,omitempty"`  // lifetime class
	TTL            time.Duration `json:"ttlMs,omitempty"` // time to live of a TTL node
	// LockDelayUntil is set in Get's and Exists' answers for an ephemeral
	// whose session expired (EphemeralOwner) and that the servers keep for
	// a lock-delay (coordd's --lock-delay): it is deleted at this time, ms
	// since the epoch by the leader's clock. 0 otherwise. (Not ZooKeeper's.)
	LockDelayUntil int64 `json:"lockDelayUntil,omitempty"`
}

// statJSON is Stat's JSON form (TTL in milliseconds).
type statJSON struct {
	Czxid          int64    `json:"czxid"`
	Mzxid          int64    `json:"mzxid"`
	Pzxid          int64    `json:"pzxid"`
	Ctime          int64    `json:"ctime"`
	Mtime          int64    `json:"mtime"`
	Version        int32    `json:"version"`
	Cversion       int32    `json:"cversion"`
	Aversion       int32    `json:"aversion"`
	EphemeralOwner int64    `json:"ephemeralOwner"`
	DataLength     int32    `json:"dataLength"`
	NumChildren    int32    `json:"numChildren"`
	Kind           NodeKind `json:"kind,omitempty"`
	TTLMs          int64    `json:"ttlMs,omitempty"`
	LockDelayUntil int64    `json:"lockDelayUntil,omitempty"`
}

// MarshalJSON encodes the stat with ZooKeeper's field names, the kind by name
// and the TTL in milliseconds (both omitted when zero), and lockDelayUntil
// when set.
func (s Stat) MarshalJSON() ([]byte, error) {
	return json.Marshal(statJSON{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Pzxid: s.Pzxid, Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength, NumChildren: s.NumChildren,
		Kind: s.Kind, TTLMs: s.TTL.Milliseconds(), LockDelayUntil: s.LockDelayUntil,
	})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (s *Stat) UnmarshalJSON(b []byte) error {
	var j statJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Stat{
		Czxid: j.Czxid, Mzxid: j.Mzxid, Pzxid: j.Pzxid, Ctime: j.Ctime, Mtime: j.Mtime,
		Version: j.Version, Cversion: j.Cversion, Aversion: j.Aversion,
		EphemeralOwner: j.EphemeralOwner, DataLength: j.DataLength, NumChildren: j.NumChildren,
		Kind: j.Kind, TTL: time.Duration(j.TTLMs) * time.Millisecond, LockDelayUntil: j.LockDelayUntil,
	}
	return nil
}

func statFromPB(p *apipb.Stat) Stat {
	if p == nil {
		return Stat{}
	}
	return Stat{
		Czxid: p.Czxid, Mzxid: p.Mzxid, Pzxid: p.Pzxid, Ctime: p.Ctime, Mtime: p.Mtime,
		Version: p.Version, Cversion: p.Cversion, Aversion: p.Aversion,
		EphemeralOwner: p.EphemeralOwner, DataLength: p.DataLength, NumChildren: p.NumChildren,
		Kind: NodeKind(p.Kind), TTL: time.Duration(p.TtlMs) * time.Millisecond, LockDelayUntil: p.LockDelayUntilMs,
	}
}

// EventType is the type of a watch event.
type EventType int

const (
	// EventNodeCreated: the watched (absent) node was created. Fires exist
	// watches.
	EventNodeCreated EventType = iota + 1
	// EventNodeDeleted: the watched node was deleted. Fires every watch on it.
	EventNodeDeleted
	// EventNodeDataChanged: the watched node's data was set. Fires data and
	// exist watches.
	EventNodeDataChanged
	// EventNodeChildrenChanged: a child of the watched node was created or
	// deleted. Fires child watches.
	EventNodeChildrenChanged
	// EventNotWatching: the watch ended without its node changing: the
	// session expired or the Client was closed (Event.Err says which), or
	// RemoveWatches or StopWatch removed it (Err nil).
	EventNotWatching
	// EventResync, on a persistent watch (AddWatch) only: events may be
	// missing before this one; re-read what the watch covers. Err says why:
	// ErrWatchOverflow (the reader fell behind the channel's buffer) or
	// ErrConnectionLoss (the session moved to another server, which does not
	// report what changed meanwhile). Zxid is 0. The watch goes on.
	EventResync
)

var eventNames = map[EventType]string{
	EventNodeCreated:         "NodeCreated",
	EventNodeDeleted:         "NodeDeleted",
	EventNodeDataChanged:     "NodeDataChanged",
	EventNodeChildrenChanged: "NodeChildrenChanged",
	EventNotWatching:         "NotWatching",
	EventResync:              "Resync",
}

// String returns ZooKeeper's name of the event type, such as "NodeCreated".
func (t EventType) String() string {
	if n, ok := eventNames[t]; ok {
		return n
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is what a watch channel receives: once for a one-shot watch (GetW,
// ExistsW, ChildrenW), whose channel is then closed; every change, until
// the final EventNotWatching, for a persistent one (AddWatch).
type Event struct {
	// Type says what happened.
	Type EventType
	// Path is the path of the node that changed: the watched node, or for
	// a recursive watch the node below it. For EventNotWatching and
	// EventResync, the watched path.
	Path string
	// Zxid is the zxid of the change (0 for EventNotWatching and
	// EventResync).
	Zxid int64
	// Err is set for EventNotWatching when the session ended (an error
	// matching ErrSessionExpired or ErrClosed), and for EventResync.
	Err error
}

// WatchKind is a kind of watch: it selects the watches RemoveWatches,
// CheckWatches and StopWatch's server side remove or check, and with
// WatchPersistent and WatchPersistentRecursive the kind AddWatch sets. The
// values are the public API's (and ZooKeeper's WatcherType, renumbered).
type WatchKind int

const (
	// WatchAny selects every watch on the path, persistent ones included.
	WatchAny WatchKind = iota
	// WatchData selects data watches (those left by GetW and ExistsW).
	WatchData
	// WatchChild selects child watches (those left by ChildrenW).
	WatchChild
	// WatchPersistent selects persistent watches (AddWatch of that kind):
	// every event type of their path, until removed.
	WatchPersistent
	// WatchPersistentRecursive selects persistent recursive watches
	// (AddWatch of that kind): their path and every path below it, until
	// removed.
	WatchPersistentRecursive
)

// String returns the kind's name, such as "data" or "persistentRecursive".
func (k WatchKind) String() string {
	switch k {
	case WatchAny:
		return "any"
	case WatchData:
		return "data"
	case WatchChild:
		return "child"
	case WatchPersistent:
		return "persistent"
	case WatchPersistentRecursive:
		return "persistentRecursive"
	}
	return fmt.Sprintf("WatchKind(%d)", int(k))
}

// Op is one operation of a Multi; make it with CreateOp, DeleteOp, SetOp or
// CheckOp.
type Op struct {
	pb *apipb.MultiOp
}

// CreateOp creates a node, like Create.
func CreateOp(path string, data []byte, mode CreateMode) Op {
	return Op{&apipb.MultiOp{Op: &apipb.MultiOp_Create{Create: createRequest(path, data, mode)}}}
}

// DeleteOp deletes a node if its version matches (-1: any), like Delete.
func DeleteOp(path string, version int32) Op {
	return Op{&apipb.MultiOp{Op: &apipb.MultiOp_Delete{Delete: &apipb.DeleteRequest{Path: path, Version: version}}}}
}

// SetOp sets a node's data if its version matches (-1: any), like Set.
func SetOp(path string, data []byte, version int32) Op {
	return Op{&apipb.MultiOp{Op: &apipb.MultiOp_SetData{SetData: &apipb.SetDataRequest{Path: path, Data: data, Version: version}}}}
}

// CheckOp asserts that a node's version is version (-1: that it exists).
func CheckOp(path string, version int32) Op {
	return Op{&apipb.MultiOp{Op: &apipb.MultiOp_Check{Check: &apipb.CheckRequest{Path: path, Version: version}}}}
}

// OpResult is one op's outcome in a Multi. When a Multi fails, the ops before
// the failing one report a nil Err with no Path or Stat (they were rolled
// back), the failing one its error, and the ones after it
// ErrRuntimeInconsistency.
type OpResult struct {
	// Path is the created node's name (create ops) or the op's path.
	Path string
	// Stat is the node's stat after the op, when the server reports one.
	Stat Stat
	// Err is the op's error, nil if it succeeded (or was rolled back).
	Err error
}

func createRequest(path string, data []byte, mode CreateMode) *apipb.CreateRequest {
	return &apipb.CreateRequest{
		Path:       path,
		Data:       data,
		Kind:       apipb.NodeKind(mode.Kind),
		Sequential: mode.Sequential,
		TtlMs:      mode.TTL.Milliseconds(),
		Acl:        aclToPB(mode.ACL),
	}
}
