package rpc

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/peerpb"
)

// Membership changes are Raft configuration changes, which only the leader
// makes: any server takes a request to it (ChangeMembers on the peer
// port). The leader makes one change at a time, and refuses one that could
// leave the cluster without a majority: a server joins as a non-voter and
// is promoted only once it has caught up (etcd's learner rule); a removal
// or promotion must leave a majority of the new voters reachable; and a
// majority must confirm the leader's term before anything is proposed.

// Why a membership change was refused: apipb.MemberRefusal, a typed detail
// of the refusal's gRPC status (with its name as an ErrorInfo reason for
// older clients), so that a client (coordctl's -o json) tells refusals
// apart without reading messages. The short names below keep the refusals
// readable where they are made.
const (
	reasonBadArguments = apipb.MemberRefusal_MEMBER_BAD_ARGUMENTS
	reasonMemberExists = apipb.MemberRefusal_MEMBER_EXISTS
	reasonNoMember     = apipb.MemberRefusal_MEMBER_NO_MEMBER
	reasonInProgress   = apipb.MemberRefusal_MEMBER_RECONFIG_IN_PROGRESS
	reasonNoQuorum     = apipb.MemberRefusal_MEMBER_NEW_CONFIG_NO_QUORUM
	reasonLastVoter    = apipb.MemberRefusal_MEMBER_LAST_VOTER
	reasonNotCaughtUp  = apipb.MemberRefusal_MEMBER_NOT_CAUGHT_UP
	reasonAlreadyVoter = apipb.MemberRefusal_MEMBER_ALREADY_VOTER
	reasonNotVoter     = apipb.MemberRefusal_MEMBER_NOT_VOTER
	reasonNotJoining   = apipb.MemberRefusal_MEMBER_NOT_JOINING
	reasonNoLeader     = apipb.MemberRefusal_MEMBER_NO_LEADER
	reasonUnavailable  = apipb.MemberRefusal_MEMBER_UNAVAILABLE
	notARefusal        = apipb.MemberRefusal_MEMBER_REFUSAL_UNSPECIFIED
)

// refuse returns a gRPC status error with code, refusal and message.
func refuse(code codes.Code, reason apipb.MemberRefusal, format string, args ...any) error {
	return apipb.RefusalStatus(code, reason, fmt.Sprintf(format, args...))
}

// reasonOf returns the refusal err carries (notARefusal for another error).
func reasonOf(err error) apipb.MemberRefusal { return apipb.RefusalOf(err) }

// leaderUnreachable passes on the leader's answer to a change taken there;
// a failure to reach it at all (no reason from the leader: it has just
// stopped, or is cut off, and an election is coming) is NoLeader, which
// the asker may ask again.
func leaderUnreachable(err error) error {
	if err == nil || reasonOf(err) != notARefusal {
		return err
	}
	return refuse(codes.Unavailable, reasonNoLeader,
		"the leader could not be reached (%s); if it had begun the change, coordctl member list shows whether it was made", status.Convert(err).Message())
}

// withHint adds a hint to a refusal's message, keeping its code and reason.
func withHint(err error, hint string) error {
	st := status.Convert(err)
	return refuse(st.Code(), reasonOf(err), "%s (%s)", st.Message(), hint)
}

// defaultCatchUp bounds the wait for a new server to catch up.
const defaultCatchUp = 60 * time.Second

// commitWait bounds the wait for the configuration to commit before a
// change is refused as one in progress.
const commitWait = 3 * time.Second

// configTimeout bounds the commit of one configuration change.
const configTimeout = 10 * time.Second

// members lists the membership with each member's own view.
func (n *Node) members(ctx context.Context) (*apipb.MembersResponse, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, refuse(codes.Unavailable, reasonUnavailable, "reading the configuration: %v", err)
	}
	_, infos := n.memberInfos(ctx, &peerpb.InfoRequest{})
	_, leader := n.raft.LeaderWithID()
	resp := &apipb.MembersResponse{ConfigIndex: cf.Index(), Leader: string(leader)}
	for _, sv := range cf.Configuration().Servers {
		resp.Members = append(resp.Members, memberOf(sv, infos[string(sv.ID)]))
	}
	n.listedClientAddrs(resp.Members)
	sort.Slice(resp.Members, func(i, j int) bool { return resp.Members[i].Id < resp.Members[j].Id })
	return resp, nil
}

