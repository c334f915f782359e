package bench

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// Config is what one invocation of the bench verb measures and how it
// reaches the cluster. Check validates it and fills in the defaults.
type Config struct {
	// Servers are the cluster's client addresses (host:port).
	Servers []string
	// Timeout bounds each step: opening a session, a setup or cleanup
	// call, and every measured op (a watchdog fails an op that runs
	// longer).
	Timeout time.Duration
	// SessionTimeout is the session timeout every session asks for.
	SessionTimeout time.Duration
	// TLS, if set, is the client side of the client port's TLS.
	TLS *tls.Config
	// Protocol is the client protocol of the sessions: "grpc" (coordd's Go
	// client; "" means it) or "zk" (ZooKeeper's, through go-zookeeper).
	Protocol string

	// Duration is the measured time of each run; Warmup the time before it
	// whose ops are not counted. With AutoWarmup, Check sets Warmup to 10%
	// of Duration, at most a second.
	Duration, Warmup time.Duration
	AutoWarmup       bool
	// ValueSize is the size in bytes of the values written.
	ValueSize int
	// Keys is the number of keys read (write uses at least one per client).
	Keys int
	// Watchers is the number of watching sessions of watch and
	// watch-recursive when the arguments name none.
	Watchers int
	// TreeNodes, RecursiveWatches and Writers shape watch-recursive: its
	// tree, its recursive watches and its writing sessions.
	TreeNodes, RecursiveWatches, Writers int
	// Root is the node under which the benchmark works; it is deleted at
	// the end unless Keep.
	Root string
	Keep bool
	// ShareConns makes the gRPC sessions share one connection per server
	// (client.Pool); a ZooKeeper session always has a connection of its
	// own.
	ShareConns bool

	// Log receives the progress line of each run (every second), the
	// failures of runs and of the cleanup, as coordctl's stderr.
	Log io.Writer
	// Terminal says that Log is a terminal: the progress line is then
	// rewritten in place instead of one line per second.
	Terminal bool
	// Status asks the cluster for every member's usage (the public API's
	// Status call); nil, or an error: the results carry no usage.
	Status func() (*apipb.StatusResponse, error)
	// ErrText renders an error for a person (nil: its Error()), in the
	// results' first_error and the failures logged.
	ErrText func(error) string
}

// Check validates c and fills in its defaults: the protocol, and the
// warm-up when AutoWarmup. Its errors name coordctl's flags.
func (c *Config) Check() error {
	switch {
	case len(c.Servers) == 0:
		return errors.New("no server given")
	case c.Timeout <= 0:
		return errors.New("--timeout must be positive")
	case c.Duration <= 0:
		return errors.New("--duration must be positive")
	case c.ValueSize < 0:
		return errors.New("--value-size must not be negative")
	case c.Keys < 1:
		return errors.New("--keys must be at least 1")
	case c.Watchers < 1:
		return errors.New("--watchers must be at least 1")
	case c.TreeNodes < 1 || c.RecursiveWatches < 1 || c.Writers < 1:
		return errors.New("--tree, --recursive-watches and --writers must be at least 1")
	case c.Root == "" || c.Root[0] != '/' || c.Root == "/" || strings.HasSuffix(c.Root, "/"):
		return fmt.Errorf("--path: %q is not a node path below the root", c.Root)
	case c.Protocol != "" && c.Protocol != ProtocolGRPC && c.Protocol != ProtocolZK:
		return fmt.Errorf("--protocol: %q is neither grpc nor zk", c.Protocol)
	}
	if c.Warmup < 0 {
		return errors.New("--warmup must not be negative")
	}
	if c.Protocol == "" {
		c.Protocol = ProtocolGRPC
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.AutoWarmup {
		c.Warmup = min(time.Second, c.Duration/10)
	}
	return nil
}

// The values of Config.Protocol.
const (
	ProtocolGRPC = "grpc"
	ProtocolZK   = "zk"
)

// errText renders err with c.ErrText.
func (c *Config) errText(err error) string {
	if c.ErrText == nil {
		return err.Error()
	}
	return c.ErrText(err)
}
