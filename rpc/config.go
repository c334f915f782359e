package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/rpc/tlsutil"
	"github.com/coordd/coordd/rpc/zk"
)

// Peer is one initial voter of the cluster.
type Peer struct {
	ID   string
	Addr string // host:port of its peer (Raft and forwarding) listener
}

// Config configures a Node. Zero values take the defaults documented on
// each field.
type Config struct {
	// ID is this server's id, unique in the cluster (default "1").
	ID string
	// DataDir holds the Raft log, stable store and snapshots.
	DataDir string
	// RaftLog is the Raft log store of a new data dir: RaftLogWAL or
	// RaftLogBolt (default DefaultRaftLog). A data dir that holds a log
	// keeps its store; naming the other one is refused (ErrRaftLogMismatch).
	RaftLog string
	// ClientAddr is where the public API listens (default 127.0.0.1:2181).
	ClientAddr string
	// PeerAddr is where Raft and the peer service listen; it is also the
	// address other servers dial and the local address this server dials
	// from (default 127.0.0.1:2888).
	PeerAddr string
	// Peers lists every initial voter, this server included (unless it
	// joins). Empty means a single-node cluster of this server alone. Used
	// only to bootstrap an empty data dir.
	Peers []Peer
	// Join starts a server that is not among Peers with an empty data dir
	// without bootstrapping a cluster: it waits for a running cluster's
	// leader to add it (coordctl member add), catches up from it, and
	// serves no client until it is a member. A server among Peers
	// bootstraps as usual, so that one set of flags fits every server (a
	// Kubernetes StatefulSet). A data dir that holds the state of a server
	// that did not join is refused (ErrJoinNotEmpty).
	Join bool

	// Tick is the session time unit; timeouts are negotiated into
	// [MinSessionTimeout, MaxSessionTimeout] (default 1s).
	Tick time.Duration
	// MinSessionTimeout defaults to 2*Tick (2 s), MaxSessionTimeout to
	// 40*Tick (40 s): ZooKeeper's stock bounds are [2, 20] x tickTime with
	// tickTime 2 s, so its clients may ask for up to 40 s (Patroni's ttl is
	// 30 s), while coordd's tick stays 1 s because it also paces the
	// leader's watch on its quorum, its duties and its vouches.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration

	// MaxDataSize is the largest znode data this server admits (default
	// 1 MiB, at most fsm.DataSizeCap). It may differ between servers: every
	// server applies what another admitted.
	MaxDataSize int

	// SuperDigest, when set, is the digest id
	// (user:base64(sha1(user:password))) whose addAuth makes a session the
	// super user, whom no ACL refuses (ZooKeeper's
	// zookeeper.DigestAuthenticationProvider.superDigest). Servers may
	// differ: the server a client authenticates on decides, and the
	// identity it grants is replicated with the session.
	SuperDigest string

	// SASLUsers, when set, is a JAAS file whose section SASLSection
	// (default Server) lists the users of ZooKeeper's SASL authentication
	// (DIGEST-MD5) as ZooKeeper's DigestLoginModule options
	// user_NAME="password"; it is read again when it changes. Without it a
	// client's SASL request fails with AuthFailed. A user who authenticates
	// has the identity sasl:NAME, replicated with the session like an
	// addAuth's; servers may differ, as with SuperDigest.
	SASLUsers   string
	SASLSection string
	// SASLSuperUser is the SASL user who is also the super user
	// (ZooKeeper's zookeeper.superUser); it needs SASLUsers.
	SASLSuperUser string

	// DisableTTL refuses TTL nodes (ZooKeeper has them off by default;
	// coordd has them on).
	DisableTTL bool
	// ReapInterval is how often the leader looks for empty containers and
	// expired TTL nodes (default 1s); each pass examines a bounded number.
	ReapInterval time.Duration

	// LockDelays are the lock-delay rules (lockdelay.go): the ephemerals
	// of a session that expires stay for a rule's delay when a rule's
	// prefix covers them. The leader's rules apply (it stamps them into
	// each expiry), so give every server the same. None by default.
	LockDelays []LockDelay

	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one (default 8192); TrailingLogs how many entries are
	// kept after a snapshot (default 10240).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// SnapshotInterval is how often Raft checks the threshold (default 5s:
	// the log on disk, and the pages of it the server maps, grow with the
	// entries written between checks).
	SnapshotInterval time.Duration

	// Raft timing (defaults: hashicorp/raft's 1s, 1s, 500ms).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration

	// ClientTLS, with a certificate, makes the client port TLS-only (both
	// protocols and the four-letter words): the server presents
	// ClientTLS.Cert and, with ClientCertAuth, requires every client to
	// present a certificate that ClientTLS.CA verifies (without
	// ClientCertAuth, a client's certificate is verified if it presents
	// one). The files are re-read when they change.
	ClientTLS      tlsutil.Files
	ClientCertAuth bool
	// PeerTLS, with all three files, makes the peer port (Raft and the peer
	// service) TLS-only, both ways: each server presents PeerTLS.Cert when
	// it accepts and when it dials, and accepts only a peer whose
	// certificate PeerTLS.CA verifies and that names the address it
	// connects from (its --peer-addr host). The files are re-read when they
	// change.
	PeerTLS tlsutil.Files

	// FourLetterWords are the ZooKeeper four-letter words the client port
	// answers (nil: zk.DefaultFourLetterWords; "*" alone: every word
	// coordd knows, zk.FourLetterWords).
	FourLetterWords []string

	// Version is this server's build version, reported by status (default
	// "dev").
	Version string

	// MetricsAddr is where the admin HTTP server listens: Prometheus
	// metrics at /metrics, /livez and /readyz, and whatever is mounted on
	// Node.Admin. Empty: no admin server (the default).
	MetricsAddr string
	// MetricsPprof also serves Go's profiles under /debug/pprof/ on
	// MetricsAddr.
	MetricsPprof bool

	// Logger receives structured logs (default: discard). Raft's own logs
	// are routed into it.
	Logger *slog.Logger

	// DialPeer, if set, replaces the dialer used for every connection to
	// another server (Raft and peer RPCs). Tests use it to cut links.
	DialPeer func(ctx context.Context, addr string) (net.Conn, error)

	// commitTimeout is hashicorp/raft's CommitTimeout (default 50ms): how
	// long a leader with nothing new to send waits before sending its
	// commit index anyway. The leader pushes every new commit index at once
	// (rpc/third_party/raft), so this is only the fallback; tests raise it to show
	// the push alone is enough.
	commitTimeout time.Duration

	// walSegmentSize, if set, is the size of the WAL's segment files
	// (default walSegmentSize, 64 MiB): tests make it small, so that a
	// few writes start a new segment.
	walSegmentSize int

	// wrapLogStore, if set, wraps the Raft log store (below its cache).
	// Tests use it to slow down or fail a server's log writes.
	wrapLogStore func(raft.LogStore) raft.LogStore

	// reportLevel, if set, is the command level this server reports to
	// the others instead of fsm.Level: tests play an older server with it.
	reportLevel int64

	// wire, if set, replaces minWireLimit (tests lower it to reach the
	// bound quickly).
	wire int
}