// memberOf describes one server of the configuration.
func memberOf(sv raft.Server, in *peerpb.InfoResponse) *apipb.Member {
	m := &apipb.Member{Id: string(sv.ID), PeerAddress: string(sv.Address), Role: "unreachable", Voter: sv.Suffrage == raft.Voter}
	if in != nil {
		m.Role, m.ClientAddress, m.Applied, m.RssBytes, m.CpuSeconds, m.Version = in.Role, in.ClientAddress, in.Applied, in.RssBytes, in.CpuSeconds, in.Version
		m.Level = max(in.Level, 1)
		m.Term, m.Commit, m.LastContactMs = in.Term, in.Commit, in.LastContactMs
		m.Reads, m.Writes, m.WriteSeconds = in.Reads, in.Writes, in.WriteSeconds
	}
	return m
}

// changeMembers makes a membership change on the leader, or takes it there.
func (n *Node) changeMembers(ctx context.Context, req *peerpb.ChangeMembersRequest) (*apipb.MembersResponse, error) {
	if t := req.GetTransfer(); t != nil {
		if _, err := n.transferLeadership(ctx, t); err != nil {
			return nil, err
		}
		return n.members(ctx)
	}
	if n.raft.State() != raft.Leader {
		c, err := n.peers.leader()
		if err != nil {
			return nil, refuse(codes.Unavailable, reasonNoLeader, "no leader to make the change (an election under way, or no majority)")
		}
		resp, err := c.ChangeMembers(ctx, req)
		return resp, leaderUnreachable(err)
	}
	if !n.memberMu.TryLock() {
		return nil, refuse(codes.FailedPrecondition, reasonInProgress, "another membership change is in progress on the leader; try again once it is done")
	}
	defer n.memberMu.Unlock()
	var err error
	switch c := req.Change.(type) {
	case *peerpb.ChangeMembersRequest_Add:
		err = n.addMember(ctx, c.Add, req.ZkSpec)
	case *peerpb.ChangeMembersRequest_Remove:
		err = n.removeMember(ctx, c.Remove)
	case *peerpb.ChangeMembersRequest_Promote:
		err = n.promoteMember(ctx, c.Promote.Id, c.Promote.CatchUpMs)
	default:
		err = refuse(codes.InvalidArgument, reasonBadArguments, "no change given")
	}
	if err != nil {
		return nil, err
	}
	return n.members(ctx)
}

// stableConfig returns the configuration, refusing to go on while an
// earlier change has not committed. It waits a moment for that first: a
// new leader learns that the configuration committed only once the first
// entry of its term has.
func (n *Node) stableConfig(ctx context.Context) (raft.Configuration, uint64, error) {
	deadline := time.Now().Add(commitWait)
	for {
		cf := n.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			return raft.Configuration{}, 0, refuse(codes.Unavailable, reasonUnavailable, "reading the configuration: %v", err)
		}
		if n.raft.CommitIndex() >= cf.Index() {
			return cf.Configuration(), cf.Index(), nil
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return raft.Configuration{}, 0, refuse(codes.FailedPrecondition, reasonInProgress,
				"a membership change is in progress (configuration %d is not committed yet); try again once it is", cf.Index())
		}
		select {
		case <-ctx.Done():
		case <-n.ctx.Done():
			return raft.Configuration{}, 0, refuse(codes.Unavailable, reasonUnavailable, "the server is shutting down")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// confirmMajority has a majority of the voters confirm this leader's term
// now, so that a change is proposed only when it can commit.
func (n *Node) confirmMajority(ctx context.Context) error {
	if _, err := n.leaderReadIndex(ctx); err != nil {
		return refuse(codes.Unavailable, reasonNoQuorum, "no majority of the voters confirmed the leader just now (%v): the change could not commit", err)
	}
	return nil
}

// reachable counts the servers among ids that answer now (the leader
// included).
func (n *Node) reachable(ctx context.Context, servers []raft.Server) map[string]bool {
	ok := map[string]bool{n.cfg.ID: true}
	for _, s := range servers {
		if string(s.ID) == n.cfg.ID {
			continue
		}
		if _, err := n.peerInfo(ctx, string(s.Address)); err == nil {
			ok[string(s.ID)] = true
		}
	}
	return ok
}

// peerInfo asks one server for its own view.
func (n *Node) peerInfo(ctx context.Context, addr string) (*peerpb.InfoResponse, error) {
	return n.askInfo(ctx, addr, &peerpb.InfoRequest{})
}

// keepsMajority refuses a change whose new voters would not have a
// reachable majority: the new configuration could not commit, and the
// cluster would stop.
func (n *Node) keepsMajority(ctx context.Context, newVoters []raft.Server) error {
	up := n.reachable(ctx, newVoters)
	count := 0
	for _, s := range newVoters {
		if up[string(s.ID)] {
			count++
		}
	}
	if count <= len(newVoters)/2 {
		return refuse(codes.FailedPrecondition, reasonNoQuorum,
			"after this change %d of its %d voters would be reachable, not a majority: the cluster would stop", count, len(newVoters))
	}
	return nil
}

func voterList(servers []raft.Server) []raft.Server {
	var out []raft.Server
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			out = append(out, s)
		}
	}
	return out
}

