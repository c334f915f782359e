package rpc

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/grpcapi"
	"github.com/coordd/coordd/rpc/metrics"
	"github.com/coordd/coordd/rpc/peerpb"
	"github.com/coordd/coordd/rpc/zk"
)

// NewNodeContext builds a server in steps, each opening one thing: the
// ports (and the data dir's lock), the data dir's checks, the services
// that need no disk (the state machine, the session engine, the peer
// port's mux), the log and snapshot stores, Raft, and last what serves
// clients and peers. A step that fails returns its error; what the steps
// before it opened is closed again, newest first (undo), so that a server
// that cannot start leaves nothing running.

// starter is one start in progress.
type starter struct {
	ctx context.Context // the caller's: the start is abandoned when it ends
	// cfg is the configuration as the data dir's checks settle it
	// (checkJoinDir decides whether this server joins).
	cfg     Config
	n       *Node
	hl      hclog.InterceptLogger // Raft's and its stores' logger, into the server's
	cleanup []func()
}

// onFailure registers f to close what a step opened, should a later step
// fail.
func (s *starter) onFailure(f func()) { s.cleanup = append(s.cleanup, f) }

// undo closes what the steps opened, newest first.
func (s *starter) undo() {
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
}

// aborted returns an error once the caller's ctx has ended.
func (s *starter) aborted() error {
	if s.ctx.Err() != nil {
		return fmt.Errorf("rpc: start abandoned: %w", context.Cause(s.ctx))
	}
	return nil
}

// openPorts binds the peer, client and admin addresses, and locks the data
// dir: one that exists first of all, so that a second server on it is told
// so whatever its ports (dirlock.go); one that does not is created and
// locked once the listeners are bound, so that a server that cannot start
// (a port in use) leaves no trace.
func (s *starter) openPorts() (peerLn net.Listener, err error) {
	n := s.n
	if _, err := os.Stat(s.cfg.DataDir); err == nil {
		if n.dirLock, err = lockDataDir(s.cfg.DataDir); err != nil {
			return nil, err
		}
		s.onFailure(n.dirLock.release)
	}
	ln, err := net.Listen("tcp", s.cfg.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("rpc: peer address %s: %w", s.cfg.PeerAddr, err)
	}
	// ln, not peerLn: a later step's failure returns a nil peerLn.
	s.onFailure(func() { ln.Close() })
	peerLn = ln
	n.clientLn, err = net.Listen("tcp", s.cfg.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("rpc: client address %s: %w", s.cfg.ClientAddr, err)
	}
	s.onFailure(func() { n.clientLn.Close() })
	if s.cfg.MetricsAddr != "" {
		n.adminLn, err = net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("rpc: metrics address %s: %w", s.cfg.MetricsAddr, err)
		}
		s.onFailure(func() { n.adminLn.Close() })
	}

	if n.dirLock == nil {
		if n.dirLock, err = lockDataDir(s.cfg.DataDir); err != nil {
			return nil, err
		}
		s.onFailure(n.dirLock.release)
	}
	return peerLn, nil
}

// checkDataDir checks what the data dir holds against what this start
// asks (the log store's kind, the record of its contents, joining, the
// server id) and claims it for this server id.
func (s *starter) checkDataDir() (kind string, rec *dataRecord, err error) {
	kind, rec, err = prepareDataDir(s.cfg.DataDir, s.cfg.RaftLog)
	if err != nil {
		return "", nil, err
	}
	if err := checkJoinDir(&s.cfg); err != nil {
		return "", nil, err
	}
	if err := claimDataDir(s.cfg.DataDir, s.cfg.ID); err != nil {
		return "", nil, err
	}
	return kind, rec, nil
}

