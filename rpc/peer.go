package rpc

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/peerpb"
)

// peerService implements the internal peer API.
type peerService struct {
	peerpb.UnimplementedPeerServer
	n *Node
}

// Forward proposes a follower's commands in arrival order and confirms
// them once committed, in the same order. A confirmation is cumulative (it
// covers every earlier command of the stream), so under load one message
// confirms a whole batch: one is sent whenever no more futures are waiting,
// and at least every maxAckBatch commands.
func (s *peerService) Forward(stream peerpb.Peer_ForwardServer) error {
	n := s.n
	type inflight struct {
		seq uint64
		f   raft.ApplyFuture
	}
	futures := make(chan inflight, 4096)
	done := make(chan error, 1)
	// Only the helper below sends on the stream while it runs (gRPC allows
	// one sender at a time, and none once the handler has returned). The
	// handler waits for it to finish, which it does once futures is closed
	// and every future it holds has resolved, and then sends its last word,
	// if any, after every confirmation.
	finished := make(chan struct{})
	var last *peerpb.ForwardResponse
	defer func() {
		close(futures)
		<-finished
		if last != nil {
			_ = stream.Send(last)
		}
	}()
	go func() {
		defer close(finished)
		var ack *peerpb.ForwardResponse // committed, not yet confirmed
		unacked := 0
		flush := func() error {
			if ack == nil {
				return nil
			}
			err := stream.Send(ack)
			ack, unacked = nil, 0
			return err
		}
		fail := func(err error) {
			done <- err
			for range futures {
			}
		}
		for {
			var in inflight
			var ok bool
			select {
			case in, ok = <-futures:
			default:
				if err := flush(); err != nil {
					fail(err)
					return
				}
				in, ok = <-futures
			}
			if !ok {
				done <- flush()
				return
			}
			if err := in.f.Error(); err != nil {
				resp := &peerpb.ForwardResponse{Seq: in.seq, Error: err.Error(),
					NotLeader: errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
						errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, raft.ErrLeadershipTransferInProgress)}
				if err := flush(); err != nil {
					fail(err)
					return
				}
				if err := stream.Send(resp); err != nil {
					fail(err)
					return
				}
				fail(nil)
				return
			}
			ack = &peerpb.ForwardResponse{Seq: in.seq, Index: in.f.Index()}
			if unacked++; unacked >= maxAckBatch {
				if err := flush(); err != nil {
					fail(err)
					return
				}
			}
		}
	}()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		if n.raft.State() != raft.Leader {
			last = &peerpb.ForwardResponse{Seq: req.Seq, Error: "not the leader", NotLeader: true}
			return nil
		}
		cmd := &cmdpb.Command{}
		if err := proto.Unmarshal(req.Command, cmd); err != nil || !forwardable(cmd) || cmd.TimeMs != 0 {
			last = &peerpb.ForwardResponse{Seq: req.Seq, Error: "malformed or forbidden command"}
			return nil
		}
		data := stamp(req.Command)
		select {
		case futures <- inflight{seq: req.Seq, f: n.raft.Apply(data, 0)}:
		case err := <-done:
			return err
		}
	}
}

// maxAckBatch bounds how many committed forwarded commands one confirmation
// may cover, so that a follower's list of unconfirmed commands stays short
// under sustained load.
const maxAckBatch = 64

// forwardable reports whether a follower may ask for this command: client
// writes, addAuth and session open, resume and close only; the leader makes
// the rest itself.
func forwardable(cmd *cmdpb.Command) bool {
	switch c := cmd.Cmd.(type) {
	case *cmdpb.Command_Write:
		return c.Write.SessionId != 0 && c.Write.Op != nil
	case *cmdpb.Command_AddAuth:
		return c.AddAuth.SessionId != 0
	case *cmdpb.Command_OpenSession, *cmdpb.Command_CloseSession, *cmdpb.Command_ResumeSession:
		return true
	}
	return false
}

// ReadIndex returns the leader's read index (see leaderReadIndex). The
// index is committed, and the leader's Raft pushed the commit to the
// followers when it advanced (rpc/third_party/raft), so the caller learns it soon.
func (s *peerService) ReadIndex(ctx context.Context, req *peerpb.ReadIndexRequest) (*peerpb.ReadIndexResponse, error) {
	idx, err := s.n.leaderReadIndexFor(ctx, req.ServerId, req.Term)
	if err != nil {
		return nil, err
	}
	return &peerpb.ReadIndexResponse{Index: uint64(idx)}, nil
}