// addMember adds a server as a non-voter, records what a ZooKeeper
// reconfig gave for it (zk, nil for none), and promotes it unless it is to
// stay a non-voter.
func (n *Node) addMember(ctx context.Context, req *apipb.AddMemberRequest, zk *peerpb.ZooKeeperSpec) error {
	if req.Id == "" || req.PeerAddress == "" {
		return refuse(codes.InvalidArgument, reasonBadArguments, "a member needs an id and a peer address")
	}
	if _, err := ParsePeers(req.Id + "=" + req.PeerAddress); err != nil {
		return refuse(codes.InvalidArgument, reasonBadArguments, "%v", err)
	}
	conf, index, err := n.stableConfig(ctx)
	if err != nil {
		return err
	}
	for _, s := range conf.Servers {
		switch {
		case string(s.ID) == req.Id:
			return refuse(codes.AlreadyExists, reasonMemberExists, "id %s is already a member (peer address %s)", s.ID, s.Address)
		case string(s.Address) == req.PeerAddress:
			return refuse(codes.AlreadyExists, reasonMemberExists, "peer address %s is already member %s's", s.Address, s.ID)
		}
	}
	in, err := n.peerInfo(ctx, req.PeerAddress)
	if err := checkNewcomer(req.Id, req.PeerAddress, in, err, n.fsm.ClusterLevel()); err != nil {
		return err
	}
	if err := n.confirmMajority(ctx); err != nil {
		return err
	}
	if err := n.raft.AddNonvoter(raft.ServerID(req.Id), raft.ServerAddress(req.PeerAddress), index, configTimeout).Error(); err != nil {
		return refuse(codes.Unavailable, reasonUnavailable, "adding %s as a non-voter: %v", req.Id, err)
	}
	n.log.Info("member added as a non-voter", "id", req.Id, "peer", req.PeerAddress)
	if zk != nil {
		n.recordSpec(req.Id, zk)
	}
	if req.NonVoter {
		return nil
	}
	wait := time.Duration(req.CatchUpMs) * time.Millisecond
	if wait <= 0 {
		wait = defaultCatchUp
	}
	if err := n.promoteMember(ctx, req.Id, wait.Milliseconds()); err != nil {
		return withHint(err, fmt.Sprintf("server %s was added as a non-voter; promote it with coordctl member promote %s once it runs and has caught up", req.Id, req.Id))
	}
	return nil
}

// checkNewcomer looks at what a server about to be added as id says of
// itself, when it answers (one that does not answer yet is added all the
// same, and catches up once it runs): it must have that id, and must not
// lead a cluster of its own. A server started without --join on an empty
// data dir bootstraps one and elects itself; the leader's log would then
// seem to match its own (every cluster's first entry has index 1 and term
// 1) while its state machine has applied entries the cluster never had.
// Nor may it be older than the cluster's command level (level): it would
// meet commands it cannot apply.
func checkNewcomer(id, addr string, in *peerpb.InfoResponse, err error, level int64) error {
	switch {
	case err != nil:
		return nil
	case in.Id != id:
		return refuse(codes.InvalidArgument, reasonBadArguments, "the server at %s is server %s, not %s", addr, in.Id, id)
	case in.Role == "leader":
		return refuse(codes.FailedPrecondition, reasonNotJoining,
			"the server at %s leads a cluster of its own (it was not started with --join): stop it, empty its data dir and start it with --join", addr)
	case max(in.Level, 1) < level:
		return refuse(codes.FailedPrecondition, reasonBadArguments,
			"the server at %s runs coordd %s, which applies command level %d, and the cluster runs at level %d: run a newer coordd there", addr, in.Version, max(in.Level, 1), level)
	}
	return nil
}

