package jute

import "testing"

// The numbers below are copied from ZooKeeper 3.9's sources (ZooDefs.java,
// KeeperException.java, Watcher.java, AddWatchMode.java, CreateMode.java,
// ClientCnxn.java, BinaryInputArchive.java); a client that receives any
// other number misbehaves, so each is pinned here.

func TestOpCodesAreZooKeepers(t *testing.T) {
	want := []struct {
		op   OpCode
		num  int32
		name string
	}{
		{OpNotification, 0, "notification"},
		{OpCreate, 1, "create"},
		{OpDelete, 2, "delete"},
		{OpExists, 3, "exists"},
		{OpGetData, 4, "getData"},
		{OpSetData, 5, "setData"},
		{OpGetACL, 6, "getACL"},
		{OpSetACL, 7, "setACL"},
		{OpGetChildren, 8, "getChildren"},
		{OpSync, 9, "sync"},
		{OpPing, 11, "ping"},
		{OpGetChildren2, 12, "getChildren2"},
		{OpCheck, 13, "check"},
		{OpMulti, 14, "multi"},
		{OpCreate2, 15, "create2"},
		{OpReconfig, 16, "reconfig"},
		{OpCheckWatches, 17, "checkWatches"},
		{OpRemoveWatches, 18, "removeWatches"},
		{OpCreateContainer, 19, "createContainer"},
		{OpDeleteContainer, 20, "deleteContainer"},
		{OpCreateTTL, 21, "createTTL"},
		{OpMultiRead, 22, "multiRead"},
		{OpAuth, 100, "auth"},
		{OpSetWatches, 101, "setWatches"},
		{OpSASL, 102, "sasl"},
		{OpGetEphemerals, 103, "getEphemerals"},
		{OpGetAllChildrenNumber, 104, "getAllChildrenNumber"},
		{OpSetWatches2, 105, "setWatches2"},
		{OpAddWatch, 106, "addWatch"},
		{OpWhoAmI, 107, "whoAmI"},
		{OpCreateSession, -10, "createSession"},
		{OpCloseSession, -11, "closeSession"},
		{OpError, -1, "error"},
	}
	if len(want) != len(opNames) {
		t.Errorf("the package names %d opcodes, ZooKeeper has %d", len(opNames), len(want))
	}
	for _, w := range want {
		if int32(w.op) != w.num {
			t.Errorf("%s = %d, ZooKeeper's is %d", w.name, w.op, w.num)
		}
		if w.op.String() != w.name {
			t.Errorf("OpCode(%d).String() = %q, want %q", w.num, w.op.String(), w.name)
		}
	}
	if s := OpCode(10).String(); s != "OpCode(10)" {
		t.Errorf("unknown opcode prints %q", s)
	}
}

