package rpc

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/rpc/peerpb"
)

// The questions of a sync round (ReadIndex to the leader, Term to the other
// voters) travel on one long-lived Ask stream per pair of servers, tagged
// with ids, instead of one unary call each. A unary gRPC call opens and
// closes an HTTP/2 stream: headers both ways, trailers, a server goroutine,
// a context. Under read-sync load those calls were a quarter to a third of
// every server's CPU; on the stream a question and its answer are one small
// message each way. The answers are what the unary calls would have
// returned, computed when the question arrives, so a Term answer is still
// evidence gathered after the round began (see confirmTerm).

// Ask serves a peer's questions: Term inline, in arrival order; each
// ReadIndex in its own goroutine, since it may wait for a round or for this
// server's FSM. Answers go out as they are ready, under a lock (gRPC allows
// one sender at a time) and never after the handler has returned.
func (s *peerService) Ask(stream peerpb.Peer_AskServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	var (
		mu     sync.Mutex
		closed bool
		wg     sync.WaitGroup
	)
	send := func(resp *peerpb.AskResponse) {
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			_ = stream.Send(resp) // a failed send ends the stream; Recv reports it
		}
	}
	defer func() {
		mu.Lock()
		closed = true
		mu.Unlock()
		cancel()
		wg.Wait()
	}()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		switch q := req.Kind.(type) {
		case *peerpb.AskRequest_Term:
			send(&peerpb.AskResponse{Id: req.Id, Kind: &peerpb.AskResponse_Term{
				Term: &peerpb.TermResponse{Term: s.n.raft.CurrentTerm()}}})
		case *peerpb.AskRequest_ReadIndex:
			id, serverID, term := req.Id, q.ReadIndex.GetServerId(), q.ReadIndex.GetTerm()
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(ctx, askTimeout)
				defer cancel()
				idx, err := s.n.leaderReadIndexFor(ctx, serverID, term)
				if err != nil {
					send(&peerpb.AskResponse{Id: id, Error: err.Error()})
					return
				}
				send(&peerpb.AskResponse{Id: id, Kind: &peerpb.AskResponse_ReadIndex{
					ReadIndex: &peerpb.ReadIndexResponse{Index: uint64(idx)}}})
			}()
		default:
			send(&peerpb.AskResponse{Id: req.Id, Error: "rpc: unknown question"})
		}
	}
}

// askTimeout bounds the time a server spends on one ReadIndex question, as
// the deadline of the asker's unary call did.
const askTimeout = 5 * time.Second

// asker asks one peer questions on an Ask stream, opening it on first use
// and again after it breaks. A peer without Ask (an older coordd) is asked
// with the unary calls instead, and the stream is tried again after
// unaryRetry.
type asker struct {
	cc  *grpc.ClientConn
	ctx context.Context // the node's: ends the stream when the node stops

	mu        sync.Mutex
	cur       *askStream    // nil when none is open
	opening   chan struct{} // closed when the open under way finishes; nil if none
	openErr   error         // the last open's error, for those that waited on it
	unaryTill time.Time     // ask with unary calls until then
}

// unaryRetry is how long a peer that lacks Ask is asked with unary calls
// before the stream is tried again (it may have been upgraded since).
const unaryRetry = time.Minute

// errAskBroken: the stream ended before the answer came.
var errAskBroken = errors.New("rpc: peer question stream broken")

func newAsker(ctx context.Context, cc *grpc.ClientConn) *asker {
	return &asker{cc: cc, ctx: ctx}
}

// term asks for the peer's current Raft term.
func (a *asker) term(ctx context.Context) (uint64, error) {
	resp, err := a.question(ctx, &peerpb.AskRequest{Kind: &peerpb.AskRequest_Term{Term: &peerpb.TermRequest{}}},
		func() (*peerpb.AskResponse, error) {
			r, err := peerpb.NewPeerClient(a.cc).Term(ctx, &peerpb.TermRequest{})
			return &peerpb.AskResponse{Kind: &peerpb.AskResponse_Term{Term: r}}, err
		})
	if err != nil {
		return 0, err
	}
	t, ok := resp.Kind.(*peerpb.AskResponse_Term)
	if !ok {
		return 0, errors.New("rpc: peer answered a term question with something else")
	}
	return t.Term.GetTerm(), nil
}

// readIndex asks the peer, as leader, for a read index (see
// leaderReadIndexFor).
func (a *asker) readIndex(ctx context.Context, req *peerpb.ReadIndexRequest) (uint64, error) {
	resp, err := a.question(ctx, &peerpb.AskRequest{Kind: &peerpb.AskRequest_ReadIndex{ReadIndex: req}},
		func() (*peerpb.AskResponse, error) {
			r, err := peerpb.NewPeerClient(a.cc).ReadIndex(ctx, req)
			return &peerpb.AskResponse{Kind: &peerpb.AskResponse_ReadIndex{ReadIndex: r}}, err
		})
	if err != nil {
		return 0, err
	}
	r, ok := resp.Kind.(*peerpb.AskResponse_ReadIndex)
	if !ok {
		return 0, errors.New("rpc: peer answered a read-index question with something else")
	}
	return r.ReadIndex.GetIndex(), nil
}

