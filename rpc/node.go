package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/keepalive"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/metrics"
	"github.com/coordd/coordd/rpc/tlsutil"
	"github.com/coordd/coordd/rpc/zk"
	"github.com/coordd/coordd/rpc/zk/sasl"
	"github.com/coordd/coordd/watch"
)

// ErrDataDirOwner means the data dir was created by a server with another id.
var ErrDataDirOwner = errors.New("rpc: data dir belongs to another server id")

// Node is one coordd server.
type Node struct {
	cfg Config
	log *slog.Logger

	fsm  *fsm.FSM
	raft *raft.Raft
	// raftSet is set once raft is: the FSM starts applying inside
	// raft.NewRaft, before the field is assigned, so its callbacks check
	// this before they read raft.
	raftSet atomic.Bool
	trans   *raft.NetworkTransport
	store   raftStore
	disk    *diskSpace // what failed for want of space
	// crashed is set by tests that play a machine stopping: Close then
	// stops at once, without handing leadership over first.
	crashed atomic.Bool
	dirLock *dirLock // the data dir's, held until Close
	mux     *peerMux

	clientLn    net.Listener
	adminLn     net.Listener    // nil without Config.MetricsAddr
	clientTLS   *tls.Config     // nil: the client port is plaintext
	peerTLS     *tlsutil.Source // nil: the peer port is plaintext
	refusals    *refusals       // refused connections, logged once a while
	grpcClients *muxListener    // the client port's gRPC connections
	zk          *zk.Server
	sasl        *sasl.Source // nil without Config.SASLUsers
	clientGRPC  *grpc.Server
	peerGRPC    *grpc.Server

	engine   *engine.Engine
	prop     *proposer
	leader   *leaderDuties
	peers    *peerClients
	verified *roundGroup // read-index rounds as the leader
	asked    *roundGroup // read-index calls to the leader as a follower

	memberMu sync.Mutex // one membership change at a time, on the leader

	metrics     *metrics.Metrics
	adminMux    *http.ServeMux
	adminSrv    *http.Server
	health      *health.Server // gRPC's health service, from readiness
	ready       readiness
	liveReading atomic.Bool // a /livez read of the FSM is under way
	peerLogs    *peerLogs   // how Raft's failures to reach a peer are logged

	leaderSeen      sync.Mutex
	leaderlessSince time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once

	built    chan struct{} // closed once NewNode has returned the node
	member   chan struct{} // closed once this server is in the configuration (Member)
	haltOnce sync.Once
	halted   chan struct{} // closed by halt
	haltErr  error         // set before halted closes
}

// maxMessageSize bounds one gRPC message: the largest znode plus headroom.
func (c *Config) maxMessageSize() int {
	n := c.MaxDataSize
	if n <= 0 {
		n = 1 << 20
	}
	return n + 64<<10
}

// peerMessageLimit bounds one gRPC message between servers: a forwarded
// write of the largest data any server may admit (fsm.DataSizeCap), with
// room for its request and framing. It is the same on every server whatever
// its MaxDataSize, so that a write one server admits always reaches the
// leader: a smaller limit would end the Forward stream, and the write, sent
// again on every new stream, would hold up every later one.
const peerMessageLimit = fsm.DataSizeCap + 64<<10 + 1<<10

// minWireLimit is the least one message on the client port may carry,
// either way. A reply can be far larger than any request: a getChildren
// listing of 37 000 children with 30-byte names is 1.2 MB.
const minWireLimit = 16 << 20

// wireLimit bounds one gRPC message on the client port, either way: at least
// minWireLimit, and always room for the largest request. gRPC ends a stream
// whose message is over its limit, and the client would then resend the
// same request on its next stream, forever. So the port receives requests
// larger than maxMessageSize and refuses them with an error reply, and a
// read whose reply would not fit gets an error reply (oversize).
func (c *Config) wireLimit() int {
	n := minWireLimit
	if c.wire > 0 {
		n = c.wire
	}
	return max(n, c.maxMessageSize())
}

