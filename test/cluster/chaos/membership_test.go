package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/rpc/apipb"
)

// The membership fault: a follower is removed from the cluster, killed,
// its data dir replaced by an empty one (its disk is gone), and restarted
// with --join and its usual flags; it serves nothing while it is out. At
// the heal it is added back (coordctl member add: a non-voter that catches
// up, then a voter). The workloads run throughout, and their histories go
// through the same checkers as under every other fault.
const fMember faultKind = "member-replace"

func init() { allKinds = append(allKinds, fMember) }

// admin returns the public API of node i.
func (c *procCluster) admin(i int) (apipb.CoordClient, error) {
	cc, err := c.conn(c.nodes[i].clientAddr)
	if err != nil {
		return nil, err
	}
	return apipb.NewCoordClient(cc), nil
}

// memberReplace injects the membership fault and returns how to heal it.
func (nm *nemesis) memberReplace(s step) (func(), string) {
	c := nm.e.c
	leader := c.leader()
	if leader < 0 {
		return func() {}, "no leader: no membership change"
	}
	victim := (leader + 1 + s.N%(len(c.nodes)-1)) % len(c.nodes)
	n := c.nodes[victim]
	api, err := c.admin(leader)
	if err != nil {
		return func() {}, fmt.Sprintf("no connection to the leader: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	_, err = api.RemoveMember(ctx, &apipb.RemoveMemberRequest{Id: n.id})
	cancel()
	if err != nil {
		return func() {}, fmt.Sprintf("member remove %s refused: %v (nothing changed)", n.id, err)
	}
	pid := c.pid(victim)
	c.kill(victim)
	n.mu.Lock()
	n.generation++
	n.dataDir = filepath.Join(c.dir, fmt.Sprintf("data%s-%d", n.id, n.generation))
	n.join = true
	n.mu.Unlock()
	if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
		nm.e.logf("nemesis: fresh data dir for node %s: %v", n.id, err)
	}
	if err := c.start(victim); err != nil {
		nm.e.logf("nemesis: restart of node %s with --join failed: %v", n.id, err)
	}
	heal := func() {
		deadline := time.Now().Add(40 * time.Second)
		for {
			l := c.leader()
			var err error
			if l < 0 {
				err = fmt.Errorf("no leader")
			} else if api, err = c.admin(l); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 35*time.Second)
				_, err = api.AddMember(ctx, &apipb.AddMemberRequest{Id: n.id, PeerAddress: n.peerAddr, CatchUpMs: 30000})
				cancel()
			}
			if err == nil {
				nm.e.logf("nemesis #%02d: node %s added back and promoted", s.N, n.id)
				return
			}
			if status.Code(err) == codes.AlreadyExists || time.Now().After(deadline) {
				nm.e.logf("nemesis #%02d: member add %s: %v", s.N, n.id, err)
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return heal, fmt.Sprintf("member remove node %s (pid %d), wipe its data, restart it with --join", n.id, pid)
}