// question asks q on the stream, or with unary (the same question as a
// unary call) while the peer is known to lack Ask, or once it turns out to.
func (a *asker) question(ctx context.Context, q *peerpb.AskRequest, unary func() (*peerpb.AskResponse, error)) (*peerpb.AskResponse, error) {
	if !a.unary() {
		resp, err := a.ask(ctx, q)
		if !a.fellBack(err) {
			return resp, err
		}
	}
	return unary()
}

func (a *asker) unary() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return time.Now().Before(a.unaryTill)
}

// fellBack reports whether err says the peer has no Ask method, and if so
// switches to unary calls for a while.
func (a *asker) fellBack(err error) bool {
	if err == nil || status.Code(err) != codes.Unimplemented {
		return false
	}
	a.mu.Lock()
	a.unaryTill = time.Now().Add(unaryRetry)
	a.mu.Unlock()
	return true
}

// ask sends one question and waits for its answer, ctx's end, or the
// stream's. An answer with an error is returned as that error.
func (a *asker) ask(ctx context.Context, req *peerpb.AskRequest) (*peerpb.AskResponse, error) {
	s, err := a.stream(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := s.send(req)
	if err != nil {
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, s.error()
		}
		if resp.Error != "" {
			return nil, errors.New(resp.Error)
		}
		return resp, nil
	case <-ctx.Done():
		s.forget(req.Id)
		return nil, ctx.Err()
	}
}

// stream returns the open stream, opening one if there is none. Opening
// may wait for the connection; the caller waits at most until ctx ends,
// while the open goes on for the next caller.
func (a *asker) stream(ctx context.Context) (*askStream, error) {
	a.mu.Lock()
	if a.cur != nil {
		s := a.cur
		a.mu.Unlock()
		return s, nil
	}
	if a.opening == nil {
		a.opening = make(chan struct{})
		go a.open(a.opening)
	}
	opening := a.opening
	a.mu.Unlock()
	select {
	case <-opening:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur != nil {
		return a.cur, nil
	}
	if a.openErr != nil {
		return nil, a.openErr
	}
	// It opened and ended already: its receiver cleared a.cur before this
	// caller could take it.
	return nil, errAskBroken
}

func (a *asker) open(done chan struct{}) {
	ctx, cancel := context.WithCancel(a.ctx)
	cs, err := peerpb.NewPeerClient(a.cc).Ask(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.opening = nil
	defer close(done)
	if err != nil {
		cancel()
		a.openErr = err
		return
	}
	s := &askStream{cs: cs, cancel: cancel, pending: make(map[uint64]chan *peerpb.AskResponse)}
	a.cur, a.openErr = s, nil
	go func() {
		s.receive()
		a.mu.Lock()
		if a.cur == s {
			a.cur = nil
		}
		a.mu.Unlock()
	}()
}

// askStream is one open Ask stream and the questions awaiting answers.
type askStream struct {
	cs     peerpb.Peer_AskClient
	cancel context.CancelFunc

	sendMu sync.Mutex // serializes sends (gRPC allows one sender at a time)

	mu      sync.Mutex // guards the fields below
	nextID  uint64
	pending map[uint64]chan *peerpb.AskResponse
	err     error // why the stream ended; pending is nil once it has
}

// send registers req under a fresh id and sends it; the returned channel
// gets the answer, or is closed if the stream ends first.
func (s *askStream) send(req *peerpb.AskRequest) (<-chan *peerpb.AskResponse, error) {
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		return nil, s.err
	}
	s.nextID++
	req.Id = s.nextID
	ch := make(chan *peerpb.AskResponse, 1)
	s.pending[req.Id] = ch
	s.mu.Unlock()
	s.sendMu.Lock()
	err := s.cs.Send(req)
	s.sendMu.Unlock()
	if err != nil {
		// The stream is broken; Recv reports why and ends it.
		s.forget(req.Id)
		s.cancel()
		return nil, errAskBroken
	}
	return ch, nil
}

// forget drops a question whose asker stopped waiting.
func (s *askStream) forget(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, id)
}

func (s *askStream) error() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// receive hands each answer to its question until the stream ends, then
// closes every waiting question's channel.
func (s *askStream) receive() {
	for {
		resp, err := s.cs.Recv()
		if err != nil {
			s.cancel()
			s.mu.Lock()
			if status.Code(err) == codes.Unimplemented {
				s.err = err
			} else {
				s.err = errors.Join(errAskBroken, err)
			}
			for _, ch := range s.pending {
				close(ch)
			}
			s.pending = nil
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		ch, ok := s.pending[resp.Id]
		delete(s.pending, resp.Id)
		s.mu.Unlock()
		if ok {
			ch <- resp
		}
	}
}
