package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/backup"
)

// Backups (coordctl snapshot save) and restores (coordd restore).
//
// A backup is taken by whichever server the client asks: it first applies
// everything committed when the call began (a read index, as sync), so the
// backup holds every write acknowledged before it, then captures the FSM's
// state in O(1) and streams it as a backup file (package backup) while
// entries go on applying.
//
// A restore seeds the data dir of each server of a new cluster, offline,
// with a Raft snapshot made from the backup: the same on every server (the
// same index and term, the new membership), so that their logs match from
// the start. The old cluster's sessions are closed in it and their
// ephemerals deleted (fsm.Reseed): their clients are gone or talk to
// another cluster, and an ephemeral whose owner never returns must not live
// forever.

// snapshotChunk is the size of one SnapshotChunk (the client port takes
// messages of up to 16 MiB).
const snapshotChunk = 1 << 20

// saveSnapshot streams a backup through send.
func (n *Node) saveSnapshot(ctx context.Context, send func(*apipb.SnapshotChunk) error) error {
	idx, err := n.readIndex(ctx.Done())
	if err != nil {
		return status.Errorf(codes.Unavailable, "server %s cannot be sure it has every acknowledged write (%v): ask a server in the majority", n.cfg.ID, err)
	}
	if !n.fsm.WaitApplied(ctx.Done(), idx) {
		return status.Errorf(codes.DeadlineExceeded, "server %s did not apply index %d in time", n.cfg.ID, idx)
	}
	b := n.fsm.Backup()
	h := &apipb.BackupHeader{
		Index: b.Index, Term: b.Term, Znodes: int64(b.Znodes), Sessions: int64(b.Sessions), Ephemerals: int64(b.Ephemerals),
		CreatedUnixMs: time.Now().UnixMilli(), ServerId: n.cfg.ID, ServerVersion: n.cfg.Version,
	}
	if h.Term == 0 {
		// Nothing applied since a snapshot was restored: the state is that
		// snapshot's, and so is the term.
		h.Term, _ = strconv.ParseUint(n.raft.Stats()["last_snapshot_term"], 10, 64)
	}
	if cf := n.raft.GetConfiguration(); cf.Error() == nil {
		h.ConfigIndex = cf.Index()
		for _, s := range cf.Configuration().Servers {
			h.Members = append(h.Members, &apipb.BackupMember{Id: string(s.ID), PeerAddress: string(s.Address), Voter: s.Suffrage == raft.Voter})
		}
	}
	cw := &chunkWriter{send: send, buf: make([]byte, 0, snapshotChunk)}
	w, err := backup.NewWriter(cw, h)
	if err != nil {
		return err
	}
	if _, err := b.WriteTo(w); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := cw.flush(); err != nil {
		return err
	}
	n.log.Info("backup streamed", "index", h.Index, "znodes", h.Znodes)
	return nil
}

