package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/engine"
)

// Config configures the service.
type Config struct {
	// ServerID is said in every ConnectResponse.
	ServerID string
	// MaxRequestBytes is said in every ConnectResponse: the largest
	// request, encoded, the server accepts (the client fails a larger one
	// itself: gRPC would end the stream on it).
	MaxRequestBytes int64
	// Admin answers the calls about the cluster rather than a session.
	Admin Admin
}

// Admin is what the server around the front-end answers: status, the
// cluster's sessions, and its membership.
type Admin interface {
	Status(context.Context) (*apipb.StatusResponse, error)
	Sessions(context.Context) (*apipb.SessionsResponse, error)
	Members(context.Context) (*apipb.MembersResponse, error)
	AddMember(context.Context, *apipb.AddMemberRequest) (*apipb.MembersResponse, error)
	RemoveMember(context.Context, *apipb.RemoveMemberRequest) (*apipb.MembersResponse, error)
	PromoteMember(context.Context, *apipb.PromoteMemberRequest) (*apipb.MembersResponse, error)
	TransferLeadership(context.Context, *apipb.TransferLeadershipRequest) (*apipb.TransferLeadershipResponse, error)
	// SaveSnapshot streams a backup file through send.
	SaveSnapshot(ctx context.Context, send func(*apipb.SnapshotChunk) error) error
}

// Service implements apipb.CoordServer on an engine.
type Service struct {
	apipb.UnimplementedCoordServer
	cfg Config
	e   *engine.Engine
}

// New returns the service of engine e.
func New(e *engine.Engine, cfg Config) *Service { return &Service{cfg: cfg, e: e} }

// Status reports the server's view of the cluster.
func (s *Service) Status(ctx context.Context, _ *apipb.StatusRequest) (*apipb.StatusResponse, error) {
	return s.cfg.Admin.Status(ctx)
}

// Sessions lists the open sessions of the cluster.
func (s *Service) Sessions(ctx context.Context, _ *apipb.SessionsRequest) (*apipb.SessionsResponse, error) {
	return s.cfg.Admin.Sessions(ctx)
}

// Members lists the cluster's members.
func (s *Service) Members(ctx context.Context, _ *apipb.MembersRequest) (*apipb.MembersResponse, error) {
	return s.cfg.Admin.Members(ctx)
}

// AddMember adds a server to the cluster.
func (s *Service) AddMember(ctx context.Context, req *apipb.AddMemberRequest) (*apipb.MembersResponse, error) {
	return s.cfg.Admin.AddMember(ctx, req)
}

// RemoveMember removes a server from the cluster.
func (s *Service) RemoveMember(ctx context.Context, req *apipb.RemoveMemberRequest) (*apipb.MembersResponse, error) {
	return s.cfg.Admin.RemoveMember(ctx, req)
}

// PromoteMember makes a non-voter a voter.
func (s *Service) PromoteMember(ctx context.Context, req *apipb.PromoteMemberRequest) (*apipb.MembersResponse, error) {
	return s.cfg.Admin.PromoteMember(ctx, req)
}

// TransferLeadership hands the leadership over.
func (s *Service) TransferLeadership(ctx context.Context, req *apipb.TransferLeadershipRequest) (*apipb.TransferLeadershipResponse, error) {
	return s.cfg.Admin.TransferLeadership(ctx, req)
}

// SaveSnapshot streams a backup of the whole state.
func (s *Service) SaveSnapshot(_ *apipb.SaveSnapshotRequest, stream apipb.Coord_SaveSnapshotServer) error {
	return s.cfg.Admin.SaveSnapshot(stream.Context(), stream.Send)
}

// connectTimeout bounds the wait for a stream's first message.
const connectTimeout = 10 * time.Second

// Session serves one client session stream: a ConnectRequest first, then
// requests, each answered in order, with watch events and vouches between.
func (s *Service) Session(stream apipb.Coord_SessionServer) error {
	ctx := stream.Context()
	first, err := recvWithin(stream, connectTimeout)
	if err != nil {
		return err
	}
	creq := first.GetConnect()
	if creq == nil {
		return sendFinal(stream, apipb.ErrorCode_MARSHALLING_ERROR, "the first message of a session must be a connect request")
	}
	sess, err := s.e.Connect(ctx, engine.ConnectRequest{
		SessionID: creq.SessionId, Password: creq.Password, TimeoutMs: creq.TimeoutMs, LastZxid: creq.LastZxid,
		Watches: engine.Watches{RelZxid: creq.LastZxid, Data: creq.DataWatches, Exist: creq.ExistWatches, Child: creq.ChildWatches,
			Persistent: creq.PersistentWatches, PersistentRecursive: creq.PersistentRecursiveWatches},
		Vouches: creq.Vouches,
		Conn:    connOf(ctx),
		// coordd's client numbers its requests once per session and
		// sends an unanswered write again with its xid.
		ClientRetries: true,
	})
	if err != nil {
		var ce *engine.ConnectError
		if errors.As(err, &ce) {
			return sendFinal(stream, codeToAPI(ce.Code), ce.Message)
		}
		return sendFinal(stream, apipb.ErrorCode_SYSTEM_ERROR, err.Error())
	}
	defer sess.Detach()

	recvErr := make(chan error, 1)
	go func() { recvErr <- recvLoop(stream, sess) }()
	err = s.sendLoop(ctx, stream, sess)
	sess.End(nil)
	select {
	case rerr := <-recvErr:
		if err == nil && rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = rerr
		}
	default:
	}
	return err
}