func TestCodesAreZooKeepers(t *testing.T) {
	want := []struct {
		code Code
		num  int32
		name string
	}{
		{CodeOK, 0, "OK"},
		{CodeSystemError, -1, "SystemError"},
		{CodeRuntimeInconsistency, -2, "RuntimeInconsistency"},
		{CodeDataInconsistency, -3, "DataInconsistency"},
		{CodeConnectionLoss, -4, "ConnectionLoss"},
		{CodeMarshallingError, -5, "MarshallingError"},
		{CodeUnimplemented, -6, "Unimplemented"},
		{CodeOperationTimeout, -7, "OperationTimeout"},
		{CodeBadArguments, -8, "BadArguments"},
		{CodeUnknownSession, -12, "UnknownSession"},
		{CodeNewConfigNoQuorum, -13, "NewConfigNoQuorum"},
		{CodeReconfigInProgress, -14, "ReconfigInProgress"},
		{CodeAPIError, -100, "APIError"},
		{CodeNoNode, -101, "NoNode"},
		{CodeNoAuth, -102, "NoAuth"},
		{CodeBadVersion, -103, "BadVersion"},
		{CodeNoChildrenForEphemerals, -108, "NoChildrenForEphemerals"},
		{CodeNodeExists, -110, "NodeExists"},
		{CodeNotEmpty, -111, "NotEmpty"},
		{CodeSessionExpired, -112, "SessionExpired"},
		{CodeInvalidCallback, -113, "InvalidCallback"},
		{CodeInvalidACL, -114, "InvalidACL"},
		{CodeAuthFailed, -115, "AuthFailed"},
		{CodeSessionMoved, -118, "SessionMoved"},
		{CodeNotReadOnly, -119, "NotReadOnly"},
		{CodeEphemeralOnLocalSession, -120, "EphemeralOnLocalSession"},
		{CodeNoWatcher, -121, "NoWatcher"},
		{CodeRequestTimeout, -122, "RequestTimeout"},
		{CodeReconfigDisabled, -123, "ReconfigDisabled"},
		{CodeSessionClosedRequireSASLAuth, -124, "SessionClosedRequireSaslAuth"},
		{CodeQuotaExceeded, -125, "QuotaExceeded"},
		{CodeThrottledOp, -127, "ThrottledOp"},
	}
	if len(want) != len(codeNames) {
		t.Errorf("the package names %d codes, ZooKeeper has %d", len(codeNames), len(want))
	}
	for _, w := range want {
		if int32(w.code) != w.num {
			t.Errorf("%s = %d, ZooKeeper's is %d", w.name, w.code, w.num)
		}
		if w.code.String() != w.name {
			t.Errorf("Code(%d).String() = %q, want %q", w.num, w.code.String(), w.name)
		}
		if !w.code.Known() {
			t.Errorf("%s is not Known", w.name)
		}
	}
	// go-zookeeper defines -9, -116 and -117, which ZooKeeper does not.
	for _, c := range []Code{-9, -116, -117, -126, 1} {
		if c.Known() {
			t.Errorf("Code(%d) is Known but ZooKeeper does not define it", c)
		}
		if c.String() == "" {
			t.Errorf("Code(%d) prints nothing", c)
		}
	}
}

func TestSpecialNumbersAreZooKeepers(t *testing.T) {
	ints := []struct {
		name      string
		got, want int64
	}{
		{"XidNotification", int64(XidNotification), -1},
		{"XidPing", int64(XidPing), -2},
		{"XidAuth", int64(XidAuth), -4},
		{"XidSetWatches", int64(XidSetWatches), -8},
		{"ProtocolVersion", int64(ProtocolVersion), 0},
		{"DefaultMaxBuffer", DefaultMaxBuffer, 1048575},

		{"EventNone", int64(EventNone), -1},
		{"EventNodeCreated", int64(EventNodeCreated), 1},
		{"EventNodeDeleted", int64(EventNodeDeleted), 2},
		{"EventNodeDataChanged", int64(EventNodeDataChanged), 3},
		{"EventNodeChildrenChanged", int64(EventNodeChildrenChanged), 4},
		{"EventDataWatchRemoved", int64(EventDataWatchRemoved), 5},
		{"EventChildWatchRemoved", int64(EventChildWatchRemoved), 6},
		{"EventPersistentWatchRemoved", int64(EventPersistentWatchRemoved), 7},

		{"StateUnknown", int64(StateUnknown), -1},
		{"StateDisconnected", int64(StateDisconnected), 0},
		{"StateNoSyncConnected", int64(StateNoSyncConnected), 1},
		{"StateSyncConnected", int64(StateSyncConnected), 3},
		{"StateAuthFailed", int64(StateAuthFailed), 4},
		{"StateConnectedReadOnly", int64(StateConnectedReadOnly), 5},
		{"StateSASLAuthenticated", int64(StateSASLAuthenticated), 6},
		{"StateExpired", int64(StateExpired), -112},
		{"StateClosed", int64(StateClosed), 7},

		{"WatcherChildren", int64(WatcherChildren), 1},
		{"WatcherData", int64(WatcherData), 2},
		{"WatcherAny", int64(WatcherAny), 3},
		{"WatcherPersistent", int64(WatcherPersistent), 4},
		{"WatcherPersistentRecursive", int64(WatcherPersistentRecursive), 5},

		{"AddWatchPersistent", int64(AddWatchPersistent), 0},
		{"AddWatchPersistentRecursive", int64(AddWatchPersistentRecursive), 1},

		{"PermRead", int64(PermRead), 1},
		{"PermWrite", int64(PermWrite), 2},
		{"PermCreate", int64(PermCreate), 4},
		{"PermDelete", int64(PermDelete), 8},
		{"PermAdmin", int64(PermAdmin), 16},
		{"PermAll", int64(PermAll), 31},
	}
	for _, c := range ints {
		if c.got != c.want {
			t.Errorf("%s = %d, ZooKeeper's is %d", c.name, c.got, c.want)
		}
	}
	names := []struct{ got, want string }{
		{EventNodeChildrenChanged.String(), "NodeChildrenChanged"},
		{EventType(9).String(), "EventType(9)"},
		{StateSyncConnected.String(), "SyncConnected"},
		{StateExpired.String(), "Expired"},
		{State(2).String(), "State(2)"},
		{WatcherAny.String(), "Any"},
		{WatcherType(0).String(), "WatcherType(0)"},
		{AddWatchPersistentRecursive.String(), "PERSISTENT_RECURSIVE"},
		{AddWatchMode(2).String(), "AddWatchMode(2)"},
	}
	for _, n := range names {
		if n.got != n.want {
			t.Errorf("got %q, want %q", n.got, n.want)
		}
	}
	if !WatcherPersistentRecursive.Valid() || WatcherType(0).Valid() || WatcherType(6).Valid() {
		t.Error("WatcherType.Valid is wrong")
	}
	if AnyoneID != (ID{"world", "anyone"}) || AuthIDs != (ID{"auth", ""}) {
		t.Error("well-known ids differ from ZooDefs.Ids")
	}
	acl := OpenACL()
	if len(acl) != 1 || acl[0] != (ACL{Perms: 31, ID: ID{"world", "anyone"}}) {
		t.Errorf("OpenACL = %v", acl)
	}
	acl[0].Perms = 0
	if OpenACL()[0].Perms != PermAll {
		t.Error("OpenACL shares its slice")
	}
	if ConfigPath != "/zookeeper/config" {
		t.Errorf("ConfigPath = %q", ConfigPath)
	}
}

