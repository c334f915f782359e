package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
)

// heldCluster hands every submitted command to the test, which applies
// commands in the order it chooses.
type heldCluster struct {
	f    *fsm.FSM
	cmds chan *cmdpb.Command
	idx  uint64
}

func (c *heldCluster) Submit(cmd *cmdpb.Command) { c.cmds <- cmd }
func (c *heldCluster) ReadIndex(<-chan struct{}) (int64, error) {
	return c.f.AppliedIndex(), nil
}
func (c *heldCluster) PassTouches(context.Context, []int64) (bool, error) { return true, nil }
func (c *heldCluster) Serving() (bool, string)                            { return true, "" }
func (c *heldCluster) Reconfig(context.Context, Reconfig) (int64, error) {
	return 0, errors.New("no reconfig")
}

func (c *heldCluster) apply(t *testing.T, cmd *cmdpb.Command) {
	t.Helper()
	data, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	c.idx++
	c.f.Apply(&raft.Log{Index: c.idx, Term: 1, Type: raft.LogCommand, Data: data})
}

func (c *heldCluster) next(t *testing.T) *cmdpb.Command {
	t.Helper()
	select {
	case cmd := <-c.cmds:
		return cmd
	case <-time.After(10 * time.Second):
		t.Fatal("nothing submitted")
	}
	return nil
}

// TestMovedSessionAnswersOnlyItsOwnWrites: a session resumed on server B
// whose client re-sends xid 5 there, while server A's copy of xid 5 is
// still on its way to the log: A's copy applies first and is refused with
// SessionMoved, and B's session must not take that refusal as its answer;
// B's own copy applies and answers. The resume itself is logged and
// waited for.
func TestMovedSessionAnswersOnlyItsOwnWrites(t *testing.T) {
	f := fsm.New(fsm.Options{})
	hc := &heldCluster{f: f, cmds: make(chan *cmdpb.Command, 16)}
	e := New(Config{ServerID: "B", FSM: f, Cluster: hc, Tick: 200 * time.Millisecond,
		MinSessionTimeout: 400 * time.Millisecond, MaxSessionTimeout: 4 * time.Second})
	f.SetObserver(e)
	pw := []byte("0123456789abcdef")
	hc.apply(t, &cmdpb.Command{Cmd: &cmdpb.Command_OpenSession{OpenSession: &cmdpb.OpenSession{TimeoutMs: 4000, Password: pw, Server: "A"}}})

	type connected struct {
		s   *Session
		err error
	}
	done := make(chan connected, 1)
	go func() {
		s, err := e.Connect(context.Background(), ConnectRequest{SessionID: 1, Password: pw, TimeoutMs: 4000})
		done <- connected{s, err}
	}()
	resume := hc.next(t)
	if r := resume.GetResumeSession(); r == nil || r.SessionId != 1 || r.Server != "B" {
		t.Fatalf("the resume submitted: %v", resume)
	}
	select {
	case c := <-done:
		t.Fatalf("connected before the resume applied: %v", c.err)
	default:
	}
	hc.apply(t, resume)
	c := <-done
	if c.err != nil {
		t.Fatal(c.err)
	}
	s := c.s
	defer s.Detach()

	s.Submit(&Request{Xid: 5, LowestPendingXid: 5, Op: OpCreate, Path: "/x"})
	mine := hc.next(t)
	if w := mine.GetWrite(); w == nil || w.Server != "B" || w.Xid != 5 {
		t.Fatalf("the write submitted: %v", mine)
	}
	theirs := proto.Clone(mine).(*cmdpb.Command)
	theirs.GetWrite().Server = "A"
	hc.apply(t, theirs)
	hc.apply(t, mine)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		batch, ended := s.Next(ctx)
		for _, m := range batch {
			if r := m.Response; r != nil {
				if r.Xid != 5 || r.Code != OK || r.Path != "/x" || r.Zxid != 4 {
					t.Fatalf("the answer to xid 5: %+v, want B's own create at zxid 4", r)
				}
				return
			}
		}
		if ended {
			t.Fatal("the session ended without an answer")
		}
	}
}
