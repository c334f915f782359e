package rpc

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/peerpb"
	"github.com/coordd/coordd/rpc/zk"
)

func roleOf(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	case raft.Follower:
		return "follower"
	}
	return "shutdown"
}

// info is this server's own view; req.SessionWatches adds how many watches
// each local session holds.
func (n *Node) info(req *peerpb.InfoRequest) *peerpb.InfoResponse {
	_, leader := n.raft.LeaderWithID()
	rss, cpu := processUsage()
	state := n.raft.State()
	in := &peerpb.InfoResponse{
		Id: n.cfg.ID, Role: roleOf(state), ClientAddress: n.ClientAddr(),
		Applied: n.fsm.AppliedIndex(), Term: n.raft.CurrentTerm(), Leader: string(leader),
		RssBytes: rss, CpuSeconds: cpu, Sessions: n.engine.Local(), Version: n.cfg.Version,
		Commit: int64(n.raft.CommitIndex()), LastContactMs: lastContactMs(state, n.raft.LastContact(), time.Now()),
		Level: fsm.Level,
	}
	if n.cfg.reportLevel != 0 {
		in.Level = n.cfg.reportLevel
	}
	tr := n.metrics.Traffic()
	in.Reads, in.Writes, in.WriteSeconds = tr.Reads, tr.Writes, tr.WriteSeconds
	if req.GetSessionWatches() {
		in.SessionWatches = make([]int64, len(in.Sessions))
		for i, id := range in.Sessions {
			w := n.engine.Watches().SessionWatches(id)
			in.SessionWatches[i] = int64(len(w.Data) + len(w.Child) + len(w.Persistent) + len(w.PersistentRecursive))
		}
	}
	return in
}

// lastContactMs is how long ago a follower last heard from the leader, in
// milliseconds: 0 on the leader, -1 when it never has.
func lastContactMs(state raft.RaftState, last, now time.Time) int64 {
	switch {
	case state == raft.Leader:
		return 0
	case last.IsZero():
		return -1
	}
	return max(now.Sub(last).Milliseconds(), 0)
}

// processUsage reads this process's resident memory and CPU time.
func processUsage() (int64, float64) {
	var rss int64
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			rss = pages * int64(os.Getpagesize())
		}
	}
	var ru syscall.Rusage
	cpu := 0.0
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu = float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	}
	return rss, cpu
}

// memberInfos asks every voter for its own view (req), in parallel, briefly.
func (n *Node) memberInfos(ctx context.Context, req *peerpb.InfoRequest) ([]raft.Server, map[string]*peerpb.InfoResponse) {
	var servers []raft.Server
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		servers = f.Configuration().Servers
	}
	out := make(map[string]*peerpb.InfoResponse)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		if string(s.ID) == n.cfg.ID {
			mu.Lock()
			out[n.cfg.ID] = n.info(req)
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func(s raft.Server) {
			defer wg.Done()
			resp, err := n.askInfo(ctx, string(s.Address), req)
			if err != nil {
				return
			}
			mu.Lock()
			out[string(s.ID)] = resp
			mu.Unlock()
		}(s)
	}
	wg.Wait()
	return servers, out
}

// Status reports this server's view of the cluster.
func (n *Node) status(ctx context.Context) (*apipb.StatusResponse, error) {
	_, leader := n.raft.LeaderWithID()
	resp := &apipb.StatusResponse{
		Id: n.cfg.ID, Role: roleOf(n.raft.State()), Leader: string(leader),
		Term: n.raft.CurrentTerm(), Applied: n.fsm.AppliedIndex(), Watches: int64(n.engine.Watches().Len()),
		Version: n.cfg.Version,
	}
	n.fsm.Read(func(v fsm.View) {
		resp.Sessions = int64(v.Sessions.Len())
		resp.Znodes = int64(v.Tree.Len())
		resp.CommandLevel = v.Level
	})
	servers, infos := n.memberInfos(ctx, &peerpb.InfoRequest{})
	for _, sv := range servers {
		resp.Members = append(resp.Members, memberOf(sv, infos[string(sv.ID)]))
	}
	n.listedClientAddrs(resp.Members)
	sort.Slice(resp.Members, func(i, j int) bool { return resp.Members[i].Id < resp.Members[j].Id })
	return resp, nil
}

// listedClientAddrs gives each member that did not say its client address
// (it is unreachable) the one /zookeeper/config lists for it, which the
// leader registered while the member was up: status then names the server
// that is down, not only its id.
func (n *Node) listedClientAddrs(ms []*apipb.Member) {
	n.fsm.Read(func(v fsm.View) {
		for _, m := range ms {
			if m.ClientAddress == "" {
				m.ClientAddress, _ = fsm.ClientAddressOf(v.Tree, m.Id)
			}
		}
	})
}

// Sessions lists the open sessions and where each is connected.
func (n *Node) sessionList(ctx context.Context) (*apipb.SessionsResponse, error) {
	resp := &apipb.SessionsResponse{}
	n.fsm.Read(func(v fsm.View) {
		for _, in := range v.Sessions.List() {
			resp.Sessions = append(resp.Sessions, &apipb.SessionInfo{
				Id: in.ID, TimeoutMs: in.TimeoutMs, Ephemerals: int64(len(v.Tree.EphemeralsOf(in.ID))),
			})
		}
	})
	_, infos := n.memberInfos(ctx, &peerpb.InfoRequest{SessionWatches: true})
	where := map[int64]string{}
	watches := map[int64]int64{}
	for id, in := range infos {
		for i, sid := range in.Sessions {
			where[sid] = id
			if i < len(in.SessionWatches) {
				watches[sid] = in.SessionWatches[i]
			}
		}
	}
	for _, si := range resp.Sessions {
		si.Server, si.Watches = where[si.Id], watches[si.Id]
	}
	return resp, nil
}

