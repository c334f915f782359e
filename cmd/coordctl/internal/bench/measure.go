package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
)

// measure waits for the run to end, printing the progress line every second,
// and returns the servers' usage at the start of the measured part.
func (b *Bench) measure(s Spec, st *runState, start, warmEnd, end time.Time) *apipb.StatusResponse {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var before *apipb.StatusResponse
	warm := time.NewTimer(time.Until(warmEnd))
	defer warm.Stop()
	finish := time.NewTimer(time.Until(end))
	defer finish.Stop()
	progressed := false
	defer func() {
		if progressed && b.cfg.Terminal {
			io.WriteString(b.cfg.Log, "\r\x1b[K")
		}
	}()
	for {
		select {
		case <-b.ctx.Done():
			return before
		case <-warm.C:
			before = b.status()
		case <-finish.C:
			if before == nil {
				before = b.status()
			}
			return before
		case now := <-tick.C:
			b.progress(s, st, now, warmEnd)
			progressed = true
		}
	}
}

// progress writes the run's progress line: rewritten in place on a
// terminal, else a line each time.
func (b *Bench) progress(s Spec, st *runState, now, warmEnd time.Time) {
	var line string
	if now.Before(warmEnd) {
		line = fmt.Sprintf("bench %s clients=%d: warming up (%s), errors %d", s.Workload, s.Clients, b.cfg.Warmup, st.errs.Load())
	} else {
		el := now.Sub(warmEnd)
		ops := st.ops.Load()
		line = fmt.Sprintf("bench %s clients=%d: %.0fs/%.0fs %d ops, %.0f ops/s, errors %d",
			s.Workload, s.Clients, el.Seconds(), b.cfg.Duration.Seconds(), ops, float64(ops)/el.Seconds(), st.errs.Load())
	}
	if b.cfg.Terminal {
		io.WriteString(b.cfg.Log, "\r"+line+"\x1b[K")
	} else {
		io.WriteString(b.cfg.Log, line+"\n")
	}
}
