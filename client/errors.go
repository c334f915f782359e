package client

import (
	"errors"
	"fmt"

	"github.com/coordd/coordd/rpc/apipb"
)

// Sentinel errors. Errors returned by the Client wrap one of these: match them
// with errors.Is, never with strings. An error reported by the server also
// carries the server's message in its text.
var (
	// ErrNoNode means the node does not exist.
	ErrNoNode = errors.New("client: node does not exist")
	// ErrNodeExists means the node already exists.
	ErrNodeExists = errors.New("client: node already exists")
	// ErrBadVersion means the expected version did not match the node's.
	ErrBadVersion = errors.New("client: version does not match")
	// ErrNotEmpty means the node has children and cannot be deleted.
	ErrNotEmpty = errors.New("client: node has children")
	// ErrNoChildrenForEphemerals means an ephemeral node cannot have children.
	ErrNoChildrenForEphemerals = errors.New("client: ephemeral nodes may not have children")
	// ErrBadArguments means the server rejected the request's arguments
	// (an invalid path, TTL, mode, ...).
	ErrBadArguments = errors.New("client: bad arguments")
	// ErrRuntimeInconsistency is reported for the ops of a failed Multi that
	// come after the failing op (they were not attempted).
	ErrRuntimeInconsistency = errors.New("client: runtime inconsistency")
	// ErrSessionExpired means the session is gone: the server expired it, or
	// no server accepted it within its timeout. The Client is then unusable.
	ErrSessionExpired = errors.New("client: session expired")
	// ErrAuthFailed means a server refused the session's credentials.
	ErrAuthFailed = errors.New("client: authentication failed")
	// ErrNoWatcher means there is no watch of the given kind on the path.
	ErrNoWatcher = errors.New("client: no watcher")
	// ErrUnimplemented means the server does not implement the operation.
	ErrUnimplemented = errors.New("client: operation not implemented")
	// ErrSystemError is an internal server error; unknown wire error codes map
	// to it too.
	ErrSystemError = errors.New("client: system error")
	// ErrMarshalling means the server could not decode or encode a message.
	ErrMarshalling = errors.New("client: marshalling error")
	// ErrConnectionLoss is reported when a server says so; the client itself
	// never returns it for a broken stream, it fails over and re-sends. It
	// is also the Err of the EventResync a persistent watch receives after
	// the session moved to another server.
	ErrConnectionLoss = errors.New("client: connection lost")
	// ErrOperationTimeout means the server gave up on the operation.
	ErrOperationTimeout = errors.New("client: operation timed out")
	// ErrUnavailable means a server could not serve the session or request
	// now (no leader, behind the client, shutting down). The client handles it
	// by trying another server; it reaches callers of Connect when no server
	// accepted the session.
	ErrUnavailable = errors.New("client: server unavailable")
	// ErrNoAuth means the session lacks the permission the operation
	// needs on the node (its ACL).
	ErrNoAuth = errors.New("client: not authorized")
	// ErrInvalidACL means an ACL given to create or setACL is not valid.
	ErrInvalidACL = errors.New("client: invalid ACL")
	// ErrReconfigDisabled means the server does not take membership changes
	// this way.
	ErrReconfigDisabled = errors.New("client: reconfiguration disabled")
	// ErrReconfigInProgress means another membership change is under way.
	ErrReconfigInProgress = errors.New("client: reconfiguration in progress")
	// ErrNewConfigNoQuorum means a membership change could not get a quorum
	// of the new configuration.
	ErrNewConfigNoQuorum = errors.New("client: new configuration has no quorum")
	// ErrQuotaExceeded means a quota of the node's subtree was exceeded.
	ErrQuotaExceeded = errors.New("client: quota exceeded")
	// ErrThrottled means the server refused the request under load.
	ErrThrottled = errors.New("client: request throttled")
	// ErrRequestTimeout means the server gave up waiting for the request.
	ErrRequestTimeout = errors.New("client: request timed out")
	// ErrDataInconsistency, ErrUnknownSession, ErrAPIError,
	// ErrInvalidCallback, ErrSessionMoved, ErrNotReadOnly and
	// ErrEphemeralOnLocalSession are ZooKeeper's codes of those names, which
	// coordd servers do not send today; they are here so that every code
	// has its sentinel.
	ErrDataInconsistency       = errors.New("client: data inconsistency")
	ErrUnknownSession          = errors.New("client: unknown session")
	ErrAPIError                = errors.New("client: API error")
	ErrInvalidCallback         = errors.New("client: invalid callback")
	ErrSessionMoved            = errors.New("client: session moved")
	ErrNotReadOnly             = errors.New("client: not a read-only server")
	ErrEphemeralOnLocalSession = errors.New("client: ephemeral on a local session")
	// ErrWatchOverflow is the Err of the EventResync a persistent watch
	// receives when its reader fell behind its buffer (see AddWatch).
	ErrWatchOverflow = errors.New("client: watch channel overflowed, events were dropped")
	// ErrClosed means the Client was closed.
	ErrClosed = errors.New("client: client closed")
	// ErrOutcomeUnknown means a write was sent but the session ended before
	// its reply arrived: it may or may not have been applied. Errors matching
	// it also match ErrSessionExpired or ErrClosed.
	ErrOutcomeUnknown = errors.New("client: outcome unknown")
)

