package console

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// The cluster view: every Config.Interval, from the console's start until
// it closes, the console asks its server for Status (the server asks every
// member for its own view) and sends the result to every page watching,
// with the cluster's reads/s, writes/s and commit latency over the
// interval, from the members' counters. The last Config.History of those
// figures is kept for the chart of a page that opens later: polling from
// the start, not from the first page, is what lets the first page see the
// last minutes, and its first view show rates (0 on an idle cluster)
// rather than none.

// sample is one point of the traffic chart: the cluster's rates over one
// interval, summed over the members that answered.
type sample struct {
	T      int64   `json:"t"` // Unix milliseconds
	Reads  float64 `json:"reads"`
	Writes float64 `json:"writes"`
	// LatencyMs is the mean commit latency of the interval's writes, from
	// their arrival at a server to its reply; null when there were none.
	LatencyMs *float64 `json:"latencyMs"`
}

// memberJSON is one member as the cluster view shows it.
type memberJSON struct {
	ID            string `json:"id"`
	Role          string `json:"role"`
	Leader        bool   `json:"leader"`
	Voter         bool   `json:"voter"`
	ClientAddress string `json:"clientAddress"`
	PeerAddress   string `json:"peerAddress"`
	Version       string `json:"version"`
	Term          uint64 `json:"term"`
	Commit        int64  `json:"commit"`
	Applied       int64  `json:"applied"`
	// LastContactMs: as apipb.Member's (0 on the leader, -1 never).
	LastContactMs int64 `json:"lastContactMs"`
	RSSBytes      int64 `json:"rssBytes"`
	// Reads and Writes are the member's requests per second over the last
	// interval; null before two readings.
	Reads  *float64 `json:"reads"`
	Writes *float64 `json:"writes"`
}

// clusterJSON is the cluster as the console's server sees it.
type clusterJSON struct {
	T        int64        `json:"t"` // Unix milliseconds
	Server   string       `json:"server"`
	Leader   string       `json:"leader"`
	Term     uint64       `json:"term"`
	Znodes   int64        `json:"znodes"`
	Sessions int64        `json:"sessions"`
	Watches  int64        `json:"watches"`
	Members  []memberJSON `json:"members"`
	Sample   *sample      `json:"sample,omitempty"`
	// Error says why the server did not answer; the rest is then empty.
	Error string `json:"error,omitempty"`
}

// counters are a member's cumulative traffic figures.
type counters struct {
	reads, writes uint64
	writeSeconds  float64
}

// hub polls the cluster and keeps its history for the pages watching it.
type hub struct {
	c *Console

	mu      sync.Mutex
	subs    map[chan []byte]struct{}
	history []sample
	last    []byte // the last view, encoded
	prev    map[string]counters
	prevAt  time.Time
}

func newHub(c *Console) *hub {
	return &hub{c: c, subs: map[chan []byte]struct{}{}}
}

// subscribe adds a page: it receives every view from now on (a slow page
// misses some), and gets the history and the last view at once.
func (h *hub) subscribe() (<-chan []byte, []sample, []byte, func()) {
	ch := make(chan []byte, 4)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[ch] = struct{}{}
	return ch, append([]sample(nil), h.history...), h.last, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

// oldest returns the time of the oldest sample kept (Unix ms), 0 if none.
func (h *hub) oldest() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.history) == 0 {
		return 0
	}
	return h.history[0].T
}

// run polls until the console closes, whether or not a page watches.
func (h *hub) run() {
	for {
		view := h.poll()
		b, _ := json.Marshal(view)
		h.mu.Lock()
		h.last = b
		for ch := range h.subs {
			select {
			case ch <- b:
			default:
			}
		}
		h.mu.Unlock()
		if !pause(h.c.ctx, h.c.cfg.Interval) {
			return
		}
	}
}

// poll asks for Status once and computes the rates since the last poll.
func (h *hub) poll() clusterJSON {
	ctx, cancel := context.WithTimeout(h.c.ctx, callTimeout)
	defer cancel()
	now := time.Now()
	view := clusterJSON{T: now.UnixMilli(), Members: []memberJSON{}}
	resp, err := h.c.api.Status(ctx, &apipb.StatusRequest{})
	if err != nil {
		view.Error = "no answer from " + h.c.cfg.Server + ": " + err.Error()
		return view
	}
	view.Server, view.Leader, view.Term = resp.GetId(), resp.GetLeader(), resp.GetTerm()
	view.Znodes, view.Sessions, view.Watches = resp.GetZnodes(), resp.GetSessions(), resp.GetWatches()
	for _, m := range resp.GetMembers() {
		view.Members = append(view.Members, memberJSON{
			ID: m.GetId(), Role: m.GetRole(), Leader: m.GetId() == resp.GetLeader(), Voter: m.GetVoter(),
			ClientAddress: m.GetClientAddress(), PeerAddress: m.GetPeerAddress(), Version: m.GetVersion(),
			Term: m.GetTerm(), Commit: m.GetCommit(), Applied: m.GetApplied(), LastContactMs: m.GetLastContactMs(),
			RSSBytes: m.GetRssBytes(),
		})
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	cur := make(map[string]counters)
	for _, m := range resp.GetMembers() {
		if m.GetRole() != "unreachable" {
			cur[m.GetId()] = counters{reads: m.GetReads(), writes: m.GetWrites(), writeSeconds: m.GetWriteSeconds()}
		}
	}
	dt := now.Sub(h.prevAt).Seconds()
	if h.prev != nil && dt > 0 && dt <= 10*h.c.cfg.Interval.Seconds() {
		s := sample{T: view.T}
		var writes, seconds float64
		for i := range view.Members {
			m := &view.Members[i]
			p, ok1 := h.prev[m.ID]
			c, ok2 := cur[m.ID]
			if !ok1 || !ok2 || c.reads < p.reads || c.writes < p.writes {
				continue // unreachable, or restarted meanwhile
			}
			r, w := float64(c.reads-p.reads)/dt, float64(c.writes-p.writes)/dt
			m.Reads, m.Writes = &r, &w
			s.Reads += r
			s.Writes += w
			writes += float64(c.writes - p.writes)
			seconds += c.writeSeconds - p.writeSeconds
		}
		if writes > 0 {
			ms := seconds / writes * 1000
			s.LatencyMs = &ms
		}
		view.Sample = &s
		h.history = append(h.history, s)
		cut := view.T - h.c.cfg.History.Milliseconds()
		i := 0
		for i < len(h.history) && h.history[i].T < cut {
			i++
		}
		h.history = h.history[i:]
	}
	h.prev, h.prevAt = cur, now
	return view
}

// handleCluster streams the cluster view: a "history" event with the
// chart's past samples, then a "cluster" event every interval.
func (c *Console) handleCluster(w http.ResponseWriter, r *http.Request) {
	ch, history, last, unsubscribe := c.cluster.subscribe()
	defer unsubscribe()
	es, ctx, cancel := c.newEventStream(r.Context(), w)
	defer cancel()
	if history == nil {
		history = []sample{}
	}
	if es.send("history", history) != nil {
		return
	}
	if last != nil && es.sendRaw("cluster", last) != nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-ch:
			if es.sendRaw("cluster", b) != nil {
				return
			}
		}
	}
}
