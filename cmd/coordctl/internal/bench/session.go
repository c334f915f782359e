package bench

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/client"
)

// session is one session of the benchmark, whichever its client protocol
// (grpcSession, zkSession): what the workloads, the setup and the cleanup
// ask of it. Errors are the protocol's own (its client's sentinels), so
// that a result's first error says what the client said; nodeExists,
// noNode and sessionGone know both. go-zookeeper's calls take no context:
// a call of a zkSession ends with its connection (the client times it out
// after two thirds of the session timeout without an answer).
type session interface {
	// server is the address of the server the session is connected to.
	server() string
	// set writes data to path whatever its version and returns the zxid
	// of the write.
	set(ctx context.Context, path string, data []byte) (zxid int64, err error)
	get(ctx context.Context, path string) ([]byte, error)
	// syncGet syncs path and reads it: coordd's client sends both at once
	// (one op, Client.SyncGet); go-zookeeper's Sync waits for its answer
	// before the read is sent (two round trips). Its error names the path
	// and which call failed.
	syncGet(ctx context.Context, path string) error
	sync(ctx context.Context, path string) error
	exists(ctx context.Context, path string) error
	// create creates path (persistent, or ephemeral and sequential) and
	// returns its name.
	create(ctx context.Context, path string, data []byte, ephemeralSequential bool) (string, error)
	// delete deletes path whatever its version.
	delete(ctx context.Context, path string) error
	children(ctx context.Context, path string) ([]string, error)
	// watchData sets a one-shot data watch on path; wait blocks until it
	// fires (an error for any event but a data change) or ctx ends.
	watchData(ctx context.Context, path string) (wait func(ctx context.Context) error, err error)
	// mutex is the protocol's own lock recipe on path (lockrecipe's Mutex,
	// go-zookeeper's Lock), for this session.
	mutex(path string) mutex
	// losses returns the session's expiries, suspensions and lost
	// connections since the last call (the first: since it opened).
	losses() []sessionLoss
	// close ends the session (its ephemerals go with it).
	close(ctx context.Context) error
}

// mutex is a lock recipe held by one session.
type mutex interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// sessionLoss is a moment a session was in danger: it expired, was
// suspended (coordd's client: the leader has not confirmed it lately) or
// lost its connection. state is named as package client names it
// ("Expired", "Suspended", "Disconnected"); err is the cause, when the
// client gives one.
type sessionLoss struct {
	state string
	err   error
}

// protocol opens the sessions of one client protocol.
type protocol interface {
	// open opens a measured session, within Config.Timeout, on the first
	// of servers that takes it (a ZooKeeper session: on the first,
	// always). Its error names the servers.
	open(ctx context.Context, servers []string) (session, error)
	// admin opens, as open does, the session that sets up, cleans up and
	// writes the watch workload's key, on any of servers.
	admin(ctx context.Context, servers []string) (session, error)
	// close releases what the protocol's sessions share.
	close()
}

// nodeExists reports whether err says that the node exists already.
func nodeExists(err error) bool {
	return errors.Is(err, client.ErrNodeExists) || errors.Is(err, zk.ErrNodeExists)
}

// noNode reports whether err says that the node does not exist.
func noNode(err error) bool {
	return errors.Is(err, client.ErrNoNode) || errors.Is(err, zk.ErrNoNode)
}

// sessionGone reports whether err says that the session ended for good:
// the worker that met it stops.
func sessionGone(err error) bool {
	return errors.Is(err, client.ErrSessionExpired) || errors.Is(err, client.ErrClosed) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}