// promoteMember makes non-voter id a voter once it has caught up, waiting
// up to catchUpMs for that.
func (n *Node) promoteMember(ctx context.Context, id string, catchUpMs int64) error {
	conf, _, err := n.stableConfig(ctx)
	if err != nil {
		return err
	}
	var target *raft.Server
	for i := range conf.Servers {
		if string(conf.Servers[i].ID) == id {
			target = &conf.Servers[i]
		}
	}
	switch {
	case target == nil:
		return refuse(codes.NotFound, reasonNoMember, "no member with id %s", id)
	case target.Suffrage == raft.Voter:
		return refuse(codes.FailedPrecondition, reasonAlreadyVoter, "member %s is a voter already", id)
	}
	if err := n.waitCaughtUp(ctx, *target, time.Duration(catchUpMs)*time.Millisecond); err != nil {
		return err
	}
	conf, index, err := n.stableConfig(ctx)
	if err != nil {
		return err
	}
	if err := n.keepsMajority(ctx, append(voterList(conf.Servers), *target)); err != nil {
		return err
	}
	if err := n.confirmMajority(ctx); err != nil {
		return err
	}
	if err := n.raft.AddVoter(target.ID, target.Address, index, configTimeout).Error(); err != nil {
		return refuse(codes.Unavailable, reasonUnavailable, "promoting %s: %v", id, err)
	}
	n.log.Info("member promoted to voter", "id", id)
	return nil
}