// buildServices makes what needs neither the disk nor Raft yet: the peer
// port's mux, metrics, the admin handler, the read-index rounds, the
// proposer, the leader's duties, the state machine and the session engine.
func (s *starter) buildServices(peerLn net.Listener) {
	n := s.n
	dial := s.cfg.DialPeer
	if dial == nil {
		dial = defaultDialer(s.cfg.PeerAddr)
	}
	n.peerLogs = newPeerLogs()
	n.mux = newPeerMux(peerLn, n.peerLogs.trackDials(dial), n.peerTLS, n.refusals)
	s.onFailure(n.mux.close)

	n.metrics = metrics.New(metrics.Options{Version: s.cfg.Version, State: n.state})
	n.adminMux = n.newAdmin()
	n.health = newHealth()
	n.peers = newPeerClients(n)
	s.onFailure(n.peers.close)
	n.verified = newRoundGroup(n.ctx, n.verifyCommitIndex)
	n.verified.observe = func(d time.Duration, err error) { n.metrics.ReadIndexRound(true, d, err) }
	n.asked = newRoundGroup(n.ctx, n.askLeaderReadIndex)
	n.asked.observe = func(d time.Duration, err error) { n.metrics.ReadIndexRound(false, d, err) }
	n.prop = newProposer(n)
	n.leader = newLeaderDuties(n)
	n.fsm = fsm.New(fsm.Options{MaxDataSize: s.cfg.MaxDataSize, Logger: n.log, Halt: n.halt})
	n.engine = engine.New(engine.Config{
		ServerID: s.cfg.ID, FSM: n.fsm, Cluster: cluster{n},
		Tick: s.cfg.Tick, MinSessionTimeout: s.cfg.MinSessionTimeout, MaxSessionTimeout: s.cfg.MaxSessionTimeout,
		MaxRequestSize: s.cfg.maxMessageSize(), MaxReplySize: s.cfg.wireLimit(),
		DisableTTL: s.cfg.DisableTTL, Meter: n.metrics, Logger: n.log,
		SuperDigest: s.cfg.SuperDigest,
	})
	n.fsm.SetObserver(observer{n})
}

// openStores opens and verifies the log and snapshot stores (openStorage)
// and wraps them as Raft is to use them: timed, and the log behind its
// cache.
func (s *starter) openStores(kind string, rec *dataRecord) (_ raft.LogStore, _ raft.SnapshotStore, err error) {
	n := s.n
	s.hl = newHCLogger(n.log, n.peerLogs)
	var checked *checkedSnapshots
	n.store, checked, err = openStorage(s.cfg.DataDir, kind, rec, s.hl, n.log, walOptions{segmentSize: s.cfg.walSegmentSize})
	if err != nil {
		return nil, nil, err
	}
	s.onFailure(func() { n.store.Close() })
	if err := s.aborted(); err != nil {
		return nil, nil, err
	}
	var store raft.LogStore = n.store
	if s.cfg.wrapLogStore != nil {
		store = s.cfg.wrapLogStore(store)
	}
	disk := &diskSpace{dir: s.cfg.DataDir, m: n.metrics, log: n.log}
	n.disk = disk
	store = timedLogStore{LogStore: store, m: n.metrics, writeTime: storeWriteTime(n.store), disk: disk, slow: &slowDisk{n: n}}
	// The cache also holds a leader's new entries while it writes them, so
	// that they are replicated meanwhile (rpc/third_party/raft/FORK.md); it
	// must hold a whole batch, MaxAppendEntries, to do that.
	logs, err := raft.NewLogCache(2*maxAppendEntries, store)
	if err != nil {
		return nil, nil, err
	}
	logs.SetMaxBytes(logCacheBytes)
	snaps := timedSnapshotStore{SnapshotStore: checked, m: n.metrics, disk: disk}
	return logs, snaps, nil
}

