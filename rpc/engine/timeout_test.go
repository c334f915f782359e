package engine

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
)

// records is a slog handler that keeps the records logged at info or above.
type records struct {
	mu   sync.Mutex
	msgs []slog.Record
}

func (r *records) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Clone())
	r.mu.Unlock()
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// clamped returns the attributes of each "timeout clamped" record.
func (r *records) clamped() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, rec := range r.msgs {
		if rec.Message != "session timeout clamped into the server's bounds" {
			continue
		}
		attrs := map[string]any{}
		rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.Any(); return true })
		out = append(out, attrs)
	}
	return out
}

// TestTimeoutClampedIsLogged: a session whose requested timeout is
// outside the bounds is granted the bound, and the server says so at info,
// once, with the session, what it asked and what it got; a timeout within
// the bounds, no preference (0) and a resume log nothing.
func TestTimeoutClampedIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name     string
		askedMs  int64
		granted  time.Duration
		isLogged bool
	}{
		{"above the maximum", 60_000, 10 * time.Second, true},
		{"below the minimum", 50, 200 * time.Millisecond, true},
		{"within", 3_000, 3 * time.Second, false},
		{"the maximum", 10_000, 10 * time.Second, false},
		{"no preference", 0, time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fsm.New(fsm.Options{})
			c := newLogCluster(t, f)
			logs := &records{}
			e := New(Config{ServerID: "1", FSM: f, Cluster: c, Tick: 100 * time.Millisecond,
				MinSessionTimeout: 200 * time.Millisecond, MaxSessionTimeout: 10 * time.Second,
				Logger: slog.New(logs)})
			f.SetObserver(e)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := e.Connect(ctx, ConnectRequest{TimeoutMs: tc.askedMs})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := s.Next(ctx)
			if len(b) == 0 || b[0].Connected == nil || b[0].Connected.TimeoutMs != tc.granted.Milliseconds() {
				t.Fatalf("connected: %+v, want a timeout of %v", b, tc.granted)
			}
			id, pw := b[0].Connected.SessionID, b[0].Connected.Password
			s.Detach()
			// Resumed with another request: nothing is negotiated again.
			r, err := e.Connect(ctx, ConnectRequest{SessionID: id, Password: pw, TimeoutMs: 90_000})
			if err != nil {
				t.Fatal(err)
			}
			r.Detach()

			got := logs.clamped()
			if !tc.isLogged {
				if len(got) != 0 {
					t.Fatalf("logged %v", got)
				}
				return
			}
			want := map[string]any{"session": id, "asked": time.Duration(tc.askedMs) * time.Millisecond, "granted": tc.granted}
			if len(got) != 1 || len(got[0]) != len(want) {
				t.Fatalf("logged %v, want once %v", got, want)
			}
			for k, v := range want {
				if got[0][k] != v {
					t.Errorf("%s = %v, want %v", k, got[0][k], v)
				}
			}
		})
	}
}
