package rpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
func askServer(t testing.TB, f *fakePeer) *asker {
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
	// The stream open first: the question, not the opening, is to meet
	// its deadline (an opening may take longer than that on a busy host).
	open, cancelOpen := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelOpen()
	if _, err := a.stream(open); err != nil {
		t.Fatal(err)
	}
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

// TestAskerFallsBackAtOnceEveryTime: the first question to a peer without
// Ask is answered with the unary call however quickly the peer's refusal
// ends the new stream: before the asker took it up, or while its question
// was being sent. (The stream's end was reported as a broken stream, not
// as the peer lacking Ask, and that question failed.)
func TestAskerFallsBackAtOnceEveryTime(t *testing.T) {
	f := &fakePeer{term: 5}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	peerpb.RegisterPeerServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(func() { cancel(); cc.Close(); srv.Stop() })
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := newAsker(ctx, cc) // a fresh asker knows nothing of the peer yet
			if term, err := a.term(ctx); err != nil || term != 5 {
				errs <- fmt.Errorf("term from a peer without Ask: %d, %v; want 5", term, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkAskRoundTrip is one Term question and its answer, asked one at a
// time: on the Ask stream as a sync round asks it ("stream"), and as a
// length-prefixed protobuf message each way on a bare TCP connection
// ("tcp"), the least that any channel between two servers pays: a write and
// a read at each end. Both ends run in this process, so cpu-µs/op is the CPU
// of both; rpc/DESIGN.md ("Read index") uses it to weigh what a channel of
// our own would save.
func BenchmarkAskRoundTrip(b *testing.B) {
	b.Run("stream", func(b *testing.B) {
		f := &fakePeer{term: 7}
		f.stream = func(stream peerpb.Peer_AskServer) error {
			for {
				req, err := stream.Recv()
				if err != nil {
					return nil
				}
				if err := stream.Send(termAnswer(req.Id, f.term)); err != nil {
					return err
				}
			}
		}
		a := askServer(b, f)
		ctx := context.Background()
		if _, err := a.term(ctx); err != nil { // opens the stream
			b.Fatal(err)
		}
		measureCPU(b, func() {
			if _, err := a.term(ctx); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("tcp", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			br, buf := bufio.NewReader(c), []byte(nil)
			for {
				var req peerpb.AskRequest
				if err := readMessage(br, &req); err != nil {
					return
				}
				if buf, err = writeMessage(c, buf, termAnswer(req.Id, 7)); err != nil {
					return
				}
			}
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		br, buf := bufio.NewReader(c), []byte(nil)
		var id uint64
		measureCPU(b, func() {
			id++
			q := &peerpb.AskRequest{Id: id, Kind: &peerpb.AskRequest_Term{Term: &peerpb.TermRequest{}}}
			var resp peerpb.AskResponse
			if buf, err = writeMessage(c, buf, q); err != nil {
				b.Fatal(err)
			}
			if err := readMessage(br, &resp); err != nil || resp.Id != id {
				b.Fatalf("answer %d, %v; want one to question %d", resp.Id, err, id)
			}
		})
	})
}

func termAnswer(id, term uint64) *peerpb.AskResponse {
	return &peerpb.AskResponse{Id: id, Kind: &peerpb.AskResponse_Term{Term: &peerpb.TermResponse{Term: term}}}
}

// writeMessage writes m to w after its length (4 bytes), encoding into buf.
func writeMessage(w io.Writer, buf []byte, m proto.Message) ([]byte, error) {
	buf = binary.BigEndian.AppendUint32(buf[:0], uint32(proto.Size(m)))
	buf, err := proto.MarshalOptions{}.MarshalAppend(buf, m)
	if err != nil {
		return buf, err
	}
	_, err = w.Write(buf)
	return buf, err
}

// readMessage reads a message that writeMessage wrote.
func readMessage(r io.Reader, m proto.Message) error {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	return proto.Unmarshal(body, m)
}

// measureCPU runs op b.N times and reports the process's CPU time (user and
// system) per op beside the wall time.
func measureCPU(b *testing.B, op func()) {
	_, before := processUsage()
	b.ResetTimer()
	for range b.N {
		op()
	}
	b.StopTimer()
	_, after := processUsage()
	b.ReportMetric((after-before)*1e6/float64(b.N), "cpu-µs/op")
}