// startRaft opens Raft's transport on the peer port's mux, bootstraps a new
// cluster when this server neither has state nor joins one, and starts
// Raft, which restores the newest snapshot and replays the log.
func (s *starter) startRaft(logs raft.LogStore, snaps raft.SnapshotStore) (err error) {
	n := s.n
	advertise, err := net.ResolveTCPAddr("tcp", s.cfg.PeerAddr)
	if err != nil {
		return err
	}
	if advertise.IP == nil || advertise.IP.IsUnspecified() {
		return fmt.Errorf("rpc: --peer-addr %s must name the address other servers reach, not a wildcard", s.cfg.PeerAddr)
	}
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &raftStream{muxListener: n.mux.raft, mux: n.mux, advertise: advertise},
		MaxPool: 4,
		Timeout: 5 * time.Second,
		Logger:  s.hl.Named("transport"),
	})
	s.onFailure(func() { n.trans.Close() })

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(s.cfg.ID)
	rc.Logger = s.hl.Named("raft")
	rc.HeartbeatTimeout = s.cfg.HeartbeatTimeout
	rc.ElectionTimeout = s.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = s.cfg.LeaderLeaseTimeout
	rc.CommitTimeout = s.cfg.commitTimeout
	rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	rc.TrailingLogs = s.cfg.TrailingLogs
	rc.SnapshotInterval = s.cfg.SnapshotInterval
	rc.MaxAppendEntries = maxAppendEntries
	rc.BatchApplyCh = true
	rc.NoSnapshotRestoreOnStart = false

	existing, err := raft.HasExistingState(logs, n.store, snaps)
	if err != nil {
		return err
	}
	joining := !existing && (s.cfg.joins() || s.cfg.Join && n.peersHaveCluster())
	if err := s.aborted(); err != nil {
		return err
	}
	if joining {
		n.log.Info("joining: waiting for the leader to add this server", "peer", s.cfg.PeerAddr)
	}
	if !existing && !joining {
		peers := s.cfg.Peers
		if len(peers) == 0 {
			peers = []Peer{{ID: s.cfg.ID, Addr: s.cfg.PeerAddr}}
		}
		var conf raft.Configuration
		for _, p := range peers {
			conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := raft.BootstrapCluster(rc, logs, n.store, snaps, n.trans, conf); err != nil {
			return fmt.Errorf("rpc: bootstrap: %w", err)
		}
		n.log.Info("bootstrapped a new cluster", "voters", len(peers))
	}
	n.raft, err = raft.NewRaft(rc, meteredFSM{f: n.fsm, m: n.metrics}, logs, spaceStableStore{StableStore: n.store, d: n.disk}, snaps, n.trans)
	if err != nil {
		return fmt.Errorf("rpc: starting raft: %w", err)
	}
	n.raftSet.Store(true)
	n.peerLogs.setAddrOf(n.addrOfServer)
	s.onFailure(func() { _ = n.raft.Shutdown().Error() })
	if err := s.aborted(); err != nil {
		return err
	}
	return nil
}

// startServing starts the gRPC servers of both ports, the ZooKeeper
// front-end, the server's goroutines and the admin HTTP server.
func (s *starter) startServing() {
	n := s.n
	kp := keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}
	n.clientGRPC = grpc.NewServer(
		grpc.Creds(n.clientCreds()),
		grpc.MaxRecvMsgSize(s.cfg.wireLimit()),
		grpc.MaxSendMsgSize(s.cfg.wireLimit()),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.KeepaliveEnforcementPolicy(kp),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
	)
	apipb.RegisterCoordServer(n.clientGRPC, grpcapi.New(n.engine, grpcapi.Config{
		ServerID: s.cfg.ID, MaxRequestBytes: int64(s.cfg.maxMessageSize()), Admin: admin{n},
	}))
	// gRPC's standard health service (its status follows readiness) and
	// server reflection, so that grpcurl and gRPC health probes work.
	healthpb.RegisterHealthServer(n.clientGRPC, n.health)
	reflection.Register(n.clientGRPC)
	n.peerGRPC = grpc.NewServer(
		grpc.MaxRecvMsgSize(peerMessageLimit),
		grpc.MaxSendMsgSize(peerMessageLimit),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.KeepaliveEnforcementPolicy(kp),
	)
	peerpb.RegisterPeerServer(n.peerGRPC, &peerService{n: n})

	n.start(func() { _ = n.peerGRPC.Serve(n.mux.grpc) })
	n.grpcClients = newMuxListener(n.clientLn.Addr())
	n.zk = zk.New(zk.Config{
		Engine: n.engine, MaxFrame: s.cfg.wireLimit(), FourLetterWords: s.cfg.fourLetterWords(),
		Stats: n.zkStats, Logger: n.log, SASL: n.sasl, SASLSuperUser: s.cfg.SASLSuperUser,
	})
	n.start(func() { _ = n.clientGRPC.Serve(n.grpcClients) })
	n.start(n.serveClientPort)
	n.start(n.prop.run)
	n.start(n.leader.run)
	n.start(func() { n.engine.RunTouches(n.ctx) })
	n.start(n.watchQuorum)
	n.start(n.trackReadiness)
	n.start(n.countLeaderChanges)
	n.start(n.countElections)
	n.start(n.paceSnapshots)
	if n.inConfiguration() { // read from the log and snapshot by raft.NewRaft
		close(n.member)
	} else {
		n.start(n.watchMember)
	}
	if n.adminLn != nil {
		n.serveAdmin(n.adminLn)
	}
}