func TestCreateModesAreZooKeepers(t *testing.T) {
	// CreateMode.java: flag, ephemeral, sequential, container, TTL.
	want := []struct {
		mode                                  CreateMode
		flag                                  int32
		name                                  string
		ephemeral, sequential, container, ttl bool
	}{
		{ModePersistent, 0, "PERSISTENT", false, false, false, false},
		{ModeEphemeral, 1, "EPHEMERAL", true, false, false, false},
		{ModePersistentSequential, 2, "PERSISTENT_SEQUENTIAL", false, true, false, false},
		{ModeEphemeralSequential, 3, "EPHEMERAL_SEQUENTIAL", true, true, false, false},
		{ModeContainer, 4, "CONTAINER", false, false, true, false},
		{ModePersistentWithTTL, 5, "PERSISTENT_WITH_TTL", false, false, false, true},
		{ModePersistentSequentialWithTTL, 6, "PERSISTENT_SEQUENTIAL_WITH_TTL", false, true, false, true},
	}
	for _, w := range want {
		m := w.mode
		if int32(m) != w.flag || m.String() != w.name || !m.Valid() {
			t.Errorf("%s: flag %d valid %v, want flag %d", m, int32(m), m.Valid(), w.flag)
		}
		if m.IsEphemeral() != w.ephemeral || m.IsSequential() != w.sequential || m.IsContainer() != w.container || m.IsTTL() != w.ttl {
			t.Errorf("%s: ephemeral %v sequential %v container %v ttl %v", m, m.IsEphemeral(), m.IsSequential(), m.IsContainer(), m.IsTTL())
		}
	}
	for _, bad := range []CreateMode{-1, 7, 1 << 20} {
		if bad.Valid() {
			t.Errorf("CreateMode(%d) is Valid", bad)
		}
		if bad.String() == "" {
			t.Errorf("CreateMode(%d) prints nothing", bad)
		}
	}
}
