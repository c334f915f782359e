package rpc

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/peerpb"
)

// cluster is what the session engine needs of this server (engine.Cluster):
// the way into the log, read indexes and the leader's session deadlines.
type cluster struct{ n *Node }

// Submit queues a command for the log, forwarded to the leader if need be.
func (c cluster) Submit(cmd *cmdpb.Command) { c.n.prop.submit(cmd) }

// ReadIndex returns the read index of a sync (see readindex.go).
func (c cluster) ReadIndex(done <-chan struct{}) (int64, error) { return c.n.readIndex(done) }

// Serving reports whether this server knows a leader.
func (c cluster) Serving() bool { return c.n.serving() }

// PassTouches refreshes the sessions' deadlines on the leader (this server
// or another) and reports whether the leader then had its term confirmed
// by a majority asked after that, so that the sessions may be vouched for
// (rpc/DESIGN.md, "Vouching for sessions").
func (c cluster) PassTouches(ctx context.Context, ids []int64) (bool, error) {
	n := c.n
	if n.leader.touch(ids) {
		// The round starts after the touches were recorded: a majority then
		// confirms that no later leader existed when they were.
		if _, err := n.leaderReadIndex(ctx); err != nil {
			return false, nil // recorded, but not confirmed: no vouch
		}
		return true, nil
	}
	return n.peers.touchLeader(ctx, ids)
}

// observer is the FSM's observer: the leader's duties learn of promotions,
// opens and closes, then the engine routes replies and events.
type observer struct{ n *Node }

// Applied implements fsm.Observer.
func (o observer) Applied(a *fsm.Applied) {
	o.n.leader.applied(a)
	o.n.engine.Applied(a)
	if cs := a.Cmd.GetCloseSession(); cs != nil && cs.Expired && len(a.Closed) > 0 {
		o.n.metrics.SessionExpired()
	}
}

// Restored implements fsm.Observer.
func (o observer) Restored() {
	o.n.leader.restored()
	o.n.engine.Restored()
}

// clientAddrs remembers the client addresses of the members, as their Info
// answers said, for /zookeeper/config (the Raft configuration knows only
// peer addresses).
type clientAddrs struct {
	mu sync.Mutex
	m  map[string]string // server id -> client address
	// asking is set while a background refresh runs.
	asking atomic.Bool
}

func (c *clientAddrs) set(id, addr string) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[id] = addr
	c.mu.Unlock()
}

func (c *clientAddrs) get(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

// configData renders the membership as ZooKeeper's dynamic configuration,
// the data of /zookeeper/config: one line per server,
// "server.ID=HOST:PEERPORT:PEERPORT:ROLE;CLIENTHOST:CLIENTPORT" (coordd has one
// peer port where ZooKeeper has a quorum and an election port; the client
// part is left out while a member's client address is not known yet), then
// "version=" and the index of the configuration in hex. It never blocks: a
// member whose client address is unknown is asked in the background.
func (n *Node) configData() ([]byte, int64) {
	if !n.raftSet.Load() {
		return nil, 0
	}
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return nil, 0
	}
	servers := cf.Configuration().Servers
	sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
	var b strings.Builder
	missing := false
	for _, s := range servers {
		role := "participant"
		if s.Suffrage != raft.Voter {
			role = "observer"
		}
		fmt.Fprintf(&b, "server.%s=%s:%s:%s", s.ID, s.Address, portOf(string(s.Address)), role)
		client := n.clients.get(string(s.ID))
		if string(s.ID) == n.cfg.ID {
			client = n.ClientAddr()
		}
		if client != "" {
			fmt.Fprintf(&b, ";%s", client)
		} else {
			missing = true
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "version=%x", cf.Index())
	if missing && n.clients.asking.CompareAndSwap(false, true) {
		go func() {
			defer n.clients.asking.Store(false)
			n.memberInfos(n.ctx, &peerpb.InfoRequest{})
		}()
	}
	return []byte(b.String()), int64(cf.Index())
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// Reconfig makes a ZooKeeper reconfig's membership changes, one at a time:
// each joining server ("server.ID=HOST:PORT[:PORT][:ROLE][;CLIENT]",
// observers as non-voters) is added as AddMember adds one, then each
// leaving id is removed. It returns the new configuration's index.
func (c cluster) Reconfig(ctx context.Context, r engine.Reconfig) (int64, error) {
	n := c.n
	if r.NewMembers != "" {
		return 0, &engine.Error{Code: engine.BadArguments, Message: "coordd takes incremental reconfigurations only (joining and leaving servers), not a new member list"}
	}
	var adds []*apipb.AddMemberRequest
	for _, line := range splitComma(r.Joining) {
		add, err := parseServerLine(line)
		if err != nil {
			return 0, &engine.Error{Code: engine.BadArguments, Message: err.Error()}
		}
		adds = append(adds, add)
	}
	if r.FromConfig != -1 {
		if cf := n.raft.GetConfiguration(); cf.Error() == nil && int64(cf.Index()) != r.FromConfig {
			return 0, &engine.Error{Code: engine.BadVersion, Message: fmt.Sprintf("the configuration is version %x, not %x", cf.Index(), r.FromConfig)}
		}
	}
	do := func(req *peerpb.ChangeMembersRequest) error {
		if _, err := n.changeMembers(ctx, req); err != nil {
			code := engine.NewConfigNoQuorum
			switch reasonOf(err) {
			case reasonBadArguments, reasonMemberExists, reasonNoMember, reasonLastVoter, reasonNotJoining:
				code = engine.BadArguments
			case reasonInProgress:
				code = engine.ReconfigInProgress
			}
			return &engine.Error{Code: code, Message: status.Convert(err).Message()}
		}
		return nil
	}
	for _, add := range adds {
		if err := do(&peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Add{Add: add}}); err != nil {
			return 0, err
		}
	}
	for _, id := range splitComma(r.Leaving) {
		if err := do(&peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Remove{Remove: &apipb.RemoveMemberRequest{Id: strings.TrimSpace(id)}}}); err != nil {
			return 0, err
		}
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return 0, err
	}
	return int64(cf.Index()), nil
}

// parseServerLine parses one server of ZooKeeper's dynamic configuration:
// "server.ID=HOST:PORT[:PORT][:participant|observer][;[CLIENTHOST:]CLIENTPORT]"
// (the first port is the peer port; coordd has no second one).
func parseServerLine(line string) (*apipb.AddMemberRequest, error) {
	key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
	id, isServer := strings.CutPrefix(key, "server.")
	if !ok || !isServer || id == "" {
		return nil, fmt.Errorf("%q is not a server line (server.ID=HOST:PORT:PORT:ROLE;CLIENTPORT)", line)
	}
	value, _, _ = strings.Cut(value, ";")
	parts := strings.Split(value, ":")
	if len(parts) < 2 {
		return nil, fmt.Errorf("%q has no HOST:PORT", line)
	}
	add := &apipb.AddMemberRequest{Id: id, PeerAddress: net.JoinHostPort(parts[0], parts[1])}
	for _, p := range parts[2:] {
		switch p {
		case "observer":
			add.NonVoter = true
		case "participant":
		default:
			if _, err := strconv.Atoi(p); err != nil {
				return nil, fmt.Errorf("%q: unknown role %q", line, p)
			}
		}
	}
	return add, nil
}
