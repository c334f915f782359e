package jute

import "strconv"

// EventType is the type of a watch notification (WatcherEvent.Type), with
// ZooKeeper's numbers (Watcher.Event.EventType).
type EventType int32

// ZooKeeper's event types.
const (
	EventNone                   EventType = -1 // a change of session state; client-side only
	EventNodeCreated            EventType = 1
	EventNodeDeleted            EventType = 2
	EventNodeDataChanged        EventType = 3
	EventNodeChildrenChanged    EventType = 4
	EventDataWatchRemoved       EventType = 5
	EventChildWatchRemoved      EventType = 6
	EventPersistentWatchRemoved EventType = 7
)

var eventNames = map[EventType]string{
	EventNone:                   "None",
	EventNodeCreated:            "NodeCreated",
	EventNodeDeleted:            "NodeDeleted",
	EventNodeDataChanged:        "NodeDataChanged",
	EventNodeChildrenChanged:    "NodeChildrenChanged",
	EventDataWatchRemoved:       "DataWatchRemoved",
	EventChildWatchRemoved:      "ChildWatchRemoved",
	EventPersistentWatchRemoved: "PersistentWatchRemoved",
}

// String returns ZooKeeper's name of the event type ("NodeDataChanged").
func (t EventType) String() string {
	if s, ok := eventNames[t]; ok {
		return s
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// State is a client's session state as a notification carries it
// (WatcherEvent.State), with ZooKeeper's numbers (Watcher.Event.KeeperState).
// A server's notifications carry StateSyncConnected.
type State int32

// ZooKeeper's keeper states.
const (
	StateUnknown           State = -1 // deprecated in ZooKeeper
	StateDisconnected      State = 0
	StateNoSyncConnected   State = 1 // deprecated in ZooKeeper
	StateSyncConnected     State = 3
	StateAuthFailed        State = 4
	StateConnectedReadOnly State = 5
	StateSASLAuthenticated State = 6
	StateExpired           State = -112
	StateClosed            State = 7
)

var stateNames = map[State]string{
	StateUnknown:           "Unknown",
	StateDisconnected:      "Disconnected",
	StateNoSyncConnected:   "NoSyncConnected",
	StateSyncConnected:     "SyncConnected",
	StateAuthFailed:        "AuthFailed",
	StateConnectedReadOnly: "ConnectedReadOnly",
	StateSASLAuthenticated: "SaslAuthenticated",
	StateExpired:           "Expired",
	StateClosed:            "Closed",
}

// String returns ZooKeeper's name of the state ("SyncConnected").
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// WatcherType says which watches a checkWatches or removeWatches request is
// about, with ZooKeeper's numbers (Watcher.WatcherType). Persistent and
// PersistentRecursive are new in ZooKeeper 3.9; 3.8 knows 1 to 3.
type WatcherType int32

// ZooKeeper's watcher types.
const (
	WatcherChildren            WatcherType = 1
	WatcherData                WatcherType = 2
	WatcherAny                 WatcherType = 3
	WatcherPersistent          WatcherType = 4
	WatcherPersistentRecursive WatcherType = 5
)

var watcherNames = map[WatcherType]string{
	WatcherChildren:            "Children",
	WatcherData:                "Data",
	WatcherAny:                 "Any",
	WatcherPersistent:          "Persistent",
	WatcherPersistentRecursive: "PersistentRecursive",
}

// String returns ZooKeeper's name of the watcher type ("Children").
func (t WatcherType) String() string {
	if s, ok := watcherNames[t]; ok {
		return s
	}
	return "WatcherType(" + strconv.Itoa(int(t)) + ")"
}

// Valid reports whether ZooKeeper defines the watcher type (its server
// fails a request carrying another with a RuntimeException, which reaches
// the client as MarshallingError).
func (t WatcherType) Valid() bool {
	_, ok := watcherNames[t]
	return ok
}

// AddWatchMode is the mode of an addWatch request, with ZooKeeper's numbers
// (AddWatchMode, ZooDefs.AddWatchModes).
type AddWatchMode int32

// ZooKeeper's addWatch modes.
const (
	AddWatchPersistent          AddWatchMode = 0
	AddWatchPersistentRecursive AddWatchMode = 1
)

// String returns ZooKeeper's name of the mode ("PERSISTENT_RECURSIVE").
func (m AddWatchMode) String() string {
	switch m {
	case AddWatchPersistent:
		return "PERSISTENT"
	case AddWatchPersistentRecursive:
		return "PERSISTENT_RECURSIVE"
	}
	return "AddWatchMode(" + strconv.Itoa(int(m)) + ")"
}

// CreateMode is the flags field of a create, create2, createContainer or
// createTTL request, with ZooKeeper's numbers (CreateMode.toFlag). It is one
// value, not a set of bits: ephemeral sequential is 3, but TTL sequential is
// 6, not 5|2.
type CreateMode int32

// ZooKeeper's create modes.
const (
	ModePersistent                  CreateMode = 0
	ModeEphemeral                   CreateMode = 1
	ModePersistentSequential        CreateMode = 2
	ModeEphemeralSequential         CreateMode = 3
	ModeContainer                   CreateMode = 4
	ModePersistentWithTTL           CreateMode = 5
	ModePersistentSequentialWithTTL CreateMode = 6
)

var modeNames = [...]string{
	ModePersistent:                  "PERSISTENT",
	ModeEphemeral:                   "EPHEMERAL",
	ModePersistentSequential:        "PERSISTENT_SEQUENTIAL",
	ModeEphemeralSequential:         "EPHEMERAL_SEQUENTIAL",
	ModeContainer:                   "CONTAINER",
	ModePersistentWithTTL:           "PERSISTENT_WITH_TTL",
	ModePersistentSequentialWithTTL: "PERSISTENT_SEQUENTIAL_WITH_TTL",
}

// Valid reports whether ZooKeeper defines the mode (CreateMode.fromFlag
// fails on others with BadArguments).
func (m CreateMode) Valid() bool { return m >= 0 && int(m) < len(modeNames) }

// String returns ZooKeeper's name of the mode ("EPHEMERAL_SEQUENTIAL").
func (m CreateMode) String() string {
	if m.Valid() {
		return modeNames[m]
	}
	return "CreateMode(" + strconv.Itoa(int(m)) + ")"
}

// IsEphemeral reports whether nodes of this mode belong to the session.
func (m CreateMode) IsEphemeral() bool { return m == ModeEphemeral || m == ModeEphemeralSequential }

// IsSequential reports whether the server appends a sequence number to the
// name.
func (m CreateMode) IsSequential() bool {
	return m == ModePersistentSequential || m == ModeEphemeralSequential || m == ModePersistentSequentialWithTTL
}

// IsContainer reports whether the mode is a container's.
func (m CreateMode) IsContainer() bool { return m == ModeContainer }

// IsTTL reports whether the mode is a TTL node's.
func (m CreateMode) IsTTL() bool {
	return m == ModePersistentWithTTL || m == ModePersistentSequentialWithTTL
}

// Perm is a set of ACL permission bits, with ZooKeeper's values
// (ZooDefs.Perms).
type Perm int32

// ZooKeeper's permission bits.
const (
	PermRead   Perm = 1 << 0
	PermWrite  Perm = 1 << 1
	PermCreate Perm = 1 << 2
	PermDelete Perm = 1 << 3
	PermAdmin  Perm = 1 << 4
	PermAll    Perm = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)

// Well-known ids (ZooDefs.Ids).
var (
	// AnyoneID is world:anyone, the id every client has.
	AnyoneID = ID{Scheme: "world", ID: "anyone"}
	// AuthIDs is auth:"", which stands for the ids the creating session has
	// authenticated as.
	AuthIDs = ID{Scheme: "auth", ID: ""}
)

// OpenACL returns ZooKeeper's OPEN_ACL_UNSAFE: every permission for
// world:anyone. It returns a new slice each time.
func OpenACL() []ACL { return []ACL{{Perms: PermAll, ID: AnyoneID}} }