// recvLoop reads requests until the stream ends.
func recvLoop(stream apipb.Coord_SessionServer, sess *engine.Session) error {
	var lastXid int64
	for {
		msg, err := stream.Recv()
		if err != nil {
			sess.End(nil)
			return err
		}
		r := msg.GetRequest()
		if r == nil {
			sess.End(&engine.Response{Code: engine.MarshallingError, Message: "expected a request after connect"})
			return nil
		}
		if r.Xid <= lastXid {
			sess.End(&engine.Response{Xid: r.Xid, Code: engine.MarshallingError,
				Message: fmt.Sprintf("xid %d does not follow %d: xids must increase", r.Xid, lastXid)})
			return nil
		}
		lastXid = r.Xid
		req, ok := requestOf(r)
		if !ok {
			sess.Reject(&req, engine.BadArguments, "request without an operation")
			continue
		}
		sess.Submit(&req)
	}
}

// sendLoop writes what the session queues until its connection ends, then
// flushes.
func (s *Service) sendLoop(ctx context.Context, stream apipb.Coord_SessionServer, sess *engine.Session) error {
	for {
		batch, ended := sess.Next(ctx)
		for i := range batch {
			if err := stream.Send(s.message(&batch[i])); err != nil {
				return err
			}
		}
		if ended {
			return nil
		}
	}
}

// message encodes one queued message.
func (s *Service) message(m *engine.Message) *apipb.ServerMessage {
	switch {
	case m.Connected != nil:
		c := m.Connected
		cr := &apipb.ConnectResponse{SessionId: c.SessionID, Password: c.Password, TimeoutMs: c.TimeoutMs,
			ServerId: s.cfg.ServerID, Zxid: c.Zxid, MaxRequestBytes: s.cfg.MaxRequestBytes}
		if c.Vouches {
			cr.VouchIntervalMs = s.e.VouchInterval().Milliseconds()
		}
		return &apipb.ServerMessage{Kind: &apipb.ServerMessage_Connected{Connected: cr}}
	case m.Response != nil:
		return &apipb.ServerMessage{Kind: &apipb.ServerMessage_Response{Response: responseToAPI(m.Response)}}
	case m.Final != nil:
		return &apipb.ServerMessage{Kind: &apipb.ServerMessage_Response{Response: responseToAPI(m.Final)}}
	case m.Event != nil:
		return &apipb.ServerMessage{Kind: &apipb.ServerMessage_Event{Event: eventToAPI(m.Event)}}
	default:
		return &apipb.ServerMessage{Kind: &apipb.ServerMessage_Vouch{Vouch: &apipb.Vouch{Xid: m.Vouch}}}
	}
}

// connOf returns what the stream's transport says of the client: its
// address, and the subject of its certificate when the server verified one
// (a TLS listener that asks for client certificates).
func connOf(ctx context.Context) engine.Conn {
	var c engine.Conn
	p, ok := peer.FromContext(ctx)
	if !ok {
		return c
	}
	if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
		c.IP = ap.Addr().Unmap()
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		c.X509 = engine.VerifiedSubject(ti.State)
	}
	return c
}

func recvWithin(stream apipb.Coord_SessionServer, d time.Duration) (*apipb.ClientMessage, error) {
	type res struct {
		m   *apipb.ClientMessage
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := stream.Recv()
		ch <- res{m, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-t.C:
		return nil, status.Error(codes.DeadlineExceeded, "no connect request received")
	}
}

func sendFinal(stream apipb.Coord_SessionServer, code apipb.ErrorCode, msg string) error {
	_ = stream.Send(&apipb.ServerMessage{Kind: &apipb.ServerMessage_Response{Response: &apipb.Response{Error: code, Message: msg}}})
	return nil
}