// Flow-control windows of every gRPC connection a server serves or dials.
// Setting them turns off gRPC's bandwidth-delay-product estimation, which
// otherwise answers almost every message received with a PING (and a window
// update) of its own: on a link that carries small requests and replies,
// that is a frame, a syscall and a wake-up on each side per message for
// nothing (CockroachDB sets static windows for the same reason). The stream
// window holds one largest message; the connection's, two.
const (
	streamWindow = 1 << 20
	connWindow   = 2 << 20
)

// maxAppendEntries is how many entries the leader writes, and sends a
// follower, at most at once (hashicorp/raft's default is 64). A larger batch
// means fewer fsyncs under load.
const maxAppendEntries = 512

// logCacheBytes bounds the data of the entries the log cache keeps (never
// the batch being written): a few batches of ordinary writes, while a
// bulk load of large multis no longer keeps 1 024 of them (13 MB of 100
// creates of 100 bytes each) on every server.
const logCacheBytes = 1 << 20

// NewNode opens the data dir, binds both listeners and starts Raft and the
// servers. It returns an error (and leaves nothing running) on a bad config,
// a busy port, a data dir in use (ErrDataDirInUse) or a data dir of another
// server id.
func NewNode(cfg Config) (*Node, error) {
	return NewNodeContext(context.Background(), cfg)
}

// NewNodeContext is NewNode, abandoned when ctx ends before the server has
// started: it then stops what it started and returns ctx's error (wrapped).
// A start waits on the disk (opening the log, loading the last snapshot)
// and, for a server that may join, on its peers for up to two seconds;
// each step ends early or is followed by a check of ctx.
func NewNodeContext(ctx context.Context, cfg Config) (_ *Node, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.ID), halted: make(chan struct{}), built: make(chan struct{}), member: make(chan struct{})}
	n.refusals = newRefusals(n.log)
	if err := n.loadTLS(); err != nil {
		return nil, err
	}
	if err := n.loadSASL(); err != nil {
		return nil, err
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	stopAbort := context.AfterFunc(ctx, n.cancel)
	s := &starter{ctx: ctx, cfg: cfg, n: n}
	defer func() {
		if err != nil {
			stopAbort()
			n.cancel()
			s.undo()
		}
	}()

	peerLn, err := s.openPorts()
	if err != nil {
		return nil, err
	}
	kind, rec, err := s.checkDataDir()
	if err != nil {
		return nil, err
	}
	s.buildServices(peerLn)
	logs, snaps, err := s.openStores(kind, rec)
	if err != nil {
		return nil, err
	}
	if err := s.startRaft(logs, snaps); err != nil {
		return nil, err
	}
	s.startServing()
	close(n.built)
	if !stopAbort() {
		// ctx ended at the last moment, and n.ctx with it: everything
		// is built, so Close stops it.
		s.cleanup = nil
		n.Close()
		return nil, s.aborted()
	}
	n.log.Info("server started", "client", n.clientLn.Addr().String(), "peer", s.cfg.PeerAddr, "metrics", n.MetricsAddr())
	return n, nil
}

func (n *Node) start(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// ClientAddr returns the address the public API listens on.
func (n *Node) ClientAddr() string { return n.clientLn.Addr().String() }

// ID returns the server id.
func (n *Node) ID() string { return n.cfg.ID }

// Raft exposes the Raft instance (for tests and status).
func (n *Node) Raft() *raft.Raft { return n.raft }

// FSM exposes the state machine (for tests).
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Watches exposes the server's watch table (for tests).
func (n *Node) Watches() *watch.Manager { return n.engine.Watches() }

// IsLeader reports whether this server is the Raft leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// LeaderReady reports whether this server leads and has applied the first
// entry of its term (its session deadlines are being kept from then on).
func (n *Node) LeaderReady() bool {
	n.leader.mu.Lock()
	defer n.leader.mu.Unlock()
	return n.leader.active && n.IsLeader()
}

// Snapshot asks Raft to take a snapshot now.
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// Close stops the server: a leader first hands leadership to a follower
// (handOver), then client streams end, Raft shuts down and the data dir is
// released. It is safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.log.Info("shutting down")
		if !n.crashed.Load() {
			n.handOver()
		}
		n.cancel()
		n.health.Shutdown()
		if n.adminSrv != nil {
			n.adminSrv.Close()
		}
		n.clientLn.Close()
		n.engine.EndAll()
		n.zk.Close()
		stopped := make(chan struct{})
		go func() { n.clientGRPC.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(2 * time.Second):
			n.clientGRPC.Stop()
		}
		n.clientGRPC.Stop()
		n.peers.close()
		n.peerGRPC.Stop()
		if err := n.raft.Shutdown().Error(); err != nil {
			n.log.Warn("raft shutdown", "err", err)
		}
		n.trans.Close()
		n.mux.close()
		n.wg.Wait()
		n.store.Close()
		n.dirLock.release()
	})
	return nil
}

