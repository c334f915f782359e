package rpc

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/rpc/zk/jute"
)

// TestZKDeliberateDifferences pins two answers that docs/zookeeper-clients.md
// lists among the deliberate differences from ZooKeeper 3.8, so that
// changing either is a decision, made with that page.
//
// An invalid path is BadArguments for every op, alone or in a multi, where
// ZooKeeper answers NoNode or BadArguments by the order of its checks (a
// delete of /p/. or /p/..: NoNode; a create of /p//x: NoNode; of /p/.:
// BadArguments). In a multi the results have ZooKeeper's shape: the ops
// before it ok and rolled back, its error, RuntimeInconsistency after it,
// nothing applied. go-zookeeper checks the paths of its single ops itself,
// not those of a multi's, so single ops go on the wire through the codec.
//
// A write over the limit is BadArguments and the session goes on, on the
// same connection, where ZooKeeper drops the connection (ConnectionLoss).
func TestZKDeliberateDifferences(t *testing.T) {
	n := newTestNodeWith(t, "1", func(c *Config) { c.MaxDataSize = 64 << 10 })
	waitLeader(t, n)
	conn, events, err := zk.Connect([]string{n.ClientAddr()}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitState(t, events, zk.StateHasSession)
	acl := zk.WorldACL(zk.PermAll)
	if _, err := conn.Create("/p", nil, 0, acl); err != nil {
		t.Fatal(err)
	}

	t.Run("invalid path in a multi", func(t *testing.T) {
		for _, op := range []any{
			&zk.DeleteRequest{Path: "/p/.", Version: -1},
			&zk.DeleteRequest{Path: "/p/..", Version: -1},
			&zk.CreateRequest{Path: "/p//x", Acl: acl},
			&zk.SetDataRequest{Path: "/p/", Version: -1},
			&zk.CheckVersionRequest{Path: "p", Version: -1},
		} {
			res, err := conn.Multi(&zk.CreateRequest{Path: "/before", Acl: acl}, op, &zk.CreateRequest{Path: "/after", Acl: acl})
			// go-zookeeper returns the first op's error, and has no
			// sentinel for RuntimeInconsistency (TestWireReplies in rpc/zk
			// pins its bytes).
			if !errors.Is(err, zk.ErrBadArguments) || len(res) != 3 || res[0].Error != nil ||
				!errors.Is(res[1].Error, zk.ErrBadArguments) || res[2].Error == nil || errors.Is(res[2].Error, zk.ErrBadArguments) {
				t.Errorf("multi with %+v: %v, results %+v; want ok (rolled back), BadArguments, RuntimeInconsistency", op, err, res)
			}
			if ok, _, err := conn.Exists("/before"); ok || err != nil {
				t.Errorf("multi with %+v: an op before the invalid one applied (%v)", op, err)
			}
		}
	})

	t.Run("invalid path alone", func(t *testing.T) {
		z := zkSession(t, n)
		for _, c := range []struct {
			op  jute.OpCode
			rec jute.Encoder
		}{
			{jute.OpDelete, &jute.DeleteRequest{Path: "/p/.", Version: -1}},
			{jute.OpDelete, &jute.DeleteRequest{Path: "/p/..", Version: -1}},
			{jute.OpCreate, &jute.CreateRequest{Path: "/p//x", ACL: jute.OpenACL()}},
			{jute.OpCreate, &jute.CreateRequest{Path: "/p/.", ACL: jute.OpenACL()}},
			{jute.OpExists, &jute.ExistsRequest{Path: "/p/."}},
			{jute.OpGetData, &jute.GetDataRequest{Path: ""}},
		} {
			if h, _ := z.call(c.op, c.rec); h.Err != jute.CodeBadArguments {
				t.Errorf("%v %+v: %v, want BadArguments", c.op, c.rec, h.Err)
			}
		}
	})

	t.Run("over the limit", func(t *testing.T) {
		id := conn.SessionID()
		if _, err := conn.Create("/big", make([]byte, 64<<10+1), 0, acl); !errors.Is(err, zk.ErrBadArguments) {
			t.Fatalf("create over --max-data-size: %v, want BadArguments", err)
		}
		if _, err := conn.Create("/small", []byte("x"), 0, acl); err != nil {
			t.Fatalf("the next request: %v", err)
		}
		if conn.SessionID() != id || conn.State() != zk.StateHasSession {
			t.Fatalf("session %#x state %v, want %#x still connected", conn.SessionID(), conn.State(), id)
		}
		for {
			select {
			case ev := <-events:
				if ev.State != zk.StateHasSession {
					t.Fatalf("the connection changed state: %+v", ev)
				}
				continue
			default:
			}
			break
		}
	})
}

// waitState waits for a go-zookeeper connection to reach state.
func waitState(t *testing.T, events <-chan zk.Event, state zk.State) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == state {
				return
			}
		case <-deadline:
			t.Fatalf("no %v", state)
		}
	}
}
