package zk

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/engine"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// unhex decodes hex with spaces, newlines and // comments.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// localCluster is a one-server "cluster" without Raft: it applies every
// command to the FSM in submission order, on its own goroutine (Submit
// must not block, and the engine calls it with its locks held).
type localCluster struct {
	f    *fsm.FSM
	cmds chan *cmdpb.Command
	done chan struct{}
}

func newLocalCluster(f *fsm.FSM) *localCluster {
	c := &localCluster{f: f, cmds: make(chan *cmdpb.Command, 1024), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		var idx uint64
		for cmd := range c.cmds {
			cmd.TimeMs = time.Now().UnixMilli()
			data, err := proto.Marshal(cmd)
			if err != nil {
				panic(err)
			}
			idx++
			c.f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data})
		}
	}()
	return c
}

func (c *localCluster) Submit(cmd *cmdpb.Command) { c.cmds <- cmd }
func (c *localCluster) ReadIndex(<-chan struct{}) (int64, error) {
	return c.f.AppliedIndex(), nil
}
func (c *localCluster) PassTouches(context.Context, []int64) (bool, error) { return true, nil }
func (c *localCluster) Serving() (bool, string)                            { return true, "" }
func (c *localCluster) Reconfig(context.Context, engine.Reconfig) (int64, error) {
	return 0, errors.New("no reconfig here")
}

// testServer is a front-end on an engine on a local cluster, listening on
// 127.0.0.1.
type testServer struct {
	srv  *Server
	addr string
}

func newTestServer(t *testing.T, stats func() Stats) *testServer {
	t.Helper()
	return newTestServerWith(t, stats, nil)
}

// newTestServerWith is newTestServer with the front-end's configuration
// changed by configure first.
func newTestServerWith(t *testing.T, stats func() Stats, configure func(*Config)) *testServer {
	t.Helper()
	f := fsm.New(fsm.Options{})
	lc := newLocalCluster(f)
	e := engine.New(engine.Config{
		ServerID: "1", FSM: f, Cluster: lc, Tick: 200 * time.Millisecond,
		MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: 4 * time.Second,
	})
	f.SetObserver(e)
	words := map[string]bool{}
	for _, w := range DefaultFourLetterWords {
		words[w] = true
	}
	cfg := Config{Engine: e, FourLetterWords: words, Stats: stats}
	if configure != nil {
		configure(&cfg)
	}
	srv := New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); srv.ServeConn(nc) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		srv.Close()
		wg.Wait()
		close(lc.cmds)
		<-lc.done
	})
	return &testServer{srv: srv, addr: ln.Addr().String()}
}

// ask sends a four-letter word and returns the whole answer.
func (s *testServer) ask(t *testing.T, word string) string {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(word)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rawClient speaks the protocol with the codec, frame by frame.
type rawClient struct {
	t   *testing.T
	c   net.Conn
	xid int32
	cr  jute.ConnectResponse
}

func (s *testServer) connect(t *testing.T, req jute.ConnectRequest) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	z := &rawClient{t: t, c: c}
	if _, err := c.Write(jute.AppendFrame(nil, &req)); err != nil {
		t.Fatal(err)
	}
	if err := jute.Unmarshal(z.frame(), &z.cr); err != nil {
		t.Fatal(err)
	}
	if z.cr.SessionID == 0 {
		t.Fatal("no session")
	}
	return z
}

func (z *rawClient) frame() []byte {
	z.t.Helper()
	_ = z.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := jute.ReadFrame(z.c, 1<<20)
	if err != nil {
		z.t.Fatal(err)
	}
	return f
}

// call sends a request and returns the reply's whole frame (without its
// length); notifications are not expected.
func (z *rawClient) call(op jute.OpCode, rec jute.Encoder) []byte {
	z.t.Helper()
	z.xid++
	if _, err := z.c.Write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: z.xid, Type: op}, rec)); err != nil {
		z.t.Fatal(err)
	}
	return z.frame()
}
