package rpc

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// hashicorp/raft logs every failed call to a peer, at error level, each
// time it retries: a peer that is down fills the log with the same line
// several times a second, and so does one that has simply not started yet,
// as when the servers of a new cluster start one after the other. coordd
// logs one line per event instead: a peer that has not answered since this
// server started is normal for a while (at info, once), a peer that stops
// answering is worth a warning (at Raft's level, once a minute while it
// lasts); the repeats are debug. So is an election that times out while
// the cluster is starting.

// peerFailureLogs are hashicorp/raft's messages that a peer did not answer,
// with the argument that names the peer.
var peerFailureLogs = map[string]string{
	"failed to appendEntries to":              "peer",
	"failed to heartbeat to":                  "peer",
	"failed to pipeline appendEntries":        "peer",
	"failed to start pipeline replication to": "peer",
	"failed to make requestVote RPC":          "target",
	"failed to contact":                       "server-id",
}

// startRoutineLogs are hashicorp/raft's warnings that are routine while
// the servers of a cluster are starting: a lone server's election times
// out until a majority is up. They are info for peerStartGrace.
var startRoutineLogs = map[string]bool{
	"Election timeout reached, restarting election": true,
}

// peerStartGrace is how long after this server started a peer that has
// never answered is still normal: its server is starting too.
const peerStartGrace = 30 * time.Second

// peerLogEvery is how often a peer's failures are logged while they last.
const peerLogEvery = time.Minute

// peerLogs tracks which peers have answered, and when their failures were
// last logged.
type peerLogs struct {
	start time.Time
	now   func() time.Time

	mu    sync.Mutex
	peers map[string]*peerLog // by peer address
	// addrOf maps a server id to its address (nil until Raft runs).
	addrOf func(raft.ServerID) string
}

type peerLog struct {
	reached bool      // a connection to it succeeded since this server started
	logged  time.Time // when a failure of it was last logged (zero: never)
}

func newPeerLogs() *peerLogs {
	return &peerLogs{start: time.Now(), now: time.Now, peers: map[string]*peerLog{}}
}

func (p *peerLogs) peerLocked(addr string) *peerLog {
	pl := p.peers[addr]
	if pl == nil {
		pl = &peerLog{}
		p.peers[addr] = pl
	}
	return pl
}

// setAddrOf installs the id-to-address lookup, once Raft runs.
func (p *peerLogs) setAddrOf(f func(raft.ServerID) string) {
	p.mu.Lock()
	p.addrOf = f
	p.mu.Unlock()
}

// reached records a successful connection to the peer at addr. The first
// one ends the peer's start: its next failure is a new event, logged
// whenever the last line about it was.
func (p *peerLogs) reached(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl := p.peerLocked(addr); !pl.reached {
		pl.reached, pl.logged = true, time.Time{}
	}
}

// trackDials wraps a peer dialer so that a successful dial counts as
// reaching the peer.
func (p *peerLogs) trackDials(dial func(context.Context, string) (net.Conn, error)) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := dial(ctx, addr)
		if err == nil {
			p.reached(addr)
		}
		return c, err
	}
}

// level returns the level to log one of hashicorp/raft's messages at: its
// own (lvl), unless it is a peer failure (peerFailureLogs) that is routine
// or a repeat.
func (p *peerLogs) level(msg string, lvl slog.Level, args []any) slog.Level {
	if startRoutineLogs[msg] && p.now().Sub(p.start) < peerStartGrace {
		return min(lvl, slog.LevelInfo)
	}
	key, ok := peerFailureLogs[msg]
	if !ok {
		return lvl
	}
	var who any
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == key {
			who = args[i+1]
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var addr string
	switch v := who.(type) {
	case raft.Server:
		addr = string(v.Address)
	case raft.ServerAddress:
		addr = string(v)
	case raft.ServerID:
		addr = "id " + string(v)
		if p.addrOf != nil {
			if a := p.addrOf(v); a != "" {
				addr = a
			}
		}
	default:
		return lvl // not a peer we can tell: as Raft says
	}
	pl := p.peerLocked(addr)
	now := p.now()
	if !pl.logged.IsZero() && now.Sub(pl.logged) < peerLogEvery {
		return slog.LevelDebug
	}
	pl.logged = now
	if !pl.reached && now.Sub(p.start) < peerStartGrace {
		return min(lvl, slog.LevelInfo)
	}
	return lvl
}

// addrOfServer looks a server's peer address up in the latest
// configuration.
func (n *Node) addrOfServer(id raft.ServerID) string {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return ""
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == id {
			return string(s.Address)
		}
	}
	return ""
}
