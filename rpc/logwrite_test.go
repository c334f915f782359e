package rpc

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/rpc/apipb"
)

// testStore wraps a server's Raft log store so that a test can hold its next
// write (hold) or make it fail (failNext).
type testStore struct {
	raft.LogStore
	mu      sync.Mutex
	held    chan struct{} // closed to let held writes through
	fail    bool
	entered chan uint64 // the last index of each held or failed write
}

func newTestStore(s raft.LogStore) *testStore {
	return &testStore{LogStore: s, entered: make(chan uint64, 16)}
}

func (s *testStore) StoreLogs(logs []*raft.Log) error {
	s.mu.Lock()
	held, fail := s.held, s.fail
	s.fail = false
	s.mu.Unlock()
	if held != nil || fail {
		select {
		case s.entered <- logs[len(logs)-1].Index:
		default:
		}
	}
	if fail {
		return errors.New("test: disk failure")
	}
	if held != nil {
		<-held
	}
	return s.LogStore.StoreLogs(logs)
}

func (s *testStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *testStore) hold() {
	s.mu.Lock()
	s.held = make(chan struct{})
	s.mu.Unlock()
}

func (s *testStore) release() {
	s.mu.Lock()
	if s.held != nil {
		close(s.held)
		s.held = nil
	}
	s.mu.Unlock()
}

func (s *testStore) failNext() {
	s.mu.Lock()
	s.fail = true
	s.mu.Unlock()
}

// threeNodesWithStores is threeNodes with every server's log store wrapped
// in a testStore, returned by server ID.
func threeNodesWithStores(t *testing.T) ([]*Node, *Node, map[string]*testStore) {
	stores := map[string]*testStore{}
	var mu sync.Mutex
	nodes, leader := threeNodes(t, func(c *Config) {
		id := c.ID
		c.wrapLogStore = func(s raft.LogStore) raft.LogStore {
			ts := newTestStore(s)
			mu.Lock()
			stores[id] = ts
			mu.Unlock()
			return ts
		}
	})
	// Registered after the nodes' Close, so run before it: a held write
	// would keep Raft from shutting down.
	for _, ts := range stores {
		t.Cleanup(ts.release)
	}
	return nodes, leader, stores
}

// sendCreate sends a create without waiting for its reply, which arrives on
// the returned channel (nil on a broken stream).
func sendCreate(t *testing.T, s *rawSession, path string) <-chan *apipb.Response {
	t.Helper()
	s.xid++
	req := &apipb.Request{Xid: s.xid, Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: path}}}
	if err := s.stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: req}}); err != nil {
		t.Fatal(err)
	}
	out := make(chan *apipb.Response, 1)
	go func() {
		for {
			m, err := s.stream.Recv()
			if err != nil {
				out <- nil
				return
			}
			if r := m.GetResponse(); r != nil && r.Xid == req.Xid {
				out <- r
				return
			}
		}
	}()
	return out
}

// TestLeaderReplicatesWhileItWrites: the leader sends new entries to the
// followers while its own log write is under way (rpc/third_party/raft), not
// after it; and the write is answered only after the leader's own log write
// has returned.
func TestLeaderReplicatesWhileItWrites(t *testing.T) {
	nodes, leader, stores := threeNodesWithStores(t)
	s, first := dialRaw(t, leader.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 60000})
	if first.GetConnected() == nil {
		t.Fatalf("connect: %v", first)
	}
	ls := stores[leader.cfg.ID]
	ls.hold()
	reply := sendCreate(t, s, "/x")
	var idx uint64
	select {
	case idx = <-ls.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not write the create within 10s")
	}
	// The leader's write is held; both followers get the entry anyway.
	waitFor(t, func() bool {
		for _, n := range nodes {
			if n != leader && n.raft.LastIndex() < idx {
				return false
			}
		}
		return true
	})
	select {
	case r := <-reply:
		t.Fatalf("the create was answered (%v) before the leader's log write returned", r)
	default:
	}
	ls.release()
	select {
	case r := <-reply:
		if r == nil || r.Error != apipb.ErrorCode_OK {
			t.Fatalf("create: %v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the create was not answered within 10s of the leader's write")
	}
}

// TestLeaderLogWriteFails: when the leader's own log write fails after it
// sent the entries on, it steps down and forgets them; the cluster elects a
// leader, stays writable, and every server ends with the same tree, with or
// without the create, and with it if it was acknowledged.
func TestLeaderLogWriteFails(t *testing.T) {
	nodes, leader, stores := threeNodesWithStores(t)
	s, first := dialRaw(t, leader.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 60000})
	if first.GetConnected() == nil {
		t.Fatalf("connect: %v", first)
	}
	stores[leader.cfg.ID].failNext()
	reply := sendCreate(t, s, "/x")
	select {
	case <-stores[leader.cfg.ID].entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not write the create within 10s")
	}
	acked := false
	select {
	case r := <-reply:
		// The server retries a write whose leader lost office, and the
		// session's reply cache keeps the retry from applying it twice, so
		// OK is a likely answer.
		acked = r != nil && r.Error == apipb.ErrorCode_OK
	case <-time.After(20 * time.Second):
		t.Fatal("the create was not answered, nor the session ended, within 20s")
	}

	// Writable again, on whichever server leads now.
	var r *apipb.Response
	waitFor(t, func() bool {
		l := waitLeader(t, nodes...)
		s2, first := dialRaw(t, l.ClientAddr(), &apipb.ConnectRequest{TimeoutMs: 60000})
		if first.GetConnected() == nil {
			return false
		}
		r = <-sendCreate(t, s2, "/after")
		return r != nil && r.Error == apipb.ErrorCode_OK
	})
	waitFor(t, func() bool {
		for _, n := range nodes {
			if n.fsm.AppliedIndex() < r.Zxid {
				return false
			}
		}
		return true
	})
	var has []bool
	for _, n := range nodes {
		n.fsm.Read(func(v fsm.View) {
			_, errX := v.Tree.Exists("/x")
			_, errAfter := v.Tree.Exists("/after")
			if errAfter != nil {
				t.Errorf("server %s: /after: %v", n.cfg.ID, errAfter)
			}
			has = append(has, errX == nil)
		})
	}
	if has[0] != has[1] || has[1] != has[2] {
		t.Fatalf("servers disagree on /x: %v", has)
	}
	if acked && !has[0] {
		t.Fatal("the create of /x was acknowledged but is on no server")
	}
}