func (c *Config) setDefaults() error {
	if c.ID == "" {
		c.ID = "1"
	}
	if c.ClientAddr == "" {
		c.ClientAddr = "127.0.0.1:2181"
	}
	if c.PeerAddr == "" {
		c.PeerAddr = "127.0.0.1:2888"
	}
	if c.Tick <= 0 {
		c.Tick = time.Second
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 2 * c.Tick
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 40 * c.Tick
	}
	if c.MaxDataSize > fsm.DataSizeCap {
		return fmt.Errorf("rpc: max data size %d exceeds %d, the most any coordd server holds", c.MaxDataSize, fsm.DataSizeCap)
	}
	if c.SuperDigest != "" {
		if err := auth.ValidSuperDigest(c.SuperDigest); err != nil {
			return fmt.Errorf("rpc: super digest: %w", err)
		}
	}
	if c.MinSessionTimeout > c.MaxSessionTimeout {
		return fmt.Errorf("rpc: min session timeout %v exceeds max %v", c.MinSessionTimeout, c.MaxSessionTimeout)
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = time.Second
	}
	if err := checkLockDelays(c.LockDelays); err != nil {
		return err
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.SnapshotInterval <= 0 {
		c.SnapshotInterval = 5 * time.Second
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = time.Second
	}
	if c.ElectionTimeout <= 0 {
		c.ElectionTimeout = time.Second
	}
	if c.commitTimeout <= 0 {
		c.commitTimeout = 50 * time.Millisecond
	}
	if c.LeaderLeaseTimeout <= 0 {
		c.LeaderLeaseTimeout = c.HeartbeatTimeout / 2
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	known := map[string]bool{"*": true}
	for _, w := range zk.FourLetterWords {
		known[w] = true
	}
	for _, w := range c.FourLetterWords {
		if !known[w] {
			return fmt.Errorf("rpc: unknown four-letter word %q (coordd answers %s)", w, strings.Join(zk.FourLetterWords, ", "))
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := c.checkSASL(); err != nil {
		return err
	}
	if err := c.checkTLS(); err != nil {
		return err
	}
	if c.DataDir == "" {
		return errors.New("rpc: a data dir is required")
	}
	if err := checkRaftLog(c.RaftLog); err != nil {
		return err
	}
	if len(c.Peers) > 0 {
		self := false
		seen := map[string]bool{}
		for _, p := range c.Peers {
			if p.ID == "" || p.Addr == "" {
				return fmt.Errorf("rpc: peer %q=%q: id and address are required", p.ID, p.Addr)
			}
			if seen[p.ID] {
				return fmt.Errorf("rpc: peer id %q listed twice", p.ID)
			}
			seen[p.ID] = true
			if p.ID == c.ID {
				self = true
				if p.Addr != c.PeerAddr {
					return fmt.Errorf("rpc: peers list %s=%s but --peer-addr is %s", p.ID, p.Addr, c.PeerAddr)
				}
			}
		}
		if !self && !c.Join {
			return fmt.Errorf("rpc: this server's id %q is not in the peers list (to add a server to a running cluster, start it with --join)", c.ID)
		}
	}
	return nil
}

// DefaultFourLetterWords are the ZooKeeper four-letter words a server
// answers unless Config.FourLetterWords says otherwise: those that only
// report.
var DefaultFourLetterWords = zk.DefaultFourLetterWords

// fourLetterWords is the set of four-letter words answered.
func (c *Config) fourLetterWords() map[string]bool {
	words := c.FourLetterWords
	if words == nil {
		words = zk.DefaultFourLetterWords
	}
	if len(words) == 1 && words[0] == "*" {
		words = zk.FourLetterWords
	}
	out := make(map[string]bool, len(words))
	for _, w := range words {
		out[w] = true
	}
	return out
}

// ParsePeers parses "id=host:port,id=host:port".
func ParsePeers(s string) ([]Peer, error) {
	if s == "" {
		return nil, nil
	}
	var out []Peer
	for _, part := range splitComma(s) {
		id, addr, ok := cut(part, '=')
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("rpc: bad peer %q: want id=host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("rpc: bad peer address %q: %v", addr, err)
		}
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