// Term reports this server's current Raft term (see confirmTerm).
func (s *peerService) Term(context.Context, *peerpb.TermRequest) (*peerpb.TermResponse, error) {
	return &peerpb.TermResponse{Term: s.n.raft.CurrentTerm()}, nil
}

// Touch passes keep-alives to the leader's session tracker. When the
// sender said its term, the leader then has that term confirmed by a
// majority (counting the sender when it is in this term, as a read index
// does) and says so: the sender may then vouch for the sessions.
func (s *peerService) Touch(ctx context.Context, req *peerpb.TouchRequest) (*peerpb.TouchResponse, error) {
	if !s.n.leader.touch(req.Sessions) {
		return nil, errNoLeader
	}
	resp := &peerpb.TouchResponse{}
	if req.Term != 0 {
		_, err := s.n.leaderReadIndexFor(ctx, req.ServerId, req.Term)
		resp.Confirmed = err == nil
	}
	return resp, nil
}

// ChangeMembers makes a membership change that another server took here
// (see membership.go).
func (s *peerService) ChangeMembers(ctx context.Context, req *peerpb.ChangeMembersRequest) (*apipb.MembersResponse, error) {
	return s.n.changeMembers(ctx, req)
}

// Info reports this server's own view.
func (s *peerService) Info(_ context.Context, req *peerpb.InfoRequest) (*peerpb.InfoResponse, error) {
	return s.n.info(req), nil
}

// peerClients keeps one gRPC connection per peer address.
type peerClients struct {
	n      *Node
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	askers map[string]*asker
}

func newPeerClients(n *Node) *peerClients {
	return &peerClients{n: n, conns: make(map[string]*grpc.ClientConn), askers: make(map[string]*asker)}
}

// asker returns the question stream to the peer at addr.
func (p *peerClients) asker(addr string) (*asker, error) {
	cc, err := p.conn(addr)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.askers[addr]
	if !ok {
		a = newAsker(p.n.ctx, cc)
		p.askers[addr] = a
	}
	return a, nil
}

// leaderAsker returns the question stream to the current leader.
func (p *peerClients) leaderAsker() (*asker, error) {
	addr, id := p.n.raft.LeaderWithID()
	if id == "" {
		return nil, errNoLeader
	}
	return p.asker(string(addr))
}

func (p *peerClients) conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return nil, errors.New("rpc: shutting down")
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, p.n.peerDialOptions()...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = cc
	return cc, nil
}

// infoTimeout bounds one Info question to a peer (status, the leader's
// client-address registration, the membership checks).
const infoTimeout = 700 * time.Millisecond

// askInfo asks the server at addr for its own view (req), within
// infoTimeout. A connection that failed and is waiting out its reconnect
// backoff fails a question at once; it is made to connect again now, so
// that a server just started again answers the next question (coordctl
// status shows it within a poll), not the first after the backoff. The
// question does not wait for that connection: a server that is down
// fails it at once, and status does not slow down.
func (n *Node) askInfo(ctx context.Context, addr string, req *peerpb.InfoRequest) (*peerpb.InfoResponse, error) {
	cc, err := n.peers.conn(addr)
	if err != nil {
		return nil, err
	}
	if cc.GetState() == connectivity.TransientFailure {
		cc.ResetConnectBackoff()
	}
	ctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	return peerpb.NewPeerClient(cc).Info(ctx, req)
}

func (p *peerClients) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cc := range p.conns {
		cc.Close()
	}
	p.conns = nil
}

func (p *peerClients) leader() (peerpb.PeerClient, error) {
	addr, id := p.n.raft.LeaderWithID()
	if id == "" {
		return nil, errNoLeader
	}
	cc, err := p.conn(string(addr))
	if err != nil {
		return nil, err
	}
	return peerpb.NewPeerClient(cc), nil
}

// touchLeader passes touches to the leader and reports whether it
// confirmed them (see peerService.Touch). The term is read after the
// touches were collected.
func (p *peerClients) touchLeader(ctx context.Context, ids []int64) (bool, error) {
	c, err := p.leader()
	if err != nil {
		return false, err
	}
	resp, err := c.Touch(ctx, &peerpb.TouchRequest{Sessions: ids, Term: p.n.raft.CurrentTerm(), ServerId: p.n.cfg.ID})
	if err != nil {
		return false, err
	}
	return resp.Confirmed, nil
}
