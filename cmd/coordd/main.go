// Command coordd is the coordd server: one member of a Raft-replicated
// ZooKeeper-style coordination service. With no flags it runs a single-node
// server with its data in ./coordd-data. "coordd restore FILE" seeds the
// data dir of a new cluster's server from a backup instead.
//
// It only turns flags into an rpc.Config and runs the node until SIGINT or
// SIGTERM; all logic lives in package rpc.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with --pprof-addr
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/coordd/coordd/cmd/coordd/console"
	"github.com/coordd/coordd/rpc"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is coordd's entry point: it runs the server until SIGINT or SIGTERM
// and returns the exit status. --version prints to stdout, everything else
// (the usage included) to stderr.
func run(args []string, stdout, stderr io.Writer) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	return runUntil(args, stdout, stderr, sig)
}

// runUntil is run, with the server stopping at the first signal from stop.
func runUntil(args []string, stdout, stderr io.Writer, stop <-chan os.Signal) int {
	if len(args) > 0 && args[0] == "restore" {
		return runRestore(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("coordd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		id          = fs.String("id", "1", "this server's id, unique in the cluster")
		dataDir     = fs.String("data-dir", "coordd-data", "directory for the Raft log, stable store and snapshots")
		raftLog     = fs.String("raft-log", "", "Raft log store of a new data dir: wal (hashicorp/raft-wal, in DATA-DIR/wal) or bolt (raft-boltdb, DATA-DIR/raft.db); default "+rpc.DefaultRaftLog+". A data dir that holds a log keeps its store, and naming the other one is refused")
		clientAddr  = fs.String("client-addr", "127.0.0.1:2181", "address the client API listens on")
		peerAddr    = fs.String("peer-addr", "127.0.0.1:2888", "address for Raft and peer traffic; other servers dial it and this server dials from its host")
		peers       = fs.String("peers", "", "all initial voters as id=host:port,... (their peer addresses, this server included); omit for a single-node server")
		join        = fs.Bool("join", false, "join a running cluster instead of bootstrapping one (unless this server is among --peers): start with an empty data dir and wait to be added with coordctl member add")
		tick        = fs.Duration("tick", time.Second, "session time unit; session timeouts are negotiated into [--min-session-timeout, --max-session-timeout], [2, 40] ticks by default")
		minSession  = fs.Duration("min-session-timeout", 0, "smallest session timeout granted (default 2 ticks: 2 s at the default --tick); a client asking for less gets this, and the server logs it at info")
		maxSession  = fs.Duration("max-session-timeout", 0, "largest session timeout granted (default 40 ticks: 40 s at the default --tick, ZooKeeper's stock maximum); a client asking for more gets this, and the server logs it at info")
		snapThresh  = fs.Uint64("snapshot-threshold", 8192, "log entries between snapshots, at least (a tree of more than 8 times as many znodes takes one entry for every 8)")
		trailing    = fs.Uint64("trailing-logs", 10240, "log entries kept after a snapshot, for followers catching up")
		snapEvery   = fs.Duration("snapshot-interval", 5*time.Second, "how often Raft checks whether --snapshot-threshold entries have accumulated (the log on disk, and the memory it maps, grow with the entries between checks)")
		maxData     = fs.Int("max-data-size", 1<<20, "largest znode data in bytes this server admits, at most 64 MiB (replies, such as a getChildren listing, may carry up to 16 MiB or this, whichever is larger)")
		heartbeat   = fs.Duration("heartbeat-timeout", time.Second, "Raft heartbeat timeout")
		election    = fs.Duration("election-timeout", time.Second, "Raft election timeout")
		ttlNodes    = fs.Bool("ttl-nodes", true, "allow TTL nodes (ZooKeeper's extendedTypesEnabled; on by default in coordd)")
		reapEvery   = fs.Duration("reap-interval", time.Second, "how often the leader reaps empty containers and expired TTL nodes")
		idleRelease = fs.Duration("idle-memory-check", 5*time.Second, "how often to check whether the server has gone idle and, if it has, return its free heap memory to the OS (0: never; nor with GOGC=off; without it an idle server keeps up to about twice its live heap)")
		superDigest = fs.String("superdigest", "", "the super user's digest, user:base64(sha1(user:password)) (coordctl digest makes it): a session that authenticates with that user and password (addAuth digest) passes every ACL, as ZooKeeper's zookeeper.DigestAuthenticationProvider.superDigest; off when empty")
		saslUsers   = fs.String("sasl-users", "", "ZooKeeper's SASL (DIGEST-MD5) for ZooKeeper's clients: a JAAS file whose Server section lists the users, user_NAME=\"password\" (the file ZooKeeper's server reads from java.security.auth.login.config); re-read when it changes; a user who authenticates has the ACL identity sasl:NAME; off when empty")
		saslSection = fs.String("sasl-section", "", "the section of --sasl-users that lists the users (ZooKeeper's zookeeper.sasl.serverconfig; default Server)")
		saslSuper   = fs.String("sasl-super-user", "", "the SASL user who passes every ACL, as ZooKeeper's zookeeper.superUser; needs --sasl-users")
		fourLetter  = fs.String("4lw-commands", "", "ZooKeeper four-letter words answered on the client port, comma-separated, or * for all (default: "+strings.Join(rpc.DefaultFourLetterWords, ",")+")")
		certFile    = fs.String("cert-file", "", "client port TLS: this server's certificate (PEM, leaf first); with --key-file the client port is TLS-only, for both protocols; re-read when it changes")
		keyFile     = fs.String("key-file", "", "client port TLS: the private key of --cert-file (PEM)")
		trustedCA   = fs.String("trusted-ca-file", "", "client port TLS: the CA bundle (PEM) that verifies client certificates (a client's certificate is verified if it presents one; see --client-cert-auth)")
		certAuth    = fs.Bool("client-cert-auth", false, "client port TLS: require every client to present a certificate that --trusted-ca-file verifies")
		peerCert    = fs.String("peer-cert-file", "", "peer port TLS: this server's peer certificate (PEM), presented when it accepts and when it dials; it must name the host of --peer-addr and allow server and client authentication. With the key and CA, the peer port (Raft and forwarding) is TLS-only and peers always verify each other")
		peerKey     = fs.String("peer-key-file", "", "peer port TLS: the private key of --peer-cert-file (PEM)")
		peerCA      = fs.String("peer-trusted-ca-file", "", "peer port TLS: the CA bundle (PEM) that verifies the other servers' peer certificates")
		metricsAddr = fs.String("metrics-addr", "", "serve the admin HTTP endpoints on this address (e.g. 127.0.0.1:9181): Prometheus metrics at /metrics, health probes at /livez and /readyz; off when empty")
		pprofAddr   = fs.String("pprof-addr", "", "serve Go's net/http/pprof profiles on this address (e.g. 127.0.0.1:6060), or under /debug/pprof/ of the admin endpoints when it is --metrics-addr's; off when empty")
		logLevel    = fs.String("log-level", "warn", "log level: debug, info, warn or error")
		showVersion = fs.Bool("version", false, "print the version and exit")
	)
	var lockDelays lockDelayFlag
	fs.Var(&lockDelays, "lock-delay", "PREFIX=DURATION, such as /locks=10s (repeatable, or comma-separated): when a session expires (not when it is closed), its ephemerals at PREFIX or below stay, still owned by it, for DURATION, so that a lock it held passes to the next waiter only then; the longest matching prefix decides, and 0 exempts a subtree. Give every server the same rules: the leader's apply. Off by default")
	var con consoleFlags
	con.define(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: coordd [flags]\n       coordd restore FILE [flags]   (seed a new cluster's data dir from a backup; coordd restore -h)\n\nRuns one coordd server. With no flags: a single-node server on 127.0.0.1:2181, data in ./coordd-data.\n\nA 3-node cluster on one machine:\n  coordd --id 1 --data-dir d1 --client-addr 127.0.0.1:2181 --peer-addr 127.0.0.1:2888 --peers 1=127.0.0.1:2888,2=127.0.0.1:2889,3=127.0.0.1:2890\n  (and the same for ids 2 and 3 with their own addresses)\n\nA fourth server, added to that running cluster:\n  coordd --id 4 --data-dir d4 --client-addr 127.0.0.1:2184 --peer-addr 127.0.0.1:2891 --join\n  coordctl member add 4 127.0.0.1:2891\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "coordd: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, "coordd", buildVersion())
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "coordd: bad --log-level %q: %v\n", *logLevel, err)
		return 2
	}
	peerList, err := rpc.ParsePeers(*peers)
	if err != nil {
		fmt.Fprintf(stderr, "coordd: %s\n", startError(err))
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// The web console, checked before the server starts; it dials the
	// address the client port is bound to, known once it is.
	var conCfg *console.Config
	if err := con.check(fs, *metricsAddr); err != nil {
		fmt.Fprintf(stderr, "coordd: %v\n", err)
		return 2
	}
	if con.on {
		cfg, err := con.config(*clientAddr, *certFile != "", *certAuth, *trustedCA, logger)
		if err != nil {
			fmt.Fprintf(stderr, "coordd: web console: %v\n", err)
			return 2
		}
		conCfg = &cfg
	}
	node, code := startNode(stderr, stop, rpc.Config{
		ID: *id, DataDir: *dataDir, RaftLog: *raftLog, ClientAddr: *clientAddr, PeerAddr: *peerAddr, Peers: peerList, Join: *join,
		Tick: *tick, MinSessionTimeout: *minSession, MaxSessionTimeout: *maxSession,
		SnapshotThreshold: *snapThresh, TrailingLogs: *trailing, SnapshotInterval: *snapEvery, MaxDataSize: *maxData,
		HeartbeatTimeout: *heartbeat, ElectionTimeout: *election, Logger: logger,
		DisableTTL: !*ttlNodes, ReapInterval: *reapEvery, LockDelays: lockDelays, Version: buildVersion(),
		FourLetterWords: fourLetterWords(*fourLetter), SuperDigest: *superDigest,
		SASLUsers: *saslUsers, SASLSection: *saslSection, SASLSuperUser: *saslSuper,
		ClientTLS: rpc.TLSFiles{Cert: *certFile, Key: *keyFile, CA: *trustedCA}, ClientCertAuth: *certAuth,
		PeerTLS: rpc.TLSFiles{Cert: *peerCert, Key: *peerKey, CA: *peerCA}, MetricsAddr: *metricsAddr,
		MetricsPprof: *pprofAddr != "" && *pprofAddr == *metricsAddr,
	})
	if node == nil {
		return code
	}
	if *pprofAddr != "" && *pprofAddr != *metricsAddr {
		ln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			fmt.Fprintf(stderr, "coordd: --pprof-addr: %v\n", err)
			node.Close()
			return 1
		}
		go func() { _ = http.Serve(ln, nil) }() // net/http/pprof registers on the default mux
	}
	var web *console.Console
	if conCfg != nil {
		conCfg.Server = dialable(node.ClientAddr())
		if web, err = console.New(*conCfg); err != nil {
			fmt.Fprintf(stderr, "coordd: web console: %v\n", err)
			node.Close()
			return 1
		}
		node.Admin().Handle("/", web)
	}
	stopRelease := startIdleRelease(*idleRelease, os.Getenv("GOGC") == "off")
	defer stopRelease()
	serving := func() {
		fmt.Fprintf(stderr, "coordd %s: server %s serving clients on %s%s (peers on %s%s, data in %s)\n", buildVersion(), *id, node.ClientAddr(), tlsNote(*certFile, *certAuth), *peerAddr, peerTLSNote(*peerCert), *dataDir)
	}
	// A server that joins serves no client until the leader adds it: it
	// says so, and what adds it, and says it serves once it does.
	member := node.Member()
	select {
	case <-member:
		serving()
		member = nil
	default:
		fmt.Fprintf(stderr, "coordd %s: server %s waiting to be added (coordctl member add %s %s); it serves clients on %s once it is a member\n", buildVersion(), *id, *id, *peerAddr, node.ClientAddr())
	}
	if a := node.MetricsAddr(); a != "" {
		fmt.Fprintf(stderr, "coordd: metrics and health on http://%s (/metrics, /livez, /readyz)\n", a)
		if web != nil {
			fmt.Fprintf(stderr, "coordd: web console on http://%s/ (%s)\n", a, consoleMode(conCfg.Writes))
		}
	}
	for running := true; running; {
		select {
		case <-member:
			serving()
			member = nil
		case s := <-stop:
			fmt.Fprintf(stderr, "coordd: %v: shutting down\n", s)
			running = false
		case <-node.Halted():
			// The server closed itself: its log holds an entry it can
			// neither apply nor skip.
			if web != nil {
				web.Close()
			}
			fmt.Fprintf(stderr, "coordd: %v\n", node.HaltErr())
			return 1
		}
	}
	if web != nil {
		web.Close() // its session, before the server goes
	}
	if err := node.Close(); err != nil {
		fmt.Fprintf(stderr, "coordd: %s\n", startError(err))
		return 1
	}
	return 0
}

// startNode starts the server, or stops starting it at the first signal
// from stop: the signal handler is installed before the start (run), so
// that a start that takes a while (a large log or snapshot to load, peers
// to ask) can still be interrupted. A second signal exits without waiting
// for the start to wind down. It returns the node, or nil and the exit
// status (0 when a signal stopped the start).
func startNode(stderr io.Writer, stop <-chan os.Signal, cfg rpc.Config) (*rpc.Node, int) {
	ctx, abort := context.WithCancel(context.Background())
	defer abort()
	type started struct {
		node *rpc.Node
		err  error
	}
	done := make(chan started, 1)
	go func() {
		n, err := rpc.NewNodeContext(ctx, cfg)
		done <- started{n, err}
	}()
	var r started
	select {
	case r = <-done:
	case s := <-stop:
		fmt.Fprintf(stderr, "coordd: %v while starting: stopping\n", s)
		abort()
		select {
		case r = <-done:
		case s := <-stop:
			fmt.Fprintf(stderr, "coordd: %v again: exiting without waiting for the start to wind down\n", s)
			return nil, 1
		}
		if r.err == nil { // started just before the abort
			r.node.Close()
			return nil, 0
		}
		if errors.Is(r.err, context.Canceled) {
			return nil, 0
		}
	}
	if r.err != nil {
		fmt.Fprintf(stderr, "coordd: %s\n", startError(r.err))
		return nil, 1
	}
	return r.node, 0
}

// buildVersion is the version this binary reports: the one make build
// stamps (git describe), else the module version go install records, else
// "dev".
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// fourLetterWords parses --4lw-commands ("" keeps the default).
func fourLetterWords(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, w := range strings.Split(s, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// tlsNote says how a port is secured, for the start line.
func tlsNote(cert string, clientCerts bool) string {
	switch {
	case cert == "":
		return ""
	case clientCerts:
		return " with TLS, client certificates required"
	}
	return " with TLS"
}

// peerTLSNote says how the peer port is secured, for the start line.
func peerTLSNote(cert string) string {
	if cert == "" {
		return ""
	}
	return " with mutual TLS"
}

// lockDelayFlag is --lock-delay: rules added by each use of the flag, each
// PREFIX=DURATION or a comma-separated list of them.
type lockDelayFlag []rpc.LockDelay

// String lists the rules as the flag takes them.
func (f *lockDelayFlag) String() string {
	var parts []string
	for _, r := range *f {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ",")
}

// Set adds the rules of one use of the flag.
func (f *lockDelayFlag) Set(s string) error {
	rules, err := rpc.ParseLockDelays(s)
	if err != nil {
		return errors.New(startError(err))
	}
	*f = append(*f, rules...)
	return nil
}
