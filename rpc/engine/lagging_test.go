package engine

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
)

// laggingCluster is a replica that applies the leader's log (a
// logCluster's) only when asked for a read index, as a follower that has
// not caught up yet would.
type laggingCluster struct {
	logCluster
	src *logCluster
}

func (c *laggingCluster) ReadIndex(<-chan struct{}) (int64, error) {
	c.src.mu.Lock()
	logs := c.src.logs
	c.src.mu.Unlock()
	for _, l := range logs {
		if int64(l.Index) > c.f.AppliedIndex() {
			c.f.Apply(l)
		}
	}
	return c.f.AppliedIndex(), nil
}

// TestResumeOnReplicaBehind: a client that moves to a server which has not
// applied its session's opening yet, and reports no last zxid (a ZooKeeper
// client learns none from the handshake), resumes its session: the server
// asks the leader's read index before it calls the session expired. Only a
// session unknown at that index is expired.
func TestResumeOnReplicaBehind(t *testing.T) {
	leader, src := testEngine(t)
	opened := connectTest(t, leader, ConnectRequest{})

	f := fsm.New(fsm.Options{})
	lag := &laggingCluster{src: src}
	lag.f = f
	// The same server id: the session's owner, so resuming it needs no
	// entry of its own and the replica stays behind until asked.
	replica := New(Config{ServerID: "1", FSM: f, Cluster: lag, Tick: 100 * time.Millisecond,
		MinSessionTimeout: 200 * time.Millisecond, MaxSessionTimeout: 10 * time.Second})
	f.SetObserver(replica)
	if f.AppliedIndex() != 0 {
		t.Fatal("the replica is not behind")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := replica.Connect(ctx, ConnectRequest{SessionID: opened.connected.SessionID, Password: opened.connected.Password, TimeoutMs: 4000})
	if err != nil {
		t.Fatalf("resume on a replica behind: %v", err)
	}
	s.Detach()
	_, err = replica.Connect(ctx, ConnectRequest{SessionID: opened.connected.SessionID + 100, Password: opened.connected.Password, TimeoutMs: 4000})
	if ce, ok := err.(*ConnectError); !ok || ce.Code != SessionExpired {
		t.Fatalf("an unknown session: %v, want SessionExpired", err)
	}
}
