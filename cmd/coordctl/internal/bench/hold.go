package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// The session-hold workload: what idle sessions cost the servers.

var sessionHoldWorkload = &workload{
	name: "session-hold",
	help: `  session-hold  CLIENTS sessions (session-hold:10000) are opened, spread
              evenly over the servers, and held idle for --duration; the
              servers' memory before and after gives the memory per session,
              their CPU over the hold the cost of keeping them (pings,
              touches, vouches: on the leader above all). Every session
              that expires or, with --protocol zk, loses its connection
              during the hold is an error. The latency is the time to open
              a session.
`,
	run: runHold,
}

// runHold runs the session-hold workload: s.Clients sessions opened,
// spread over the servers, then held idle for --duration. The servers'
// memory before the sessions opened and at the end gives the memory per
// session; their CPU over the hold, what keeping the sessions costs. A
// session that expires, is suspended (grpc) or loses its connection during
// the hold, or cannot answer a request at its end, counts as an error.
func runHold(b *Bench, s Spec) ([]Result, error) {
	r := b.result(s)
	r.Latency = "connect"
	r.ValueSize = 0
	start := b.status()
	var h histogram
	sessions, spread, err := b.connectBalanced(s.Clients, func(d time.Duration) { h.record(d) })
	if err != nil {
		return nil, err
	}
	defer b.closeAll(sessions)
	r.SessionsPerServer = spread
	for _, sess := range sessions {
		sess.losses() // what happened while the others opened does not count
	}
	r.HeldSessions = s.Clients

	st := &runState{}
	t0 := time.Now()
	before := b.measure(s, st, t0, t0, t0.Add(b.cfg.Duration))
	after := b.status()
	b.checkHeld(sessions, st)
	if b.ctx.Err() != nil {
		return nil, b.ctx.Err()
	}
	b.finish(&r, &h, st, before, after)
	r.Ops, r.OpsPerS = int64(s.Clients)-r.Errors, 0
	holdUsage(&r, start, after)
	return []Result{r}, nil
}

// checkHeld counts a failure for every loss of a held session during the
// hold and for every session that cannot answer a request after it.
func (b *Bench) checkHeld(sessions []session, st *runState) {
	for _, sess := range sessions {
		for _, l := range sess.losses() {
			if l.err != nil {
				st.fail(fmt.Errorf("a session went %s during the hold (%v)", l.state, l.err))
			} else {
				st.fail(fmt.Errorf("a session went %s during the hold", l.state))
			}
		}
	}
	b.many(len(sessions), 64, func(i int) {
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
		defer cancel()
		if err := sessions[i].exists(ctx, "/"); err != nil {
			st.fail(fmt.Errorf("a held session failed a request after the hold: %w", err))
		}
	})
}

// holdUsage fills in the resident memory at the start and the memory per
// held session.
func holdUsage(r *Result, start, after *apipb.StatusResponse) {
	if start == nil || after == nil || r.HeldSessions == 0 {
		return
	}
	rss0 := map[string]int64{}
	for _, m := range start.GetMembers() {
		rss0[m.GetId()] = m.GetRssBytes()
	}
	var added int64
	for i, u := range r.Servers {
		if v, ok := rss0[u.ID]; ok && v > 0 {
			r.Servers[i].RssStartMB = round(float64(v)/(1<<20), 1)
			for _, m := range after.GetMembers() {
				if m.GetId() == u.ID {
					added += m.GetRssBytes() - v
				}
			}
		}
	}
	r.KBPerSession = round(float64(added)/1024/float64(r.HeldSessions), 2)
}