// claimDataDir creates the data dir and records the server id in it, or
// refuses a dir that another id owns.
func claimDataDir(dir, id string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("rpc: data dir: %w", err)
	}
	f := filepath.Join(dir, "server-id")
	b, err := os.ReadFile(f)
	switch {
	case err == nil:
		if got := strings.TrimSpace(string(b)); got != id {
			return fmt.Errorf("%w: %s was created by server %q, this is %q", ErrDataDirOwner, dir, got, id)
		}
		return nil
	case errors.Is(err, os.ErrNotExist):
		if err := os.WriteFile(f, []byte(id+"\n"), 0o640); err != nil {
			return fmt.Errorf("rpc: data dir: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("rpc: data dir: %w", err)
	}
}

// routineRaftLogs lowers the level of hashicorp/raft's messages that
// report normal operation: every cluster elects its first leader (and a new
// one after a leader stops) after a heartbeat timeout, which hashicorp/raft
// logs as a warning.
var routineRaftLogs = map[string]slog.Level{
	"heartbeat timeout reached, starting election": slog.LevelInfo,
}

// hclog routing: Raft logs through an intercept logger whose sink writes to
// slog; the intercept logger itself prints nothing.
type slogSink struct {
	l     *slog.Logger
	peers *peerLogs // nil: every peer failure at Raft's level
}

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...interface{}) {
	lvl := slog.LevelDebug
	switch {
	case level >= hclog.Error:
		lvl = slog.LevelError
	case level == hclog.Warn:
		lvl = slog.LevelWarn
	case level == hclog.Info:
		lvl = slog.LevelInfo
	}
	if l, ok := routineRaftLogs[msg]; ok && l < lvl {
		lvl = l
	}
	lvl = catchUpLevel(msg, lvl, args)
	if s.peers != nil {
		lvl = s.peers.level(msg, lvl, args)
	}
	if !s.l.Enabled(context.Background(), lvl) {
		return
	}
	s.l.Log(context.Background(), lvl, msg, append([]any{"component", name}, args...)...)
}

func newHCLogger(l *slog.Logger, peers *peerLogs) hclog.InterceptLogger {
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "", Output: io.Discard, Level: hclog.Off})
	il.RegisterSink(slogSink{l: l, peers: peers})
	return il
}

// peerBackoff paces the reconnects of a connection to a peer that failed.
// gRPC's default grows to 120 s: a peer down for a minute stayed
// unreachable (its forwarding, read index and Info questions failing at
// once) for up to two more minutes after it was back. A handful of peers
// reconnecting every second costs nothing.
var peerBackoff = backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}

// peerConnectTimeout bounds one attempt to connect to a peer (gRPC's
// default is 20 s, for a host that drops the SYN).
const peerConnectTimeout = 5 * time.Second

// grpcDialOptions are the options for connections to peers.
func (n *Node) peerDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return n.mux.dialTagged(ctx, addr, tagPeer)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(peerMessageLimit), grpc.MaxCallSendMsgSize(peerMessageLimit)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: peerBackoff, MinConnectTimeout: peerConnectTimeout}),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
	}
}
