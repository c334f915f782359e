package rpc

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// joiner starts a server that joins rather than bootstraps.
func joiner(t *testing.T, id string) *Node {
	t.Helper()
	return newTestNodeWith(t, id, func(c *Config) { c.Join = true })
}

func voters(resp *apipb.MembersResponse) (v, nv []string) {
	for _, m := range resp.Members {
		if m.Voter {
			v = append(v, m.Id)
		} else {
			nv = append(nv, m.Id)
		}
	}
	return v, nv
}

func wantCode(t *testing.T, err error, code codes.Code, substr string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(err.Error(), substr) {
		t.Fatalf("got %v, want %v containing %q", err, code, substr)
	}
}

// TestMembership: a server joins a running cluster as a non-voter, catches
// up, is promoted, serves a session; it is removed again; a non-voter stays
// one; the changes that cannot be made are refused with a clear error and
// change nothing.
func TestMembership(t *testing.T) {
	nodes, leader := threeNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newSession(t, leader)
	for i := range 50 {
		if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/k-", Sequential: true, Data: []byte{byte(i)}}}}); r.Error != apipb.ErrorCode_OK {
			t.Fatal(r)
		}
	}
	follower := nodes[0]
	if follower == leader {
		follower = nodes[1]
	}
	a := admin{follower} // any server takes a change to the leader
	waitFor(t, func() bool { _, id := follower.raft.LeaderWithID(); return string(id) == leader.ID() })

	n4 := joiner(t, "4")
	resp, err := a.AddMember(ctx, &apipb.AddMemberRequest{Id: "4", PeerAddress: n4.cfg.PeerAddr})
	if err != nil {
		t.Fatal(err)
	}
	if v, nv := voters(resp); len(v) != 4 || len(nv) != 0 {
		t.Fatalf("after adding 4: voters %v, non-voters %v", v, nv)
	}
	// It serves the data written before it joined.
	s4 := newSession(t, n4)
	if r := s4.do(&apipb.Request{Op: &apipb.Request_GetChildren{GetChildren: &apipb.GetChildrenRequest{Path: "/"}}}); len(r.GetGetChildren().GetChildren()) != 51 {
		t.Fatalf("the new server's listing: %v", r)
	}

	_, err = a.AddMember(ctx, &apipb.AddMemberRequest{Id: "4", PeerAddress: "127.0.0.1:1"})
	wantCode(t, err, codes.AlreadyExists, "id 4 is already a member")
	_, err = a.AddMember(ctx, &apipb.AddMemberRequest{Id: "9", PeerAddress: n4.cfg.PeerAddr})
	wantCode(t, err, codes.AlreadyExists, "is already member 4's")
	_, err = a.RemoveMember(ctx, &apipb.RemoveMemberRequest{Id: "7"})
	wantCode(t, err, codes.NotFound, "no member with id 7")

	// An observer: added as a non-voter for good.
	n5 := joiner(t, "5")
	resp, err = a.AddMember(ctx, &apipb.AddMemberRequest{Id: "5", PeerAddress: n5.cfg.PeerAddr, NonVoter: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, nv := voters(resp); len(v) != 4 || len(nv) != 1 || nv[0] != "5" {
		t.Fatalf("after adding observer 5: voters %v, non-voters %v", v, nv)
	}
	// It serves sessions and forwards their writes.
	waitFor(t, func() bool { return n5.fsm.AppliedIndex() >= leader.fsm.AppliedIndex() })
	s5 := newSession(t, n5)
	if r := s5.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/via-observer"}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("a write through the observer: %v", r)
	}

	for _, id := range []string{"4", "5"} {
		if _, err := a.RemoveMember(ctx, &apipb.RemoveMemberRequest{Id: id}); err != nil {
			t.Fatalf("remove %s: %v", id, err)
		}
	}
	// The leader's view right away; a follower's once it has the entry.
	resp, err = admin{leader}.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, nv := voters(resp); len(v) != 3 || len(nv) != 0 {
		t.Fatalf("after removing 4 and 5: voters %v, non-voters %v", v, nv)
	}
	waitFor(t, func() bool {
		resp, err := a.Members(ctx)
		return err == nil && len(resp.Members) == 3
	})

	// A change that would leave no reachable majority is refused: with one
	// voter stopped, removing another live one leaves 1 of 2 reachable.
	var stopped, other *Node
	for _, n := range nodes {
		switch {
		case n == leader:
		case stopped == nil:
			stopped = n
		default:
			other = n
		}
	}
	stopped.Close()
	_, err = admin{leader}.RemoveMember(ctx, &apipb.RemoveMemberRequest{Id: other.ID()})
	wantCode(t, err, codes.FailedPrecondition, "not a majority")
	resp, _ = admin{leader}.Members(ctx)
	if v, _ := voters(resp); len(v) != 3 {
		t.Fatalf("a refused removal changed the membership: voters %v", v)
	}
}

