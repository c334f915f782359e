package rpc

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/fsm/cmdpb"
)

// getAdmin fetches path on n's admin address.
func getAdmin(t *testing.T, n *Node, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + n.MetricsAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stuckObserver holds the FSM's write lock in its first Applied call until
// release closes.
type stuckObserver struct {
	observer
	once             *sync.Once
	entered, release chan struct{}
}

func (o stuckObserver) Applied(a *fsm.Applied) {
	o.once.Do(func() {
		close(o.entered)
		<-o.release
	})
	o.observer.Applied(a)
}

// TestLivezWhenTheStateMachineIsStuck: /livez answers 200 while the state
// machine answers reads, and 503 once its lock has been held past
// liveTimeout (a probe meanwhile fails at once instead of waiting again);
// it recovers when the lock is released.
func TestLivezWhenTheStateMachineIsStuck(t *testing.T) {
	n := newTestNodeWith(t, "1", func(c *Config) { c.MetricsAddr = "127.0.0.1:0" })
	waitLeader(t, n)
	if code, body := getAdmin(t, n, "/livez"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/livez: %d %q", code, body)
	}
	o := stuckObserver{observer: observer{n}, once: &sync.Once{}, entered: make(chan struct{}), release: make(chan struct{})}
	n.fsm.SetObserver(o)
	data, err := proto.Marshal(&cmdpb.Command{Cmd: &cmdpb.Command_Noop{Noop: &cmdpb.Noop{LeaderId: "test"}}, TimeMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	n.raft.Apply(data, 0)
	<-o.entered
	released := false
	defer func() {
		if !released {
			close(o.release)
		}
	}()
	code, body := getAdmin(t, n, "/livez")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "has not answered a read in") {
		t.Errorf("/livez with the state machine stuck: %d %q", code, body)
	}
	start := time.Now()
	code, body = getAdmin(t, n, "/livez")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "previous probe") || time.Since(start) >= liveTimeout {
		t.Errorf("/livez again: %d %q after %v", code, body, time.Since(start))
	}
	close(o.release)
	released = true
	waitFor(t, func() bool { code, _ := getAdmin(t, n, "/livez"); return code == http.StatusOK })
	if n.raft.State() == raft.Shutdown {
		t.Fatal("raft shut down")
	}
}

// TestClusterStartLogsNoWarnings: the normal start of a 3-server cluster,
// at the default level (warn), logs nothing, also when its servers start
// one after the other: the first two elect a leader, which cannot reach the
// third until it starts (hashicorp/raft logs each failed call at error
// level), then every server is ready.
func TestClusterStartLogsNoWarnings(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var nodes []*Node
	startOver(t, func() error {
		cfgs := []Config{testConfig(t, "1"), testConfig(t, "2"), testConfig(t, "3")}
		var peers []Peer
		for _, c := range cfgs {
			peers = append(peers, Peer{ID: c.ID, Addr: c.PeerAddr})
		}
		nodes = nil
		for i, c := range cfgs {
			if i == 2 {
				// The third starts once the first two have a leader that
				// has been failing to reach it.
				leader := waitLeader(t, nodes...)
				waitFor(t, func() bool { return leader.raft.Stats()["last_log_index"] != "0" && leader.LeaderReady() })
			}
			c.Peers, c.Logger = peers, logger
			// Raft's default timing, as coordd runs by default (the tests'
			// shorter timeouts make elections under a loaded machine's
			// pauses, which log warnings rightly).
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
			n, err := NewNode(c)
			if err != nil {
				for _, n := range nodes {
					n.Close()
				}
				return err
			}
			t.Cleanup(func() { n.Close() })
			nodes = append(nodes, n)
		}
		return nil
	})
	for _, n := range nodes {
		waitFor(t, func() bool { ok, _ := n.Ready(); return ok })
	}
	if out := buf.String(); out != "" {
		t.Fatalf("a 3-server cluster's start logged at warn or above:\n%s", out)
	}
}

// TestPeerFailureLogs: a peer that has never answered since this server
// started is logged at info, once, for peerStartGrace; after that, or once
// it has answered, its failures are logged at Raft's level, once per
// peerLogEvery, and the repeats at debug. Other messages keep their level.
func TestPeerFailureLogs(t *testing.T) {
	p := newPeerLogs()
	now := p.start
	p.now = func() time.Time { return now }
	p.setAddrOf(func(id raft.ServerID) string { return map[raft.ServerID]string{"3": "10.0.0.3:2888"}[id] })
	server3 := raft.Server{ID: "3", Address: "10.0.0.3:2888"}
	check := func(what, msg string, lvl slog.Level, args []any, want slog.Level) {
		t.Helper()
		if got := p.level(msg, lvl, args); got != want {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	check("a peer not up yet", "failed to appendEntries to", slog.LevelError, []any{"peer", server3, "error", "refused"}, slog.LevelInfo)
	check("its repeat", "failed to heartbeat to", slog.LevelError, []any{"peer", server3.Address}, slog.LevelDebug)
	check("its repeat by id", "failed to contact", slog.LevelWarn, []any{"server-id", server3.ID, "time", 1}, slog.LevelDebug)
	check("another message", "failed to persist vote", slog.LevelError, nil, slog.LevelError)
	check("a lone server's election at start", "Election timeout reached, restarting election", slog.LevelWarn, nil, slog.LevelInfo)
	now = now.Add(peerLogEvery)
	check("never up after the grace", "failed to make requestVote RPC", slog.LevelError, []any{"target", server3}, slog.LevelError)
	now = now.Add(peerLogEvery / 2)
	check("its repeat within the minute", "failed to appendEntries to", slog.LevelError, []any{"peer", server3}, slog.LevelDebug)
	now = now.Add(peerLogEvery / 2)
	check("a minute later", "failed to appendEntries to", slog.LevelError, []any{"peer", server3}, slog.LevelError)

	server4 := raft.Server{ID: "4", Address: "10.0.0.4:2888"}
	check("another peer not up yet", "failed to appendEntries to", slog.LevelError, []any{"peer", server4}, slog.LevelError)
	p.reached(string(server4.Address))
	check("once up, its first failure", "failed to appendEntries to", slog.LevelError, []any{"peer", server4}, slog.LevelError)
	check("its repeat", "failed to heartbeat to", slog.LevelError, []any{"peer", server4.Address}, slog.LevelDebug)
	check("a message naming no peer it knows", "failed to contact", slog.LevelWarn, []any{"server", 4}, slog.LevelWarn)
	check("an election after the start", "Election timeout reached, restarting election", slog.LevelWarn, nil, slog.LevelWarn)
}
