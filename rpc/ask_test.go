package rpc

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/rpc/peerpb"
)

// fakePeer answers Term with term and ReadIndex with index, counting the
// unary calls; with stream set, it also serves Ask through it.
type fakePeer struct {
	peerpb.UnimplementedPeerServer
	term, index uint64
	unaryCalls  atomic.Int64
	streams     atomic.Int64
	stream      func(peerpb.Peer_AskServer) error
}

func (f *fakePeer) Term(context.Context, *peerpb.TermRequest) (*peerpb.TermResponse, error) {
	f.unaryCalls.Add(1)
	return &peerpb.TermResponse{Term: f.term}, nil
}

func (f *fakePeer) ReadIndex(context.Context, *peerpb.ReadIndexRequest) (*peerpb.ReadIndexResponse, error) {
	f.unaryCalls.Add(1)
	return &peerpb.ReadIndexResponse{Index: f.index}, nil
}

// askServer registers f on a gRPC server on 127.0.0.1 and returns an asker
// connected to it. A nil f.stream leaves Ask unimplemented (an older peer).
func askServer(t *testing.T, f *fakePeer) *asker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	if f.stream == nil {
		peerpb.RegisterPeerServer(srv, f)
	} else {
		peerpb.RegisterPeerServer(srv, &streamingFake{fakePeer: f})
	}
	go func() { _ = srv.Serve(ln) }()
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); cc.Close(); srv.Stop() })
	return newAsker(ctx, cc)
}

// streamingFake is a fakePeer that implements Ask.
type streamingFake struct{ *fakePeer }

func (s *streamingFake) Ask(stream peerpb.Peer_AskServer) error {
	s.streams.Add(1)
	return s.stream(stream)
}

// answerAll answers every question correctly, a batch at a time in reverse
// order, so that answers do not arrive in the order of the questions.
func answerAll(f *fakePeer) func(peerpb.Peer_AskServer) error {
	return func(stream peerpb.Peer_AskServer) error {
		for {
			var batch []*peerpb.AskRequest
			for len(batch) < 4 {
				req, err := stream.Recv()
				if err != nil {
					return nil
				}
				batch = append(batch, req)
			}
			for i := len(batch) - 1; i >= 0; i-- {
				resp := &peerpb.AskResponse{Id: batch[i].Id}
				switch q := batch[i].Kind.(type) {
				case *peerpb.AskRequest_Term:
					resp.Kind = &peerpb.AskResponse_Term{Term: &peerpb.TermResponse{Term: f.term}}
				case *peerpb.AskRequest_ReadIndex:
					// Answer with the asker's term, to tell the answers apart.
					resp.Kind = &peerpb.AskResponse_ReadIndex{ReadIndex: &peerpb.ReadIndexResponse{Index: q.ReadIndex.Term}}
				}
				if err := stream.Send(resp); err != nil {
					return err
				}
			}
		}
	}
}