// codeErrors maps every wire error code to exactly one sentinel.
var codeErrors = map[apipb.ErrorCode]error{
	apipb.ErrorCode_SYSTEM_ERROR:               ErrSystemError,
	apipb.ErrorCode_RUNTIME_INCONSISTENCY:      ErrRuntimeInconsistency,
	apipb.ErrorCode_CONNECTION_LOSS:            ErrConnectionLoss,
	apipb.ErrorCode_MARSHALLING_ERROR:          ErrMarshalling,
	apipb.ErrorCode_UNIMPLEMENTED:              ErrUnimplemented,
	apipb.ErrorCode_OPERATION_TIMEOUT:          ErrOperationTimeout,
	apipb.ErrorCode_BAD_ARGUMENTS:              ErrBadArguments,
	apipb.ErrorCode_NO_NODE:                    ErrNoNode,
	apipb.ErrorCode_BAD_VERSION:                ErrBadVersion,
	apipb.ErrorCode_NO_CHILDREN_FOR_EPHEMERALS: ErrNoChildrenForEphemerals,
	apipb.ErrorCode_NODE_EXISTS:                ErrNodeExists,
	apipb.ErrorCode_NOT_EMPTY:                  ErrNotEmpty,
	apipb.ErrorCode_SESSION_EXPIRED:            ErrSessionExpired,
	apipb.ErrorCode_AUTH_FAILED:                ErrAuthFailed,
	apipb.ErrorCode_NO_WATCHER:                 ErrNoWatcher,
	apipb.ErrorCode_UNAVAILABLE:                ErrUnavailable,
	apipb.ErrorCode_NO_AUTH:                    ErrNoAuth,
	apipb.ErrorCode_INVALID_ACL:                ErrInvalidACL,
	apipb.ErrorCode_RECONFIG_DISABLED:          ErrReconfigDisabled,
	apipb.ErrorCode_RECONFIG_IN_PROGRESS:       ErrReconfigInProgress,
	apipb.ErrorCode_NEW_CONFIG_NO_QUORUM:       ErrNewConfigNoQuorum,
	apipb.ErrorCode_QUOTA_EXCEEDED:             ErrQuotaExceeded,
	apipb.ErrorCode_THROTTLED:                  ErrThrottled,
	apipb.ErrorCode_REQUEST_TIMEOUT:            ErrRequestTimeout,
	apipb.ErrorCode_DATA_INCONSISTENCY:         ErrDataInconsistency,
	apipb.ErrorCode_UNKNOWN_SESSION:            ErrUnknownSession,
	apipb.ErrorCode_API_ERROR:                  ErrAPIError,
	apipb.ErrorCode_INVALID_CALLBACK:           ErrInvalidCallback,
	apipb.ErrorCode_SESSION_MOVED:              ErrSessionMoved,
	apipb.ErrorCode_NOT_READ_ONLY:              ErrNotReadOnly,
	apipb.ErrorCode_EPHEMERAL_ON_LOCAL_SESSION: ErrEphemeralOnLocalSession,
}

// serverError is an error reported by a server: a sentinel plus the server's
// message.
type serverError struct {
	sentinel error
	msg      string
}

func (e *serverError) Error() string {
	if e.msg == "" {
		return e.sentinel.Error()
	}
	return e.sentinel.Error() + ": " + e.msg
}

func (e *serverError) Unwrap() error { return e.sentinel }

// codeError turns a wire error code and message into an error wrapping the
// code's sentinel; OK gives nil. Unknown codes give ErrSystemError with the
// number in the text.
func codeError(code apipb.ErrorCode, msg string) error {
	if code == apipb.ErrorCode_OK {
		return nil
	}
	sentinel, ok := codeErrors[code]
	if !ok {
		sentinel = ErrSystemError
		if msg == "" {
			msg = fmt.Sprintf("unknown error code %d", int32(code))
		} else {
			msg = fmt.Sprintf("unknown error code %d: %s", int32(code), msg)
		}
	}
	if msg == "" {
		return sentinel
	}
	return &serverError{sentinel: sentinel, msg: msg}
}

// outcomeUnknown wraps the cause of a session's end for a write that was in
// flight without a reply.
func outcomeUnknown(cause error) error {
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, cause)
}
