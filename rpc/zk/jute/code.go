package jute

import "strconv"

// Code is an error code on the wire (ReplyHeader.Err, a multi result's
// error), with ZooKeeper's numbers (KeeperException.Code): 0 for success, a
// negative number for each error.
type Code int32

// ZooKeeper's error codes.
const (
	CodeOK                           Code = 0
	CodeSystemError                  Code = -1
	CodeRuntimeInconsistency         Code = -2
	CodeDataInconsistency            Code = -3
	CodeConnectionLoss               Code = -4
	CodeMarshallingError             Code = -5
	CodeUnimplemented                Code = -6
	CodeOperationTimeout             Code = -7
	CodeBadArguments                 Code = -8
	CodeUnknownSession               Code = -12
	CodeNewConfigNoQuorum            Code = -13
	CodeReconfigInProgress           Code = -14
	CodeAPIError                     Code = -100
	CodeNoNode                       Code = -101
	CodeNoAuth                       Code = -102
	CodeBadVersion                   Code = -103
	CodeNoChildrenForEphemerals      Code = -108
	CodeNodeExists                   Code = -110
	CodeNotEmpty                     Code = -111
	CodeSessionExpired               Code = -112
	CodeInvalidCallback              Code = -113
	CodeInvalidACL                   Code = -114
	CodeAuthFailed                   Code = -115
	CodeSessionMoved                 Code = -118
	CodeNotReadOnly                  Code = -119
	CodeEphemeralOnLocalSession      Code = -120
	CodeNoWatcher                    Code = -121
	CodeRequestTimeout               Code = -122
	CodeReconfigDisabled             Code = -123
	CodeSessionClosedRequireSASLAuth Code = -124
	CodeQuotaExceeded                Code = -125
	CodeThrottledOp                  Code = -127
)

// codeNames spells each code as ZooKeeper's KeeperException does in the
// name of the code's exception class (NoNodeException) and of its
// deprecated int constant (Code.NoNode).
var codeNames = map[Code]string{
	CodeOK:                           "OK",
	CodeSystemError:                  "SystemError",
	CodeRuntimeInconsistency:         "RuntimeInconsistency",
	CodeDataInconsistency:            "DataInconsistency",
	CodeConnectionLoss:               "ConnectionLoss",
	CodeMarshallingError:             "MarshallingError",
	CodeUnimplemented:                "Unimplemented",
	CodeOperationTimeout:             "OperationTimeout",
	CodeBadArguments:                 "BadArguments",
	CodeUnknownSession:               "UnknownSession",
	CodeNewConfigNoQuorum:            "NewConfigNoQuorum",
	CodeReconfigInProgress:           "ReconfigInProgress",
	CodeAPIError:                     "APIError",
	CodeNoNode:                       "NoNode",
	CodeNoAuth:                       "NoAuth",
	CodeBadVersion:                   "BadVersion",
	CodeNoChildrenForEphemerals:      "NoChildrenForEphemerals",
	CodeNodeExists:                   "NodeExists",
	CodeNotEmpty:                     "NotEmpty",
	CodeSessionExpired:               "SessionExpired",
	CodeInvalidCallback:              "InvalidCallback",
	CodeInvalidACL:                   "InvalidACL",
	CodeAuthFailed:                   "AuthFailed",
	CodeSessionMoved:                 "SessionMoved",
	CodeNotReadOnly:                  "NotReadOnly",
	CodeEphemeralOnLocalSession:      "EphemeralOnLocalSession",
	CodeNoWatcher:                    "NoWatcher",
	CodeRequestTimeout:               "RequestTimeout",
	CodeReconfigDisabled:             "ReconfigDisabled",
	CodeSessionClosedRequireSASLAuth: "SessionClosedRequireSaslAuth",
	CodeQuotaExceeded:                "QuotaExceeded",
	CodeThrottledOp:                  "ThrottledOp",
}

// String returns ZooKeeper's camel-case name of the code, the one its
// exception classes carry: "NoNode" for KeeperException.Code.NONODE (-101),
// "OK" for 0; "Code(n)" for a number ZooKeeper does not define.
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// Known reports whether ZooKeeper defines the code. A Java client throws on
// a code it does not know, so a server sends only known ones.
func (c Code) Known() bool {
	_, ok := codeNames[c]
	return ok
}