// TestAskerMatchesAnswersToQuestions: concurrent questions share one
// stream, make no unary call, and each gets its own answer even when the
// answers come back in another order.
func TestAskerMatchesAnswersToQuestions(t *testing.T) {
	f := &fakePeer{term: 7}
	f.stream = answerAll(f)
	a := askServer(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				if term, err := a.term(ctx); err != nil || term != 7 {
					errs <- errors.Join(err, errors.New("wrong term"))
				}
				return
			}
			want := uint64(1000 + i)
			if idx, err := a.readIndex(ctx, &peerpb.ReadIndexRequest{Term: want}); err != nil || idx != want {
				errs <- errors.Join(err, errors.New("read index answered for another question"))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := f.unaryCalls.Load(); n != 0 {
		t.Errorf("%d unary calls, want every question on the stream", n)
	}
	if n := f.streams.Load(); n != 1 {
		t.Errorf("%d streams opened, want 1 shared by every question", n)
	}
}

// TestAskerFallsBackToUnaryCalls: a peer without Ask (an older coordd) is
// asked with the unary calls, and the stream is not retried on every
// question.
func TestAskerFallsBackToUnaryCalls(t *testing.T) {
	f := &fakePeer{term: 5, index: 42}
	a := askServer(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if term, err := a.term(ctx); err != nil || term != 5 {
		t.Fatalf("term from a peer without Ask: %d, %v; want 5", term, err)
	}
	if idx, err := a.readIndex(ctx, &peerpb.ReadIndexRequest{}); err != nil || idx != 42 {
		t.Fatalf("read index from a peer without Ask: %d, %v; want 42", idx, err)
	}
	if n := f.unaryCalls.Load(); n != 2 {
		t.Errorf("%d unary calls, want 2", n)
	}
	if !a.unary() {
		t.Error("the asker did not remember that the peer lacks Ask")
	}
}

// TestAskerReopensABrokenStream: a question in flight when the stream
// breaks fails at once (not at its deadline), and the next question opens
// a new stream.
func TestAskerReopensABrokenStream(t *testing.T) {
	f := &fakePeer{term: 3}
	var first atomic.Bool
	first.Store(true)
	answer := answerAll(f)
	f.stream = func(stream peerpb.Peer_AskServer) error {
		if first.Swap(false) {
			if _, err := stream.Recv(); err != nil {
				return err
			}
			return errors.New("peer went away") // ends the stream unanswered
		}
		return answer(stream)
	}
	a := askServer(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := a.term(ctx); !errors.Is(err, errAskBroken) {
		t.Fatalf("question on a stream that broke: %v, want errAskBroken", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the question waited for its deadline instead of failing with the stream")
	}
	var wg sync.WaitGroup
	for range 4 { // answerAll answers in batches of 4
		wg.Add(1)
		go func() {
			defer wg.Done()
			if term, err := a.term(ctx); err != nil || term != 3 {
				t.Errorf("after the break: %d, %v; want 3", term, err)
			}
		}()
	}
	wg.Wait()
	if n := f.streams.Load(); n != 2 {
		t.Errorf("%d streams opened, want 2", n)
	}
}

// TestAskerGivesUpAtTheDeadline: a question left unanswered ends with its
// context, and is forgotten.
func TestAskerGivesUpAtTheDeadline(t *testing.T) {
	f := &fakePeer{}
	f.stream = func(stream peerpb.Peer_AskServer) error {
		for {
			if _, err := stream.Recv(); err != nil {
				return nil
			}
		}
	}
	a := askServer(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := a.term(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered question: %v, want the deadline", err)
	}
	a.mu.Lock()
	s := a.cur
	a.mu.Unlock()
	if s == nil {
		t.Fatal("the stream closed although only the question timed out")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) != 0 {
		t.Errorf("%d questions still pending after their callers gave up", len(s.pending))
	}
}

// TestAskServesAServersQuestions: on a real cluster the Ask stream answers
// a follower's read-index question and the leader's term question, and a
// question that fails (a read index asked of a follower) is answered with
// its error without ending the stream.
func TestAskServesAServersQuestions(t *testing.T) {
	nodes, leader, term := readableCluster(t)
	var follower *Node
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	toLeader, err := follower.peers.asker(leader.cfg.PeerAddr)
	if err != nil {
		t.Fatal(err)
	}
	if idx, err := toLeader.readIndex(ctx, &peerpb.ReadIndexRequest{ServerId: follower.ID(), Term: term}); err != nil || idx < 1 {
		t.Fatalf("read index from the leader: %d, %v", idx, err)
	}
	toFollower, err := leader.peers.asker(follower.cfg.PeerAddr)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := toFollower.term(ctx); err != nil || got != term {
		t.Fatalf("follower's term: %d, %v; want %d", got, err, term)
	}
	toFollower.mu.Lock()
	s := toFollower.cur
	toFollower.mu.Unlock()
	if _, err := toFollower.readIndex(ctx, &peerpb.ReadIndexRequest{ServerId: leader.ID(), Term: term}); err == nil || errors.Is(err, errAskBroken) {
		t.Fatalf("read index asked of a follower: %v, want the follower's refusal", err)
	}
	if got, err := toFollower.term(ctx); err != nil || got != term {
		t.Fatalf("follower's term after a refused question: %d, %v; want %d", got, err, term)
	}
	toFollower.mu.Lock()
	defer toFollower.mu.Unlock()
	if toFollower.cur != s || s == nil {
		t.Error("a refused question ended the stream")
	}
	if n := toFollower.unaryTill; !n.IsZero() {
		t.Error("the asker fell back to unary calls with a peer that has Ask")
	}
}

// TestAskStreamEndingAtOnce: a peer that ends every Ask stream as soon as
// it opens gets an error for each question, never a panic (the stream can
// end before the question's sender has taken it).
func TestAskStreamEndingAtOnce(t *testing.T) {
	f := &fakePeer{stream: func(peerpb.Peer_AskServer) error { return status.Error(codes.Unavailable, "going away") }}
	a := askServer(t, f)
	for range 300 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := a.ask(ctx, &peerpb.AskRequest{}); err == nil {
			t.Fatal("a question on a stream that ended was answered")
		}
		cancel()
	}
}
