package cluster

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/apipb"
)

// memberLoad is a write load with sessions that must outlive membership
// changes: each writer has its own session (with an ephemeral node) on the
// servers it is given, and creates sequential nodes until stopped, at most
// maxWrites each.
type memberLoad struct {
	t       *testing.T
	clients []*client.Client
	stop    chan struct{}
	writers sync.WaitGroup

	mu      sync.Mutex
	acked   []string // every create that was acknowledged
	failed  int      // creates that failed (their outcome is unknown)
	expired []string // sessions that expired
}

const maxWrites = 5000

func startMemberLoad(t *testing.T, servers []string, writers int) *memberLoad {
	t.Helper()
	l := &memberLoad{t: t, stop: make(chan struct{})}
	ctx := ctxT(t)
	setup := connect(t, servers...)
	for _, p := range []string{"/load", "/eph"} {
		if _, err := setup.Create(ctx, p, nil, client.CreateMode{}); err != nil && !errors.Is(err, client.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	for w := range writers {
		cl := connect(t, servers...)
		l.clients = append(l.clients, cl)
		if _, err := cl.Create(ctx, fmt.Sprintf("/eph/w%d", w), nil, client.CreateMode{Kind: client.Ephemeral}); err != nil {
			t.Fatal(err)
		}
		_, states, stopStates := cl.NotifyStates()
		t.Cleanup(stopStates)
		go func() {
			for ev := range states {
				if ev.State == client.StateExpired {
					l.mu.Lock()
					l.expired = append(l.expired, fmt.Sprintf("writer %d: %v", w, ev.Err))
					l.mu.Unlock()
				}
			}
		}()
		l.writers.Add(1)
		go func() {
			defer l.writers.Done()
			for i := 0; i < maxWrites; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				p, err := cl.Create(wctx, fmt.Sprintf("/load/w%d-", w), nil, client.CreateMode{Sequential: true})
				cancel()
				l.mu.Lock()
				if err == nil {
					l.acked = append(l.acked, p)
				} else {
					l.failed++
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// writes returns how many creates were acknowledged so far.
func (l *memberLoad) writes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// waitWrites waits until n more creates are acknowledged (the load goes on
// while the cluster changes).
func (l *memberLoad) waitWrites(c *Cluster, n int) {
	l.t.Helper()
	want := l.writes() + n
	c.Eventually(20*time.Second, fmt.Sprintf("%d acknowledged writes", want), func() bool { return l.writes() >= want })
}

// finish stops the load and checks: no session expired, every writer's
// ephemeral is still there, and every acknowledged create is on every
// given server.
func (l *memberLoad) finish(c *Cluster, servers []string) {
	t := l.t
	t.Helper()
	close(l.stop)
	l.writers.Wait()
	ctx := ctxT(t)
	for _, addr := range servers {
		r := connect(t, addr)
		if err := r.Sync(ctx, "/"); err != nil {
			t.Fatalf("sync on %s: %v", addr, err)
		}
		kids, _, err := r.Children(ctx, "/load")
		if err != nil {
			t.Fatalf("listing /load on %s: %v", addr, err)
		}
		have := map[string]bool{}
		for _, k := range kids {
			have["/load/"+k] = true
		}
		l.mu.Lock()
		var missing []string
		for _, p := range l.acked {
			if !have[p] {
				missing = append(missing, p)
			}
		}
		acked, failed := len(l.acked), l.failed
		l.mu.Unlock()
		if len(missing) > 0 {
			t.Fatalf("server %s lacks %d of %d acknowledged writes, e.g. %v", addr, len(missing), acked, missing[:min(5, len(missing))])
		}
		eph, _, err := r.Children(ctx, "/eph")
		if err != nil || len(eph) != len(l.clients) {
			t.Fatalf("server %s: ephemerals %v (%v), want one per writer (%d)", addr, eph, err, len(l.clients))
		}
		t.Logf("server %s: all %d acknowledged writes there (%d failed, outcome unknown)", addr, acked, failed)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.expired) > 0 {
		t.Fatalf("sessions expired: %v", l.expired)
	}
}

// clientAddrs returns the client addresses of members idx.
func (c *Cluster) clientAddrs(idx ...int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, c.Members[i].Cfg.ClientAddr)
	}
	return out
}

// wantVoters checks the membership the leader reports.
func wantVoters(t *testing.T, c *Cluster, voters, nonVoters string) {
	t.Helper()
	ctx := ctxT(t)
	resp, err := c.Admin(c.WaitLeader(15*time.Second)).Members(ctx, &apipb.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	v, nv := Voters(resp)
	if strings.Join(v, ",") != voters || strings.Join(nv, ",") != nonVoters {
		t.Fatalf("voters %v, non-voters %v; want %s and %s", v, nv, voters, nonVoters)
	}
}

// TestReplaceDeadServer is the procedure of docs/operations.md ("Replacing
// a dead server"): a server of three dies for good; it is removed, and a new
// server at a new address joins, catches up and becomes a voter, all under
// a write load whose sessions live through it. No acknowledged write is
// lost and no session expires; the new server has everything.
func TestReplaceDeadServer(t *testing.T) {
	// Snapshots every 64 entries: the new server is far behind, and catches
	// up from a snapshot.
	c := New(t, 3, Options{Tick: 500 * time.Millisecond, SnapshotThreshold: 64, TrailingLogs: 32})
	load := startMemberLoad(t, c.Servers(), 4)
	load.waitWrites(c, 100)

	dead := c.Follower()
	deadID := c.Members[dead].ID
	c.Stop(dead) // for good: its machine is gone
	load.waitWrites(c, 100)

	// 1. Remove the dead server, so that the cluster no longer counts it.
	c.RemoveMember(deadID)
	// 2. Start the new server with --join, then add it: it catches up as a
	// non-voter and is promoted.
	n := c.AddJoiner("4")
	resp := c.AddMember(n, false)
	if v, nv := Voters(resp); len(v) != 3 || len(nv) != 0 {
		t.Fatalf("after the replacement: voters %v, non-voters %v", v, nv)
	}
	load.waitWrites(c, 100)
	var live []int
	for i := range c.Members {
		if i != dead {
			live = append(live, i)
		}
	}
	load.finish(c, c.clientAddrs(live...))
	want := []string{"1", "2", "3"}
	want = append(want[:dead], want[dead+1:]...)
	wantVoters(t, c, strings.Join(append(want, "4"), ","), "")

	// The cluster stands the loss of any one server again: stop the old
	// leader, and the rest elect one and take writes.
	old := c.WaitLeader(15 * time.Second)
	c.Stop(old)
	cl := connect(t, c.clientAddrs(live...)...)
	if _, err := cl.Create(ctxT(t), "/after-loss", nil, client.CreateMode{}); err != nil {
		t.Fatalf("a write after losing another server: %v", err)
	}
}

// TestGrowAndShrinkUnderLoad: 3 -> 5 -> 3 servers while clients write, the
// shrink removing the leader itself. No acknowledged write is lost, no
// session expires, and every server that remains has every write.
func TestGrowAndShrinkUnderLoad(t *testing.T) {
	c := New(t, 3, Options{Tick: 500 * time.Millisecond})
	load := startMemberLoad(t, c.Servers(), 4)
	load.waitWrites(c, 100)

	for _, id := range []string{"4", "5"} {
		c.AddMember(c.AddJoiner(id), false)
		load.waitWrites(c, 50)
	}
	wantVoters(t, c, "1,2,3,4,5", "")

	// Shrink back to three, removing the leader among others: the removed
	// leader hands over, its clients move, and it is then shut down.
	leader := c.WaitLeader(15 * time.Second)
	var gone []int
	for _, i := range []int{leader, 0, 1, 2} {
		if len(gone) < 2 && !containsInt(gone, i) {
			gone = append(gone, i)
		}
	}
	for _, i := range gone {
		c.RemoveMember(c.Members[i].ID)
		c.Stop(i)
		load.waitWrites(c, 50)
	}
	var stay []int
	var ids []string
	for i := range c.Members {
		if !containsInt(gone, i) {
			stay = append(stay, i)
			ids = append(ids, c.Members[i].ID)
		}
	}
	sort.Strings(ids)
	wantVoters(t, c, strings.Join(ids, ","), "")
	load.finish(c, c.clientAddrs(stay...))
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestObserver: a non-voter (ZooKeeper's observer, etcd's learner) serves
// sessions, reads and watches and forwards writes, and does not count
// towards the quorum.
func TestObserver(t *testing.T) {
	c := New(t, 3, Options{})
	o := c.AddJoiner("4")
	obsAddr := c.Members[o].Cfg.ClientAddr
	c.AddMember(o, true)
	wantVoters(t, c, "1,2,3", "4")

	ctx := ctxT(t)
	writer := connect(t, c.clientAddrs(0, 1, 2)...)
	if _, err := writer.Create(ctx, "/cfg", []byte("v1"), client.CreateMode{}); err != nil {
		t.Fatal(err)
	}
	obs := connect(t, obsAddr) // a session on the observer alone
	if obs.Server() != obsAddr {
		t.Fatalf("session on %s, want the observer %s", obs.Server(), obsAddr)
	}
	data, _, ch, err := func() ([]byte, client.Stat, <-chan client.Event, error) {
		if err := obs.Sync(ctx, "/cfg"); err != nil {
			return nil, client.Stat{}, nil, err
		}
		return obs.GetW(ctx, "/cfg")
	}()
	if err != nil || string(data) != "v1" {
		t.Fatalf("read on the observer: %q, %v", data, err)
	}
	if _, err := writer.Set(ctx, "/cfg", []byte("v2"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != client.EventNodeDataChanged || ev.Path != "/cfg" {
			t.Fatalf("the observer's watch fired %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("the observer's watch did not fire")
	}
	// A write through the observer is forwarded, and read back there.
	if _, err := obs.Create(ctx, "/from-observer", []byte("x"), client.CreateMode{Kind: client.Ephemeral}); err != nil {
		t.Fatalf("a write through the observer: %v", err)
	}
	if _, ok, err := obs.Exists(ctx, "/from-observer"); err != nil || !ok {
		t.Fatalf("the observer does not read its own write: %v %v", ok, err)
	}
	if err := writer.Sync(ctx, "/from-observer"); err != nil {
		t.Fatal(err)
	}
	if st, ok, err := writer.Exists(ctx, "/from-observer"); err != nil || !ok || st.EphemeralOwner != obs.SessionID() {
		t.Fatalf("the voters do not see the observer's write: %+v %v %v", st, ok, err)
	}

	// It does not count towards the quorum: with two of the three voters
	// gone, the third and the observer (two of four servers) elect no
	// leader.
	leader := c.WaitLeader(15 * time.Second)
	var stopped []int
	for i := 0; i < 3 && len(stopped) < 2; i++ {
		if i != leader {
			c.Stop(i)
			stopped = append(stopped, i)
		}
	}
	c.Eventually(10*time.Second, "the last voter to lose its leadership", func() bool {
		n := c.Members[leader].Node()
		return !n.IsLeader()
	})
	for _, i := range stopped {
		c.Start(i)
	}
	c.WaitLeader(15 * time.Second)
}

// TestStatusAgreesWithZooKeeperConfig: after each membership change, every
// server's status and its /zookeeper/config (read over both protocols)
// list the same servers with the same peer addresses and roles.
func TestStatusAgreesWithZooKeeperConfig(t *testing.T) {
	c := New(t, 3, Options{})
	check := func(step string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for last := ""; ; time.Sleep(50 * time.Millisecond) {
			last = c.disagreement()
			if last == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: status and /zookeeper/config disagree 15s on: %s", step, last)
			}
		}
	}
	check("three servers")
	o := c.AddJoiner("4")
	c.AddMember(o, true)
	check("an observer added")
	ctx := ctxT(t)
	if _, err := c.Admin(0).PromoteMember(ctx, &apipb.PromoteMemberRequest{Id: "4", CatchUpMs: 10000}); err != nil {
		t.Fatal(err)
	}
	check("the observer promoted")
	c.RemoveMember("2")
	c.Stop(c.Index("2"))
	check("server 2 removed")
}

// disagreement says where the running servers' views of the membership
// differ ("" when they all agree): each server's status, its
// /zookeeper/config read over the gRPC API, and the same read over
// ZooKeeper's protocol.
func (c *Cluster) disagreement() string {
	var first string
	for i, m := range c.Members {
		if m.Node() == nil {
			continue
		}
		views, err := c.views(i)
		if err != nil {
			return fmt.Sprintf("server %s: %v", m.ID, err)
		}
		for _, v := range views[1:] {
			if v != views[0] {
				return fmt.Sprintf("server %s: status %q, config %q", m.ID, views[0], v)
			}
		}
		if first == "" {
			first = views[0]
		} else if views[0] != first {
			return fmt.Sprintf("servers see %q and %q", first, views[0])
		}
	}
	return ""
}

// views renders member i's view of the membership as "id=peer:role" lines
// in id order, as its status says it and as /zookeeper/config does, read
// with the Go client and with a ZooKeeper client.
func (c *Cluster) views(i int) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr := c.Members[i].Cfg.ClientAddr
	st, err := c.Admin(i).Status(ctx, &apipb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, m := range st.Members {
		role := "participant"
		if !m.Voter {
			role = "observer"
		}
		lines = append(lines, fmt.Sprintf("%s=%s:%s", m.Id, m.PeerAddress, role))
	}
	out := []string{strings.Join(lines, "\n")}

	cl, err := client.Connect(ctx, []string{addr})
	if err != nil {
		return nil, err
	}
	defer cl.Close(context.Background())
	data, _, err := cl.Get(ctx, "/zookeeper/config")
	if err != nil {
		return nil, err
	}
	zc, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		return nil, err
	}
	defer zc.Close()
	zdata, _, err := zc.Get("/zookeeper/config")
	if err != nil {
		return nil, fmt.Errorf("ZooKeeper getData: %w", err)
	}
	for _, d := range [][]byte{data, zdata} {
		v, err := configServers(d)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// configServers renders ZooKeeper's dynamic configuration
// ("server.ID=HOST:PORT:PORT:ROLE[;CLIENT]" lines) as "id=peer:role" lines
// in id order.
func configServers(data []byte) (string, error) {
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(l, "=")
		id, isServer := strings.CutPrefix(key, "server.")
		if !ok || !isServer {
			continue
		}
		value, _, _ = strings.Cut(value, ";")
		parts := strings.Split(value, ":")
		if len(parts) != 4 {
			return "", fmt.Errorf("bad config line %q", l)
		}
		lines = append(lines, fmt.Sprintf("%s=%s:%s:%s", id, parts[0], parts[1], parts[3]))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

// ackedSoFar returns the creates acknowledged so far.
func (l *memberLoad) ackedSoFar() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acked...)
}

// TestZooKeeperConfigSameEverywhere: /zookeeper/config, read over
// ZooKeeper's protocol from every server from the cluster's start on, is
// the same text wherever its version is the same, and soon lists every
// server with its client address, in lines ZooKeeper's parser accepts
// (QuorumServer: an election port that differs from the quorum port).
func TestZooKeeperConfigSameEverywhere(t *testing.T) {
	c := New(t, 3, Options{})
	var zcs []*zk.Conn
	for _, addr := range c.Servers() {
		zcs = append(zcs, connectZK(t, addr))
	}
	line := regexp.MustCompile(`^server\.(\d+)=([^;]+):(\d+):(\d+):participant;(.+)$`)
	complete := func(text string) bool {
		lines := strings.Split(text, "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[3], "version=") {
			return false
		}
		for i, l := range lines[:3] {
			m := line.FindStringSubmatch(l)
			if m == nil || m[1] != c.Members[i].ID || m[2]+":"+m[3] != c.Members[i].Cfg.PeerAddr || m[3] == m[4] || m[5] != c.Members[i].Cfg.ClientAddr {
				return false
			}
		}
		return true
	}
	byVersion := map[string]string{}
	deadline := time.Now().Add(15 * time.Second)
	for done := false; !done; {
		done = true
		for i, zc := range zcs {
			data, _, err := zc.Get("/zookeeper/config")
			if err != nil {
				t.Fatalf("server %s: %v", c.Members[i].ID, err)
			}
			text := string(data)
			version := text[strings.LastIndex(text, "\n")+1:]
			if prev, ok := byVersion[version]; ok && prev != text {
				t.Fatalf("at %s, server %s's /zookeeper/config is\n%s\nand another's\n%s", version, c.Members[i].ID, text, prev)
			}
			byVersion[version] = text
			done = done && complete(text)
		}
		if !done && time.Now().After(deadline) {
			t.Fatalf("no server lists every member with its client address in 15s: %q", byVersion)
		}
	}
}