// chunkWriter sends what is written to it in chunks of snapshotChunk.
type chunkWriter struct {
	send func(*apipb.SnapshotChunk) error
	buf  []byte
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(c.buf)-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p = p[k:]
		if len(c.buf) == cap(c.buf) {
			if err := c.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (c *chunkWriter) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.send(&apipb.SnapshotChunk{Data: c.buf})
	c.buf = make([]byte, 0, snapshotChunk) // the sent message may still hold the old one
	return err
}

// SaveSnapshot streams a backup.
func (a admin) SaveSnapshot(ctx context.Context, send func(*apipb.SnapshotChunk) error) error {
	return a.n.saveSnapshot(ctx, send)
}

// RestoreConfig says which server of a new cluster a restore seeds.
type RestoreConfig struct {
	// ID is the server's id, DataDir its data dir (which must hold no Raft
	// state), PeerAddr its peer address: checked against Peers, or, when
	// Peers is empty, the address of the single server (default
	// 127.0.0.1:2888).
	ID, DataDir, PeerAddr string
	// Peers are the new cluster's voters, this server included, the same
	// for every server restored (empty: this server alone).
	Peers []Peer
}

// Restored says what a restore wrote.
type Restored struct {
	// Backup is what the file said about itself.
	Backup *backup.Info
	// Index is the new cluster's first index (the backup's plus one);
	// Znodes what it holds (the root included); Sessions and Ephemerals
	// what was dropped.
	Index                        int64
	Znodes, Sessions, Ephemerals int
}

// ErrRestoreNotEmpty means a restore was pointed at a data dir that
// already holds Raft state.
var ErrRestoreNotEmpty = errors.New("rpc: a restore needs an empty data dir")

// RestoreBackup seeds cfg.DataDir from the backup file at path, as the data
// dir of server cfg.ID in a new cluster of cfg.Peers: coordd started on it
// with the same id (its --peers are then not read) takes the backup's state
// as its first. The file is checked whole first (a corrupt or truncated one
// is refused) and nothing is written unless it is good.
func RestoreBackup(path string, cfg RestoreConfig) (*Restored, error) {
	if cfg.ID == "" || cfg.DataDir == "" {
		return nil, errors.New("rpc: a restore needs the server's id and data dir")
	}
	peers := cfg.Peers
	if len(peers) == 0 {
		addr := cfg.PeerAddr
		if addr == "" {
			addr = "127.0.0.1:2888"
		}
		peers = []Peer{{ID: cfg.ID, Addr: addr}}
	}
	var conf raft.Configuration
	seen := map[string]bool{}
	for _, p := range peers {
		if seen[p.ID] {
			return nil, fmt.Errorf("rpc: peer id %q listed twice", p.ID)
		}
		seen[p.ID] = true
		if p.ID == cfg.ID && cfg.PeerAddr != "" && p.Addr != cfg.PeerAddr {
			return nil, fmt.Errorf("rpc: peers list %s=%s but the peer address is %s", p.ID, p.Addr, cfg.PeerAddr)
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	if !seen[cfg.ID] {
		return nil, fmt.Errorf("rpc: this server's id %q is not in the peers list", cfg.ID)
	}
	if hasRaftState(cfg.DataDir) {
		return nil, fmt.Errorf("%w: %s holds a server's Raft state; restore into a new, empty dir", ErrRestoreNotEmpty, cfg.DataDir)
	}

	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("rpc: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("rpc: %w", err)
	}
	info, body, err := backup.Read(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seed, err := fsm.Reseed(body, conf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: its body is not a state this server reads: %v", path, backup.ErrCorrupt, err)
	}
	if seed.Index != info.Header.Index+1 {
		return nil, fmt.Errorf("%s: %w: the header says index %d, the state %d", path, backup.ErrCorrupt, info.Header.Index, seed.Index-1)
	}

	// Written under the data dir's lock, and checked again under it: a
	// server may have started on the dir meanwhile.
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	defer lock.release()
	if hasRaftState(cfg.DataDir) {
		return nil, fmt.Errorf("%w: %s holds a server's Raft state; restore into a new, empty dir", ErrRestoreNotEmpty, cfg.DataDir)
	}
	if err := claimDataDir(cfg.DataDir, cfg.ID); err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, newHCLogger(slog.New(slog.DiscardHandler), nil).Named("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("rpc: snapshot store: %w", err)
	}
	// The term is 1 on every server: a new cluster's first leader is
	// elected in term 1 and appends after the seed, whose term must not be
	// later than its own.
	_, trans := raft.NewInmemTransport("")
	sink, err := snaps.Create(raft.SnapshotVersionMax, uint64(seed.Index), 1, conf, uint64(seed.Index), trans)
	if err != nil {
		return nil, fmt.Errorf("rpc: creating the snapshot: %w", err)
	}
	if _, err := seed.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return nil, fmt.Errorf("rpc: writing the snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return nil, fmt.Errorf("rpc: writing the snapshot: %w", err)
	}
	// The data dir must hold that snapshot from now on (datadir.go).
	if err := writeDataRecord(cfg.DataDir, dataRecord{Snapshot: sink.ID()}); err != nil {
		return nil, err
	}
	return &Restored{Backup: info, Index: seed.Index, Znodes: seed.Znodes, Sessions: seed.Sessions, Ephemerals: seed.Ephemerals}, nil
}
