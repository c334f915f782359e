package jute

import "strconv"

// OpCode is the type of a request (RequestHeader.Type), of an op in a multi,
// and of a result in a multi response, with ZooKeeper's numbers
// (ZooDefs.OpCode).
type OpCode int32

// The opcodes of ZooKeeper 3.8/3.9.
const (
	OpNotification         OpCode = 0 // never sent by a client; ZooKeeper answers it Unimplemented
	OpCreate               OpCode = 1
	OpDelete               OpCode = 2
	OpExists               OpCode = 3
	OpGetData              OpCode = 4 // also getConfig: a getData of ConfigPath
	OpSetData              OpCode = 5
	OpGetACL               OpCode = 6
	OpSetACL               OpCode = 7
	OpGetChildren          OpCode = 8
	OpSync                 OpCode = 9
	OpPing                 OpCode = 11
	OpGetChildren2         OpCode = 12
	OpCheck                OpCode = 13 // only inside a multi; ZooKeeper answers a lone check Unimplemented
	OpMulti                OpCode = 14
	OpCreate2              OpCode = 15
	OpReconfig             OpCode = 16
	OpCheckWatches         OpCode = 17
	OpRemoveWatches        OpCode = 18
	OpCreateContainer      OpCode = 19
	OpDeleteContainer      OpCode = 20 // the server's own reaper; no client sends it
	OpCreateTTL            OpCode = 21
	OpMultiRead            OpCode = 22
	OpAuth                 OpCode = 100
	OpSetWatches           OpCode = 101
	OpSASL                 OpCode = 102
	OpGetEphemerals        OpCode = 103
	OpGetAllChildrenNumber OpCode = 104
	OpSetWatches2          OpCode = 105
	OpAddWatch             OpCode = 106
	OpWhoAmI               OpCode = 107
	OpCreateSession        OpCode = -10 // internal to the server; a client connects with a ConnectRequest
	OpCloseSession         OpCode = -11
	OpError                OpCode = -1 // the type of a failed op's result in a multi response
)

var opNames = map[OpCode]string{
	OpNotification:         "notification",
	OpCreate:               "create",
	OpDelete:               "delete",
	OpExists:               "exists",
	OpGetData:              "getData",
	OpSetData:              "setData",
	OpGetACL:               "getACL",
	OpSetACL:               "setACL",
	OpGetChildren:          "getChildren",
	OpSync:                 "sync",
	OpPing:                 "ping",
	OpGetChildren2:         "getChildren2",
	OpCheck:                "check",
	OpMulti:                "multi",
	OpCreate2:              "create2",
	OpReconfig:             "reconfig",
	OpCheckWatches:         "checkWatches",
	OpRemoveWatches:        "removeWatches",
	OpCreateContainer:      "createContainer",
	OpDeleteContainer:      "deleteContainer",
	OpCreateTTL:            "createTTL",
	OpMultiRead:            "multiRead",
	OpAuth:                 "auth",
	OpSetWatches:           "setWatches",
	OpSASL:                 "sasl",
	OpGetEphemerals:        "getEphemerals",
	OpGetAllChildrenNumber: "getAllChildrenNumber",
	OpSetWatches2:          "setWatches2",
	OpAddWatch:             "addWatch",
	OpWhoAmI:               "whoAmI",
	OpCreateSession:        "createSession",
	OpCloseSession:         "closeSession",
	OpError:                "error",
}

// String returns ZooKeeper's name of the opcode (the ZooDefs.OpCode field:
// "getChildren2", "closeSession"), or "OpCode(n)" for a number it does not
// define.
func (o OpCode) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return "OpCode(" + strconv.Itoa(int(o)) + ")"
}

// Special xids: a request or reply with one of these in its header is not an
// ordinary request/reply pair (ClientCnxn). An ordinary xid is positive.
const (
	// XidNotification is the xid of a watch notification from the server
	// (the reply header is followed by a WatcherEvent).
	XidNotification int32 = -1
	// XidPing is the xid of a ping and of its reply.
	XidPing int32 = -2
	// XidAuth is the xid of the Java client's auth (addAuth) request and of
	// its reply. go-zookeeper sends auth with an ordinary xid; a server
	// answers with the xid the request had.
	XidAuth int32 = -4
	// XidSetWatches is the xid of the Java client's setWatches and
	// setWatches2 requests on reconnect, and of their replies. go-zookeeper
	// sends setWatches with ordinary xids. (No ZooKeeper client uses -3.)
	XidSetWatches int32 = -8
)

// ProtocolVersion is the version every ZooKeeper client puts in its
// ConnectRequest and every server answers in its ConnectResponse.
const ProtocolVersion int32 = 0

// DefaultMaxBuffer is ZooKeeper's default jute.maxbuffer (0xfffff bytes, one
// byte short of 1 MiB): the largest frame a server accepts from a client
// unless configured otherwise.
const DefaultMaxBuffer = 0xfffff

// ConfigPath is the znode a client's getConfig reads: ZooKeeper has no
// getConfig opcode, the client sends a getData of this path.
const ConfigPath = "/zookeeper/config"