// waitCaughtUp waits until server s has applied everything committed when
// it is asked, for up to d (0: it must be caught up at the first look).
func (n *Node) waitCaughtUp(ctx context.Context, s raft.Server, d time.Duration) error {
	deadline := time.Now().Add(d)
	var last string
	for {
		commit := int64(n.raft.CommitIndex())
		in, err := n.peerInfo(ctx, string(s.Address))
		switch {
		case err != nil:
			last = fmt.Sprintf("it does not answer at %s (%v)", s.Address, err)
		case in.Applied >= commit:
			return nil
		default:
			last = fmt.Sprintf("it has applied %d of %d", in.Applied, commit)
		}
		if !time.Now().Before(deadline) {
			return refuse(codes.FailedPrecondition, reasonNotCaughtUp, "server %s has not caught up: %s", s.ID, last)
		}
		select {
		case <-ctx.Done():
			return refuse(codes.DeadlineExceeded, reasonNotCaughtUp, "server %s has not caught up: %s", s.ID, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (n *Node) removeMember(ctx context.Context, req *apipb.RemoveMemberRequest) error {
	conf, index, err := n.stableConfig(ctx)
	if err != nil {
		return err
	}
	var target *raft.Server
	var rest []raft.Server
	for i := range conf.Servers {
		if string(conf.Servers[i].ID) == req.Id {
			target = &conf.Servers[i]
		} else {
			rest = append(rest, conf.Servers[i])
		}
	}
	if target == nil {
		return refuse(codes.NotFound, reasonNoMember, "no member with id %s", req.Id)
	}
	if target.Suffrage == raft.Voter {
		voters := voterList(rest)
		if len(voters) == 0 {
			return refuse(codes.FailedPrecondition, reasonLastVoter, "member %s is the last voter: the cluster would have none", req.Id)
		}
		if err := n.keepsMajority(ctx, voters); err != nil {
			return err
		}
	}
	if err := n.confirmMajority(ctx); err != nil {
		return err
	}
	if err := n.raft.RemoveServer(target.ID, index, configTimeout).Error(); err != nil {
		return refuse(codes.Unavailable, reasonUnavailable, "removing %s: %v", req.Id, err)
	}
	n.log.Info("member removed", "id", req.Id)
	return nil
}

// transferLeadership hands leadership to voter id ("" for any), on the
// leader or taken there.
func (n *Node) transferLeadership(ctx context.Context, req *apipb.TransferLeadershipRequest) (*apipb.TransferLeadershipResponse, error) {
	if n.raft.State() != raft.Leader {
		_, old := n.raft.LeaderWithID()
		c, err := n.peers.leader()
		if err != nil {
			return nil, refuse(codes.Unavailable, reasonNoLeader, "no leader to hand over from (an election under way, or no majority)")
		}
		resp, err := c.ChangeMembers(ctx, &peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Transfer{Transfer: req}})
		if err != nil {
			return nil, leaderUnreachable(err)
		}
		// The old leader answers once it knows its successor; this server
		// may not have heard from that one yet, and still names the old.
		if resp.GetLeader() != "" {
			return &apipb.TransferLeadershipResponse{Leader: resp.GetLeader()}, nil
		}
		if req.Id == string(old) {
			return &apipb.TransferLeadershipResponse{Leader: req.Id}, nil
		}
		return n.awaitLeader(ctx, string(old))
	}
	var f raft.Future
	if req.Id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		if req.Id == n.cfg.ID {
			return &apipb.TransferLeadershipResponse{Leader: n.cfg.ID}, nil
		}
		conf, _, err := n.stableConfig(ctx)
		if err != nil {
			return nil, err
		}
		var target *raft.Server
		for i := range conf.Servers {
			if string(conf.Servers[i].ID) == req.Id {
				target = &conf.Servers[i]
			}
		}
		switch {
		case target == nil:
			return nil, refuse(codes.NotFound, reasonNoMember, "no member with id %s", req.Id)
		case target.Suffrage != raft.Voter:
			return nil, refuse(codes.FailedPrecondition, reasonNotVoter, "member %s is not a voter and cannot lead", req.Id)
		}
		f = n.raft.LeadershipTransferToServer(target.ID, target.Address)
	}
	if err := f.Error(); err != nil {
		return nil, refuse(codes.Unavailable, reasonUnavailable, "leadership transfer: %v", err)
	}
	return n.awaitLeader(ctx, n.cfg.ID)
}

// awaitLeader waits until a leader other than not is known here.
func (n *Node) awaitLeader(ctx context.Context, not string) (*apipb.TransferLeadershipResponse, error) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, id := n.raft.LeaderWithID(); id != "" && string(id) != not {
			return &apipb.TransferLeadershipResponse{Leader: string(id)}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil, refuse(codes.Unavailable, reasonUnavailable, "no new leader within 10s")
}

// admin answers the public API's calls about the cluster (grpcapi.Admin).
type admin struct{ n *Node }

// Status reports this server's view of the cluster.
func (a admin) Status(ctx context.Context) (*apipb.StatusResponse, error) { return a.n.status(ctx) }

// Sessions lists the cluster's open sessions.
func (a admin) Sessions(ctx context.Context) (*apipb.SessionsResponse, error) {
	return a.n.sessionList(ctx)
}

// Members lists the membership.
func (a admin) Members(ctx context.Context) (*apipb.MembersResponse, error) { return a.n.members(ctx) }

// AddMember adds a server.
func (a admin) AddMember(ctx context.Context, req *apipb.AddMemberRequest) (*apipb.MembersResponse, error) {
	return a.n.changeMembers(ctx, &peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Add{Add: req}})
}

// RemoveMember removes a server.
func (a admin) RemoveMember(ctx context.Context, req *apipb.RemoveMemberRequest) (*apipb.MembersResponse, error) {
	return a.n.changeMembers(ctx, &peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Remove{Remove: req}})
}

// PromoteMember promotes a non-voter.
func (a admin) PromoteMember(ctx context.Context, req *apipb.PromoteMemberRequest) (*apipb.MembersResponse, error) {
	return a.n.changeMembers(ctx, &peerpb.ChangeMembersRequest{Change: &peerpb.ChangeMembersRequest_Promote{Promote: req}})
}

// TransferLeadership hands leadership over.
func (a admin) TransferLeadership(ctx context.Context, req *apipb.TransferLeadershipRequest) (*apipb.TransferLeadershipResponse, error) {
	return a.n.transferLeadership(ctx, req)
}
