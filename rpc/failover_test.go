package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/rpc/apipb"
)

// electionsCalled is how many elections n called for cause (the
// coordd_raft_elections_total series).
func electionsCalled(t *testing.T, n *Node, cause string) float64 {
	t.Helper()
	mfs, err := n.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "coordd_raft_elections_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" && l.GetValue() == cause {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no coordd_raft_elections_total{cause=%q}", cause)
	return 0
}

// waitSameLog waits until the leader has written what it writes on its own
// after its election, and every node's Raft log ends at the same index: a
// follower with a shorter log cannot win an election, which these tests do
// not mean to test.
func waitSameLog(t *testing.T, leader *Node, nodes ...*Node) {
	t.Helper()
	// The leader's own entries after its election: the command level
	// raised, every server's client address registered.
	waitLevel(t, nodes...)
	waitClientAddrs(t, nodes...)
	waitFor(t, func() bool {
		if !leader.LeaderReady() {
			return false
		}
		last := leader.raft.LastIndex()
		for _, n := range nodes {
			if n.raft.LastIndex() != last {
				return false
			}
		}
		return true
	})
}

// TestLeaderGoneElectsAtOnce: when every connection of the leader closes
// and it accepts no new one (its process died), its followers elect a new
// leader at once, without waiting out their heartbeat timeout
// (rpc/third_party/raft, patch part 9). The followers' heartbeat timeout
// is raised to 20 s once the cluster runs, so no follower could call an
// election before 20 s on a missed heartbeat; the new leader must be there
// well before, and have been elected because the old one was found gone.
func TestLeaderGoneElectsAtOnce(t *testing.T) {
	is := newIsolator()
	nodes, leader := threeNodes(t, func(c *Config) {
		is.mu.Lock()
		is.addrs[c.PeerAddr] = c.ID
		is.mu.Unlock()
		c.DialPeer = is.dialer(c.ID)
	})
	waitSameLog(t, leader, nodes...)
	const hb = 20 * time.Second
	var rest []*Node
	for _, n := range nodes {
		if n == leader {
			continue
		}
		rest = append(rest, n)
		rc := n.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = hb, hb
		if err := n.raft.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	before := map[*Node]float64{}
	for _, n := range rest {
		before[n] = electionsCalled(t, n, "heartbeat_timeout")
	}
	// As a kill -9 looks from the other servers: every connection of the
	// leader closes, and a new one is refused.
	killed := time.Now()
	is.isolate(leader.ID())
	var next *Node
	for next == nil {
		if time.Since(killed) > hb/2 {
			t.Fatalf("no new leader %v after the leader's connections closed (the heartbeat timeout is %v)", time.Since(killed), hb)
		}
		for _, n := range rest {
			if n.raft.State() == raft.Leader {
				next = n
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("server %s leads %v after the old leader's connections closed", next.ID(), time.Since(killed).Round(time.Millisecond))
	if got := electionsCalled(t, next, "leader_gone"); got < 1 {
		t.Fatalf("the new leader called %v elections because the leader was gone, want at least 1", got)
	}
	for _, n := range rest {
		if got := electionsCalled(t, n, "heartbeat_timeout") - before[n]; got != 0 {
			t.Errorf("server %s called %v elections on a heartbeat timeout since the leader's connections closed, want 0", n.ID(), got)
		}
	}
}

// TestLeaderGoneAsksThePreVoteAgain: a follower that found the leader gone
// before the other did has its pre-vote refused (the other still knows
// the leader); it asks again soon, not after an election timeout, and wins
// once the other finds the leader gone too (rpc/third_party/raft, patch
// part 9). The leader's connections all close at once, but the second
// follower's probe of the leader is held until the first's pre-vote has
// been refused. With a heartbeat and election timeout of 20 s, the first
// follower in id order calls its election a second after it finds the
// leader gone, the second six seconds after it does; the first asks again
// every 2-4 s, so it must win before the second's turn. Without asking
// again it would wait out its 20-40 s election timeout, and the second
// would lead.
func TestLeaderGoneAsksThePreVoteAgain(t *testing.T) {
	is := newIsolator()
	logs := newLogWatch()
	nodes, leader := threeNodes(t, func(c *Config) {
		is.mu.Lock()
		is.addrs[c.PeerAddr] = c.ID
		is.mu.Unlock()
		c.DialPeer = is.dialer(c.ID)
		c.Logger = logs.logger(c.ID, c.Logger)
	})
	waitSameLog(t, leader, nodes...)
	const hb = 20 * time.Second
	var first, second *Node
	for _, n := range nodes { // in id order
		if n == leader {
			continue
		}
		if first == nil {
			first = n
		} else {
			second = n
		}
		rc := n.raft.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = hb, hb
		if err := n.raft.ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	// The leader dies; the second follower does not find out yet: its
	// probe hangs.
	release := is.holdDials(second.ID(), leader.ID())
	defer release()
	is.isolate(leader.ID())
	// The first calls its election (counted by an observer of Raft's, a
	// little after the state changed) and the second refuses the pre-vote.
	const refusal = "rejecting pre-vote request since we have a leader"
	waitFor(t, func() bool {
		return first.raft.State() == raft.Candidate && electionsCalled(t, first, "leader_gone") >= 1 && logs.seen(second.ID(), refusal)
	})
	if got := electionsCalled(t, first, "leader_gone"); got != 1 {
		t.Fatalf("the first follower called %v elections because the leader was gone, want 1", got)
	}
	// Now the second finds the leader gone too.
	release()
	var next *Node
	waitFor(t, func() bool {
		for _, n := range []*Node{first, second} {
			if n.raft.State() == raft.Leader {
				next = n
			}
		}
		return next != nil
	})
	if next != first {
		t.Fatalf("server %s leads, want %s, which asked for the pre-vote again after the other found the leader gone", next.ID(), first.ID())
	}
}

// logWatch records the messages each server logged (Raft's included), so
// that a test can wait for one that marks a step it cannot see otherwise.
type logWatch struct {
	mu   sync.Mutex
	msgs map[string]map[string]bool // server id -> messages
}

func newLogWatch() *logWatch { return &logWatch{msgs: map[string]map[string]bool{}} }

// logger is server id's logger: it records each message, and passes it on
// to next if there is one.
func (w *logWatch) logger(id string, next *slog.Logger) *slog.Logger {
	w.mu.Lock()
	w.msgs[id] = map[string]bool{}
	w.mu.Unlock()
	h := &logWatchHandler{w: w, id: id}
	if next != nil {
		h.next = next.Handler()
	}
	return slog.New(h)
}

// seen reports whether server id logged msg.
func (w *logWatch) seen(id, msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.msgs[id][msg]
}

type logWatchHandler struct {
	w    *logWatch
	id   string
	next slog.Handler
}

func (h *logWatchHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logWatchHandler) Handle(ctx context.Context, r slog.Record) error {
	h.w.mu.Lock()
	h.w.msgs[h.id][r.Message] = true
	h.w.mu.Unlock()
	if h.next != nil && h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *logWatchHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	if h.next != nil {
		c.next = h.next.WithAttrs(as)
	}
	return &c
}

func (h *logWatchHandler) WithGroup(name string) slog.Handler {
	c := *h
	if h.next != nil {
		c.next = h.next.WithGroup(name)
	}
	return &c
}

// writer writes in a loop on one server until stopped, and counts what
// succeeded and what failed.
type writer struct {
	ok, failed atomic.Int64
	firstErr   atomic.Value
	stop       chan struct{}
	stopOnce   sync.Once
	done       sync.WaitGroup
}

func newWriter() *writer { return &writer{stop: make(chan struct{})} }

func (w *writer) run(write func(i int) error) {
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			if err := write(i); err != nil {
				w.failed.Add(1)
				w.firstErr.CompareAndSwap(nil, err)
				continue
			}
			w.ok.Add(1)
		}
	}()
}

// waitMore waits until the writer has succeeded n more times.
func (w *writer) waitMore(t *testing.T, n int64) {
	t.Helper()
	target := w.ok.Load() + n
	waitFor(t, func() bool { return w.ok.Load() >= target })
}

// end stops the writer and waits for it (once; again does nothing).
func (w *writer) end() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.done.Wait()
}

// TestLeaderGoneClientsSeeNothing: when the leader dies (every connection
// of its closes, and it accepts no new one), a writer of each protocol on
// the other servers sees no write fail and no connection lost: the
// followers elect a new leader because the old one is gone, their
// forwarded writes are sent again to it, and the servers never go long
// enough without a leader to drop their clients (issue 40's kill -9 of the
// leader, as the clients of the surviving servers see it).
func TestLeaderGoneClientsSeeNothing(t *testing.T) {
	is := newIsolator()
	nodes, leader := threeNodes(t, func(c *Config) {
		is.mu.Lock()
		is.addrs[c.PeerAddr] = c.ID
		is.mu.Unlock()
		c.DialPeer = is.dialer(c.ID)
	})
	waitSameLog(t, leader, nodes...)
	rest := followersOf(nodes, leader)
	zw, gw, lost := followerWriters(t, rest[0], rest[1])
	defer gw.end()
	defer zw.end()
	zw.waitMore(t, 20)
	gw.waitMore(t, 20)
	before := map[*Node]float64{}
	for _, n := range rest {
		before[n] = electionsCalled(t, n, "leader_gone")
	}
	killed := time.Now()
	is.isolate(leader.ID())
	var next *Node
	waitFor(t, func() bool {
		for _, n := range rest {
			if n.IsLeader() {
				next = n
			}
		}
		return next != nil
	})
	t.Logf("server %s leads %v after the leader's connections closed", next.ID(), time.Since(killed).Round(time.Millisecond))
	zw.waitMore(t, 20)
	gw.waitMore(t, 20)
	t.Logf("both writers wrote 20 times more %v after the leader's connections closed", time.Since(killed).Round(time.Millisecond))
	zw.end()
	gw.end()
	// Counted by an observer of Raft's, a little after the state changed.
	counted := func() bool { return electionsCalled(t, next, "leader_gone")-before[next] >= 1 }
	for deadline := time.Now().Add(2 * time.Second); !counted() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if !counted() {
		t.Errorf("server %s was elected, but not because the leader was gone (coordd_raft_elections_total{cause=\"leader_gone\"} did not move)", next.ID())
	}
	for name, w := range map[string]*writer{"ZooKeeper's protocol": zw, "coordd's protocol": gw} {
		if n := w.failed.Load(); n != 0 {
			t.Errorf("the writer of %s on a follower saw %d writes fail, the first with %v", name, n, w.firstErr.Load())
		}
	}
	if n := lost.Load(); n != 0 {
		t.Errorf("the ZooKeeper client lost its connection %d times", n)
	}
}

// followerWriters starts a writer of ZooKeeper's protocol (go-zookeeper)
// on server zn and one of coordd's protocol on server gn, each on a node
// of its own, and counts the ZooKeeper client's lost connections (its
// Disconnected and Expired events).
func followerWriters(t *testing.T, zn, gn *Node) (zw, gw *writer, lost *atomic.Int64) {
	t.Helper()
	// A ZooKeeper-protocol writer on one follower.
	conn, events, err := zk.Connect([]string{zn.ClientAddr()}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	lost = new(atomic.Int64)
	waitFor(t, func() bool { return conn.State() == zk.StateHasSession })
	go func() {
		for ev := range events {
			if ev.State == zk.StateDisconnected || ev.State == zk.StateExpired {
				lost.Add(1)
			}
		}
	}()
	if _, err := conn.Create("/zk", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	zw = newWriter()
	zw.run(func(i int) error {
		_, err := conn.Set("/zk", []byte(fmt.Sprint(i)), -1)
		return err
	})
	// A writer of coordd's protocol on the other.
	s := newSession(t, gn)
	if r := s.do(&apipb.Request{Op: &apipb.Request_Create{Create: &apipb.CreateRequest{Path: "/grpc"}}}); r.Error != apipb.ErrorCode_OK {
		t.Fatalf("create: %v", r)
	}
	gw = newWriter()
	gw.run(func(i int) error {
		s.xid++
		xid := s.xid
		req := &apipb.Request{Xid: xid, Op: &apipb.Request_SetData{SetData: &apipb.SetDataRequest{Path: "/grpc", Data: []byte(fmt.Sprint(i)), Version: -1}}}
		if err := s.stream.Send(&apipb.ClientMessage{Kind: &apipb.ClientMessage_Request{Request: req}}); err != nil {
			return err
		}
		for {
			m, err := s.stream.Recv()
			if err != nil {
				return err
			}
			if r := m.GetResponse(); r != nil {
				if r.Xid != xid || r.Error != apipb.ErrorCode_OK {
					return fmt.Errorf("reply %v to xid %d", r, xid)
				}
				return nil
			}
		}
	})
	return zw, gw, lost
}

// TestCloseHandsOverLeadership: a leader that stops (SIGTERM, a rolling
// restart's step) hands leadership to a follower first, so the new leader
// is elected by the transfer, not after the old one is found gone, and a
// writer on each other server, one per protocol, sees no write fail and
// no connection lost.
func TestCloseHandsOverLeadership(t *testing.T) {
	nodes, leader := threeNodes(t)
	rest := followersOf(nodes, leader)
	zw, gw, lost := followerWriters(t, rest[0], rest[1])
	defer gw.end()
	defer zw.end()
	zw.waitMore(t, 20)
	gw.waitMore(t, 20)

	before := map[*Node]float64{}
	for _, n := range rest {
		before[n] = electionsCalled(t, n, "leadership_transfer")
	}
	closed := time.Now()
	leader.Close()
	t.Logf("the leader closed in %v", time.Since(closed).Round(time.Millisecond))
	var next *Node
	waitFor(t, func() bool {
		for _, n := range rest {
			if n.IsLeader() {
				next = n
			}
		}
		return next != nil
	})
	t.Logf("server %s leads %v after the close began", next.ID(), time.Since(closed).Round(time.Millisecond))
	zw.waitMore(t, 20)
	gw.waitMore(t, 20)
	t.Logf("both writers wrote 20 times more %v after the close began", time.Since(closed).Round(time.Millisecond))
	zw.end()
	gw.end()
	if got := electionsCalled(t, next, "leadership_transfer") - before[next]; got != 1 {
		t.Errorf("the new leader called %v elections on a leadership transfer, want 1", got)
	}
	for name, w := range map[string]*writer{"ZooKeeper's protocol": zw, "coordd's protocol": gw} {
		if n := w.failed.Load(); n != 0 {
			t.Errorf("the writer of %s on a follower saw %d writes fail, the first with %v", name, n, w.firstErr.Load())
		}
	}
	if n := lost.Load(); n != 0 {
		t.Errorf("the ZooKeeper client lost its connection %d times", n)
	}
}
