package cluster

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/rpc/apipb"
)

// AddJoiner configures a new member id on fresh addresses and a fresh data
// dir, with the timing of the others, that joins a running cluster
// (rpc.Config.Join), starts it and returns its index. It serves nothing
// until a membership change adds it (Admin's AddMember).
func (c *Cluster) AddJoiner(id string) int {
	c.t.Helper()
	if len(c.Members) == 0 {
		c.t.Fatal("AddJoiner needs a cluster to copy the timing from")
	}
	cfg := c.Members[0].Cfg
	cfg.ID, cfg.DataDir, cfg.ClientAddr, cfg.PeerAddr = id, c.t.TempDir(), FreeAddr(c.t), FreeAddr(c.t)
	cfg.Peers, cfg.Join = nil, true
	cfg.Logger = cfg.Logger.With("server", id)
	cfg.DialPeer = c.Net.Dialer(id)
	c.Net.Register(id, cfg.PeerAddr)
	c.Members = append(c.Members, &Member{ID: id, Cfg: cfg})
	i := len(c.Members) - 1
	c.Start(i)
	return i
}

// Index returns the index of member id, or -1.
func (c *Cluster) Index(id string) int {
	for i, m := range c.Members {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// Admin calls the public API's cluster calls (status, membership) on
// member i over its client port. The connection closes when the test ends.
func (c *Cluster) Admin(i int) apipb.CoordClient {
	c.t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+c.Members[i].Cfg.ClientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cc.Close() })
	return apipb.NewCoordClient(cc)
}

// AddMember adds member i to the configuration (a voter unless nonVoter),
// asking the leader, and waits until it is in.
func (c *Cluster) AddMember(i int, nonVoter bool) *apipb.MembersResponse {
	c.t.Helper()
	m := c.Members[i]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.Admin(c.WaitLeader(15*time.Second)).AddMember(ctx, &apipb.AddMemberRequest{Id: m.ID, PeerAddress: m.Cfg.PeerAddr, NonVoter: nonVoter})
	if err != nil {
		c.t.Fatalf("adding server %s: %v", m.ID, err)
	}
	return resp
}

// RemoveMember removes member id from the configuration, asking the
// leader.
func (c *Cluster) RemoveMember(id string) *apipb.MembersResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Admin(c.WaitLeader(15*time.Second)).RemoveMember(ctx, &apipb.RemoveMemberRequest{Id: id})
	if err != nil {
		c.t.Fatalf("removing server %s: %v", id, err)
	}
	return resp
}

// Voters returns the ids of the voters and of the non-voters in resp.
func Voters(resp *apipb.MembersResponse) (voters, nonVoters []string) {
	for _, m := range resp.GetMembers() {
		if m.Voter {
			voters = append(voters, m.Id)
		} else {
			nonVoters = append(nonVoters, m.Id)
		}
	}
	return voters, nonVoters
}
