package engine

import (
	"testing"

	"github.com/coordd/coordd/fsm/cmdpb"
)

// TestCodesAreZooKeepers pins every code to ZooKeeper's number
// (KeeperException.Code): clients that get an unknown number throw a
// generic error, so each must be exact.
func TestCodesAreZooKeepers(t *testing.T) {
	zk := map[string]int32{
		"OK": 0, "SystemError": -1, "RuntimeInconsistency": -2, "DataInconsistency": -3,
		"ConnectionLoss": -4, "MarshallingError": -5, "Unimplemented": -6, "OperationTimeout": -7,
		"BadArguments": -8, "UnknownSession": -12, "NewConfigNoQuorum": -13, "ReconfigInProgress": -14,
		"APIError": -100, "NoNode": -101, "NoAuth": -102, "BadVersion": -103,
		"NoChildrenForEphemerals": -108, "NodeExists": -110, "NotEmpty": -111, "SessionExpired": -112,
		"InvalidCallback": -113, "InvalidACL": -114, "AuthFailed": -115, "SessionMoved": -118,
		"NotReadOnly": -119, "EphemeralOnLocalSession": -120, "NoWatcher": -121, "RequestTimeout": -122,
		"ReconfigDisabled": -123, "QuotaExceeded": -125, "Throttled": -127,
	}
	for _, c := range Codes() {
		if c == Unavailable {
			continue
		}
		want, ok := zk[c.String()]
		if !ok {
			t.Errorf("code %d (%s) is not ZooKeeper's", int32(c), c)
			continue
		}
		if int32(c) != want {
			t.Errorf("%s is %d, ZooKeeper's is %d", c, int32(c), want)
		}
		delete(zk, c.String())
	}
	for name := range zk {
		t.Errorf("ZooKeeper's %s has no code", name)
	}
}

// TestResultCodesMapByNumber: the FSM's result codes (absolute numbers)
// map onto the codes of the same name.
func TestResultCodesMapByNumber(t *testing.T) {
	names := map[cmdpb.Code]Code{
		cmdpb.Code_OK: OK, cmdpb.Code_SYSTEM_ERROR: SystemError, cmdpb.Code_RUNTIME_INCONSISTENCY: RuntimeInconsistency,
		cmdpb.Code_BAD_ARGUMENTS: BadArguments, cmdpb.Code_NO_NODE: NoNode, cmdpb.Code_BAD_VERSION: BadVersion,
		cmdpb.Code_NO_CHILDREN_FOR_EPHEMERALS: NoChildrenForEphemerals, cmdpb.Code_NODE_EXISTS: NodeExists,
		cmdpb.Code_NOT_EMPTY: NotEmpty, cmdpb.Code_SESSION_EXPIRED: SessionExpired, cmdpb.Code_SESSION_MOVED: SessionMoved,
		cmdpb.Code_NO_AUTH: NoAuth, cmdpb.Code_INVALID_ACL: InvalidACL,
	}
	for v := range cmdpb.Code_name {
		c := cmdpb.Code(v)
		want, ok := names[c]
		if !ok {
			t.Errorf("result code %s is not pinned here", c)
			continue
		}
		if got := fromResult(c); got != want {
			t.Errorf("result code %s maps to %s, want %s", c, got, want)
		}
	}
}
