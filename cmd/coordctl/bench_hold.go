package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/apipb"
)

// runHold runs the session-hold workload: r.Clients sessions opened,
// spread over the servers, then held idle for --duration. The servers'
// memory before the sessions opened and at the end gives the memory per
// session; their CPU over the hold, what keeping the sessions costs. A
// session that expires, is suspended (grpc) or loses its connection (zk)
// during the hold, or cannot answer a request at its end, counts as an
// error.
func (b *bench) runHold(r benchResult) (benchResult, error) {
	x := b.x
	r.Latency = "connect"
	r.ValueSize = 0
	start := b.status()
	var h histogram
	record := func(d time.Duration) { h.record(d) }
	st := &runState{}

	var check func() // after the hold: counts the sessions that failed
	if b.o.protocol == "zk" {
		var holder zkHolder
		conns, spread, err := b.zkConnectAll(r.Clients, holder.event, record)
		if err != nil {
			return r, err
		}
		defer zkCloseAll(conns)
		r.SessionsPerServer = spread
		holder.measuring.Store(true)
		check = func() {
			holder.measuring.Store(false)
			if n := holder.expired.Load(); n > 0 {
				st.failN(n, fmt.Errorf("%d sessions expired during the hold", n))
			}
			if n := holder.disconnected.Load(); n > 0 {
				st.failN(n, fmt.Errorf("%d sessions lost their connection during the hold", n))
			}
			b.eachSession(len(conns), st, func(i int) error {
				_, _, err := conns[i].Exists("/")
				return err
			})
		}
	} else {
		cls, spread, err := b.connectBalancedTimed(r.Clients, record)
		if err != nil {
			return r, err
		}
		defer b.closeAll(cls)
		r.SessionsPerServer = spread
		for _, cl := range cls {
			drainStates(cl)
		}
		check = func() {
			for _, cl := range cls {
				for _, ev := range drainStates(cl) {
					switch ev.State {
					case client.StateExpired, client.StateSuspended, client.StateDisconnected:
						st.fail(fmt.Errorf("a session went %s during the hold (%v)", ev.State, ev.Err))
					}
				}
			}
			b.eachSession(len(cls), st, func(i int) error {
				ctx, cancel := context.WithTimeout(x.ctx, x.timeout)
				defer cancel()
				_, _, err := cls[i].Exists(ctx, "/")
				return err
			})
		}
	}
	r.HeldSessions = r.Clients

	t0 := time.Now()
	before := b.measure(benchSpec{"session-hold", r.Clients}, st, t0, t0, t0.Add(b.o.duration))
	after := b.status()
	check()
	if x.ctx.Err() != nil {
		return r, x.ctx.Err()
	}
	b.finish(&r, &h, st, before, after)
	r.Ops, r.OpsPerS = int64(r.Clients)-r.Errors, 0
	b.holdUsage(&r, start, after)
	return r, nil
}

// holdUsage fills in the resident memory at the start and the memory per
// held session.
func (b *bench) holdUsage(r *benchResult, start, after *apipb.StatusResponse) {
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

// eachSession calls f for every session index, many at a time, and counts
// every failure.
func (b *bench) eachSession(n int, st *runState, f func(i int) error) {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				st.fail(fmt.Errorf("a held session failed a request after the hold: %w", err))
			}
		}()
	}
	wg.Wait()
}

// drainStates returns the state events cl has queued (the channel keeps
// the latest 64), without waiting.
func drainStates(cl *client.Client) []client.StateEvent {
	var out []client.StateEvent
	ch := cl.States()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}

// zkHolder counts what happened to the held sessions of session-hold in
// the ZooKeeper-protocol mode.
type zkHolder struct {
	expired, disconnected atomic.Int64
	measuring             atomic.Bool
}

func (h *zkHolder) event(_ int, ev zk.Event) {
	if ev.Type != zk.EventSession || !h.measuring.Load() {
		return
	}
	switch ev.State {
	case zk.StateExpired:
		h.expired.Add(1)
	case zk.StateDisconnected:
		h.disconnected.Add(1)
	}
}

// writeHoldLines prints, after the table, what each session-hold run
// measured per session.
func writeHoldLines(w io.Writer, rs []benchResult) {
	for _, r := range rs {
		if r.Workload != "session-hold" {
			continue
		}
		fmt.Fprintf(w, "session-hold %d (%s): %d healthy, %d failed", r.HeldSessions, r.Protocol, r.Ops, r.Errors)
		if r.KBPerSession != 0 {
			fmt.Fprintf(w, "; %.1f KB of resident memory per session (all servers)", r.KBPerSession)
		}
		if r.LeaderCores != 0 {
			fmt.Fprintf(w, "; leader %.3f cores", r.LeaderCores)
		}
		fmt.Fprintln(w)
	}
}