// serving reports whether this server can serve clients: it is a member
// (a joining server is not until it is added), knows a leader (or lost it
// only moments ago), and can write its Raft log (a server whose disk is
// full falls behind the others, and its clients would wait for it to apply
// their writes); if not, why not.
func (n *Node) serving() (bool, string) {
	if !n.inConfiguration() {
		return false, "has no leader"
	}
	if n.disk.logFull() {
		return false, diskFullWhy
	}
	// A leader known now counts at once: watchQuorum notices it only at
	// its next tick, and a server whose first election was slow would
	// otherwise refuse clients for that long after it has a leader.
	if _, id := n.raft.LeaderWithID(); id != "" {
		return true, ""
	}
	n.leaderSeen.Lock()
	defer n.leaderSeen.Unlock()
	if n.leaderlessSince.IsZero() || time.Since(n.leaderlessSince) < n.leaderlessLimit() {
		return true, ""
	}
	return false, "has no leader"
}

func (n *Node) leaderlessLimit() time.Duration {
	return 2 * max(n.cfg.ElectionTimeout, n.cfg.HeartbeatTimeout)
}

// watchQuorum closes client streams when this server has had no leader for
// longer than an election takes (it is likely in a minority partition), or
// at once when it is no longer a member (it was removed), so that its
// clients move to a server that can serve them.
func (n *Node) watchQuorum() {
	tk := time.NewTicker(n.cfg.Tick / 4)
	defer tk.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tk.C:
		}
		_, id := n.raft.LeaderWithID()
		n.leaderSeen.Lock()
		switch {
		case id != "":
			n.leaderlessSince = time.Time{}
		case n.leaderlessSince.IsZero():
			n.leaderlessSince = time.Now()
		}
		cut := !n.leaderlessSince.IsZero() && time.Since(n.leaderlessSince) >= n.leaderlessLimit()
		n.leaderSeen.Unlock()
		why := "no leader"
		if !n.inConfiguration() {
			cut, why = true, "not a member (removed)"
		}
		if n.disk.logFull() {
			cut, why = true, diskFullWhy
		}
		if cut {
			if ids := n.engine.Local(); len(ids) > 0 {
				n.log.Info(why+": disconnecting clients", "sessions", len(ids))
				n.engine.EndAll()
			}
		}
	}
}

// zkStats are the figures ZooKeeper's four-letter words report: read from
// the same state and counters as the metrics (state, n.metrics), so that
// mntr and /metrics agree.
func (n *Node) zkStats() zk.Stats {
	ms := n.state()
	rs := n.metrics.Requests()
	st := zk.Stats{
		Version: n.cfg.Version, Zxid: int64(ms.Raft.AppliedIndex),
		Znodes: ms.Znodes, Ephemerals: ms.EphemeralZnodes, DataSize: ms.ApproximateDataSize,
		Watches: ms.Watches.Total(), WatchedPaths: ms.WatchedPaths, WatchingSessions: ms.WatchingSessions,
		Connections: ms.SessionsConnected, GlobalSessions: ms.Sessions, Outstanding: ms.OutstandingRequests,
		Received: int64(rs.Received), Sent: int64(rs.Sent),
		MinLatency: rs.MinLatency, AvgLatency: rs.AvgLatency, MaxLatency: rs.MaxLatency,
	}
	var servers []raft.Server
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		servers = f.Configuration().Servers
	}
	switch state := n.raft.State(); {
	case len(servers) == 1 && state == raft.Leader:
		st.Mode = "standalone"
	case state == raft.Leader:
		st.Mode = "leader"
		st.Followers = int64(len(servers) - 1)
		st.SyncedFollowers = st.Followers
	default:
		st.Mode = "follower"
		for _, s := range servers {
			if string(s.ID) == n.cfg.ID && s.Suffrage != raft.Voter {
				st.Mode = "observer"
			}
		}
	}
	st.Config = [][2]string{
		{"clientPort", portOf(n.ClientAddr())},
		{"clientAddress", n.ClientAddr()},
		{"peerAddress", n.cfg.PeerAddr},
		{"dataDir", n.cfg.DataDir},
		{"tickTime", strconv.FormatInt(n.cfg.Tick.Milliseconds(), 10)},
		{"minSessionTimeout", strconv.FormatInt(n.cfg.MinSessionTimeout.Milliseconds(), 10)},
		{"maxSessionTimeout", strconv.FormatInt(n.cfg.MaxSessionTimeout.Milliseconds(), 10)},
		{"serverId", n.cfg.ID},
	}
	st.DataDirBytes = dirSize(n.cfg.DataDir)
	st.OpenFiles, st.MaxFiles = fileDescriptors()
	return st
}

// dirSize is the size of the files under dir.
func dirSize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// fileDescriptors returns the process's open file descriptors and its limit.
func fileDescriptors() (open, limit int64) {
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		open = int64(len(ents))
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		limit = int64(rl.Cur)
	}
	return open, limit
}

// portOf returns the port of a host:port address.
func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}
