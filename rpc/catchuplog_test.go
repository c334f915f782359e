package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// recordedLogs keeps every record a logger at debug level receives, with
// its level, so that a test can see at which level a message came.
type recordedLogs struct {
	mu      sync.Mutex
	records []string // "LEVEL msg"
}

func (r *recordedLogs) Enabled(context.Context, slog.Level) bool { return true }
func (r *recordedLogs) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *recordedLogs) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recordedLogs) WithGroup(string) slog.Handler      { return r }

// find returns the level msg was first logged at ("" if it was not).
func (r *recordedLogs) find(msg string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.records {
		if lvl, m, _ := strings.Cut(rec, " "); m == msg {
			return lvl
		}
	}
	return ""
}

// atWarn returns the records at warn or above.
func (r *recordedLogs) atWarn() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		if strings.HasPrefix(rec, "WARN ") || strings.HasPrefix(rec, "ERROR ") {
			out = append(out, rec)
		}
	}
	return out
}

// TestJoinLogsNoWarnings: a server that joins a running cluster, and the
// leader that adds it, log nothing at warn: the joiner's elections that
// abort while it has no configuration, its rejection of the leader's first
// append (beyond its empty log) and the leader's backing off are Raft's
// routine, at info. Each is waited for, so the test sees them happen.
func TestJoinLogsNoWarnings(t *testing.T) {
	var leaderLogs, joinerLogs recordedLogs
	leader := newTestNodeWith(t, "1", func(c *Config) { c.Logger = slog.New(&leaderLogs) })
	waitLeader(t, leader)
	waitFor(t, leader.LeaderReady)
	j := newTestNodeWith(t, "4", func(c *Config) { c.Join = true; c.Logger = slog.New(&joinerLogs) })
	select {
	case <-j.Member():
		t.Fatal("a server waiting to be added says it is a member")
	default:
	}
	const (
		noPeers  = "no known peers, aborting election"
		noPrev   = "failed to get previous log"
		backsOff = "appendEntries rejected, sending older logs"
	)
	waitFor(t, func() bool { return joinerLogs.find(noPeers) != "" })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := (admin{leader}).AddMember(ctx, &apipb.AddMemberRequest{Id: "4", PeerAddress: j.cfg.PeerAddr, NonVoter: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-j.Member():
	case <-ctx.Done():
		t.Fatal("the added server never says it is a member")
	}
	waitFor(t, func() bool { return j.fsm.AppliedIndex() >= leader.fsm.AppliedIndex() })
	waitFor(t, func() bool { return joinerLogs.find(noPrev) != "" && leaderLogs.find(backsOff) != "" })
	for _, c := range []struct {
		logs *recordedLogs
		msg  string
	}{{&joinerLogs, noPeers}, {&joinerLogs, noPrev}, {&leaderLogs, backsOff}} {
		if lvl := c.logs.find(c.msg); lvl != "INFO" {
			t.Errorf("%q logged at %s, want INFO", c.msg, lvl)
		}
	}
	for who, logs := range map[string]*recordedLogs{"joiner": &joinerLogs, "leader": &leaderLogs} {
		if w := logs.atWarn(); len(w) > 0 {
			t.Errorf("the %s logged at warn or above:\n%s", who, strings.Join(w, "\n"))
		}
	}
}

// TestCatchUpLevel: a rejected append is info only when the entry is
// beyond the log's end; a log that lacks an entry it should hold stays a
// warning.
func TestCatchUpLevel(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		args []any
		want slog.Level
	}{
		{"no known peers, aborting election", nil, slog.LevelInfo},
		{"appendEntries rejected, sending older logs", []any{"peer", "x", "next", uint64(1)}, slog.LevelInfo},
		{"failed to get previous log", []any{"previous-index", uint64(9), "last-index", uint64(0), "error", "log not found"}, slog.LevelInfo},
		{"failed to get previous log", []any{"previous-index", uint64(9), "last-index", uint64(12), "error", "log not found"}, slog.LevelWarn},
		{"failed to get previous log", []any{"error", "log not found"}, slog.LevelWarn},
		{"failed to appendEntries to", nil, slog.LevelWarn},
	} {
		if got := catchUpLevel(tc.msg, slog.LevelWarn, tc.args); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.msg, fmt.Sprint(tc.args...), got, tc.want)
		}
	}
}