// TestRemoveLastVoter: the only voter cannot be removed.
func TestRemoveLastVoter(t *testing.T) {
	n := newTestNode(t, "1")
	waitLeader(t, n)
	waitFor(t, n.LeaderReady)
	_, err := admin{n}.RemoveMember(context.Background(), &apipb.RemoveMemberRequest{Id: "1"})
	wantCode(t, err, codes.FailedPrecondition, "last voter")
}

// TestTransferLeadership: leadership moves to the voter named, asked of any
// server.
func TestTransferLeadership(t *testing.T) {
	nodes, leader := threeNodes(t)
	var target, asked *Node
	for _, n := range nodes {
		if n != leader {
			if target == nil {
				target = n
			} else {
				asked = n
			}
		}
	}
	waitFor(t, func() bool { _, id := asked.raft.LeaderWithID(); return string(id) == leader.ID() })
	resp, err := admin{asked}.TransferLeadership(context.Background(), &apipb.TransferLeadershipRequest{Id: target.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Leader != target.ID() {
		t.Fatalf("leader %s after the transfer, want %s", resp.Leader, target.ID())
	}
	waitFor(t, target.IsLeader)
}

// TestZKReconfig: ZooKeeper's incremental reconfig adds and removes a
// server; getConfig shows the membership, and its watch fires on change.
func TestZKReconfig(t *testing.T) {
	_, leader := threeNodes(t, func(c *Config) { c.SuperDigest = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=" }) // super:secret
	z := zkSession(t, leader)
	// Only the super user may reconfigure, as in ZooKeeper.
	leaving := "3"
	if h, _ := z.call(jute.OpReconfig, &jute.ReconfigRequest{LeavingServers: &leaving, CurConfigID: -1}); h.Err != jute.CodeNoAuth {
		t.Fatalf("reconfig without the super user: %v, want NoAuth", h.Err)
	}
	z.write(jute.AppendFrame(nil, &jute.RequestHeader{Xid: jute.XidAuth, Type: jute.OpAuth}, &jute.AuthPacket{Scheme: "digest", Auth: []byte("super:secret")}))
	var ah jute.ReplyHeader
	if err := ah.Decode(jute.NewReader(z.frame())); err != nil || ah.Err != jute.CodeOK {
		t.Fatalf("addauth super: %v %v", ah.Err, err)
	}
	h, r := z.call(jute.OpGetData, &jute.GetDataRequest{Path: "/zookeeper/config", Watch: true})
	var before jute.GetDataResponse
	if h.Err != jute.CodeOK || before.Decode(r) != nil {
		t.Fatalf("getConfig: %v", h.Err)
	}
	if got := strings.Count(string(before.Data), "server."); got != 3 || !strings.Contains(string(before.Data), ":participant;") {
		t.Fatalf("config of 3 servers:\n%s", before.Data)
	}
	n4 := joiner(t, "4")
	joining := "server.4=" + n4.cfg.PeerAddr + ":2999:participant;" + n4.ClientAddr()
	h, r = z.call(jute.OpReconfig, &jute.ReconfigRequest{JoiningServers: &joining, CurConfigID: -1})
	var after jute.GetDataResponse
	if h.Err != jute.CodeOK || after.Decode(r) != nil {
		t.Fatalf("reconfig adding 4: %v", h.Err)
	}
	if !strings.Contains(string(after.Data), "server.4="+n4.cfg.PeerAddr) || strings.Count(string(after.Data), "server.") != 4 {
		t.Fatalf("config after adding 4:\n%s", after.Data)
	}
	if len(z.events) != 1 || z.events[0].Type != jute.EventNodeDataChanged || z.events[0].Path != "/zookeeper/config" {
		t.Fatalf("getConfig's watch: %+v", z.events)
	}
	stale := before.Stat.Mzxid
	if stale == 0 || after.Stat.Mzxid <= stale {
		t.Fatalf("config versions %d then %d: the version must grow", stale, after.Stat.Mzxid)
	}
	leaving = "4"
	if h, _ := z.call(jute.OpReconfig, &jute.ReconfigRequest{LeavingServers: &leaving, CurConfigID: stale}); h.Err != jute.CodeBadVersion {
		t.Fatalf("reconfig from a stale version: %v, want BadVersion", h.Err)
	}
	if h, _ := z.call(jute.OpReconfig, &jute.ReconfigRequest{LeavingServers: &leaving, CurConfigID: after.Stat.Mzxid}); h.Err != jute.CodeOK {
		t.Fatalf("reconfig removing 4: %v", h.Err)
	}
	members := "server.1=127.0.0.1:1:1"
	if h, _ := z.call(jute.OpReconfig, &jute.ReconfigRequest{NewMembers: &members, CurConfigID: -1}); h.Err != jute.CodeBadArguments {
		t.Fatalf("a non-incremental reconfig: %v, want BadArguments", h.Err)
	}
}
