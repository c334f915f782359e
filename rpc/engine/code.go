package engine

import (
	"fmt"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
)

// Code is the outcome of a request: ZooKeeper's KeeperException code, with
// ZooKeeper's numbers (0 or negative), so that the ZooKeeper front-end puts
// it on the wire as it is and the gRPC front-end sends its absolute value.
// Unavailable is coordd's own.
type Code int32

// The codes, with ZooKeeper's numbers (KeeperException.Code).
const (
	OK                      Code = 0
	SystemError             Code = -1
	RuntimeInconsistency    Code = -2
	DataInconsistency       Code = -3
	ConnectionLoss          Code = -4
	MarshallingError        Code = -5
	Unimplemented           Code = -6
	OperationTimeout        Code = -7
	BadArguments            Code = -8
	UnknownSession          Code = -12
	NewConfigNoQuorum       Code = -13
	ReconfigInProgress      Code = -14
	APIError                Code = -100
	NoNode                  Code = -101
	NoAuth                  Code = -102
	BadVersion              Code = -103
	NoChildrenForEphemerals Code = -108
	NodeExists              Code = -110
	NotEmpty                Code = -111
	SessionExpired          Code = -112
	InvalidCallback         Code = -113
	InvalidACL              Code = -114
	AuthFailed              Code = -115
	SessionMoved            Code = -118
	NotReadOnly             Code = -119
	EphemeralOnLocalSession Code = -120
	NoWatcher               Code = -121
	RequestTimeout          Code = -122
	ReconfigDisabled        Code = -123
	QuotaExceeded           Code = -125
	Throttled               Code = -127

	// Unavailable is coordd's: this server cannot serve the request now (no
	// leader, behind the client, shutting down); the client should try
	// another. It has no ZooKeeper number (the ZooKeeper front-end closes
	// the connection instead, which is how ZooKeeper says it).
	Unavailable Code = -200
)

var codeNames = map[Code]string{
	OK: "OK", SystemError: "SystemError", RuntimeInconsistency: "RuntimeInconsistency",
	DataInconsistency: "DataInconsistency", ConnectionLoss: "ConnectionLoss",
	MarshallingError: "MarshallingError", Unimplemented: "Unimplemented",
	OperationTimeout: "OperationTimeout", BadArguments: "BadArguments",
	UnknownSession: "UnknownSession", NewConfigNoQuorum: "NewConfigNoQuorum",
	ReconfigInProgress: "ReconfigInProgress", APIError: "APIError", NoNode: "NoNode",
	NoAuth: "NoAuth", BadVersion: "BadVersion", NoChildrenForEphemerals: "NoChildrenForEphemerals",
	NodeExists: "NodeExists", NotEmpty: "NotEmpty", SessionExpired: "SessionExpired",
	InvalidCallback: "InvalidCallback", InvalidACL: "InvalidACL", AuthFailed: "AuthFailed",
	SessionMoved: "SessionMoved", NotReadOnly: "NotReadOnly",
	EphemeralOnLocalSession: "EphemeralOnLocalSession", NoWatcher: "NoWatcher",
	RequestTimeout: "RequestTimeout", ReconfigDisabled: "ReconfigDisabled",
	QuotaExceeded: "QuotaExceeded", Throttled: "Throttled", Unavailable: "Unavailable",
}

// String returns ZooKeeper's name for the code (KeeperException's class
// names: "NoNode", "BadVersion", ...).
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("Code(%d)", int32(c))
}

// Codes lists every code, for the front-ends' tests.
func Codes() []Code {
	out := make([]Code, 0, len(codeNames))
	for c := range codeNames {
		out = append(out, c)
	}
	return out
}

// fromResult maps the FSM's result code (ZooKeeper's absolute numbers) to a
// Code. Errors of the tree are mapped once, by fsm.CodeOf; this only flips
// the sign.
func fromResult(c cmdpb.Code) Code { return Code(-int32(c)) }

// codeOf maps an error of a local read (a tree error) to its Code, through
// the FSM's one table.
func codeOf(err error) Code { return fromResult(fsm.CodeOf(err)) }
