package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// compare scale-table FILE...: the results of compare scale, one file per
// system, as one Markdown table, the systems side by side and the last
// against the first.

func scaleTableMain(files []string, w io.Writer) error {
	var rs []scaleResult
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r scaleResult
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return fmt.Errorf("scale-table: no results")
	}
	writeScaleTable(w, rs)
	return nil
}

// row is one line of the table: its label, and each system's value (nil:
// not measured) and how to print it.
type row struct {
	label string
	value func(r *scaleResult) (float64, bool)
	text  func(r *scaleResult) string // instead of value, when set
	prec  int
}

func num(f func(r *scaleResult) float64, prec int) func(r *scaleResult) (float64, bool) {
	return func(r *scaleResult) (float64, bool) {
		v := f(r)
		return v, v != 0
	}
}

func meanOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return sumMB(v) / float64(len(v))
}

// withAnon prints each server's resident memory and, in parentheses, its
// anonymous part.
func withAnon(rss, anon []float64) string {
	if len(rss) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", mbList(rss), mbList(anon))
}

func perServer(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return mbList(v)
}

func writeScaleTable(w io.Writer, rs []scaleResult) {
	// The sizes, from whichever run measured them.
	first := &scaleResult{}
	for _, r := range rs {
		first.Znodes, first.Children = max(first.Znodes, r.Znodes), max(first.Children, r.Children)
		first.CatchupWrites, first.Watches = max(first.CatchupWrites, r.CatchupWrites), max(first.Watches, r.Watches)
		first.Recursive, first.Sessions = max(first.Recursive, r.Recursive), max(first.Sessions, r.Sessions)
		first.GRPCSessions = max(first.GRPCSessions, r.GRPCSessions)
	}
	rows := []row{
		{label: "resident MB per server, idle (of it anonymous)", text: func(r *scaleResult) string { return withAnon(r.IdleRSSMB, r.IdleAnonMB) }},
		{label: fmt.Sprintf("resident MB per server, %d znodes of 100 B below 100 parents", first.Znodes), text: func(r *scaleResult) string { return withAnon(r.LoadedRSSMB, r.LoadedAnonMB) }},
		{label: "  bytes per znode beyond its data, resident", value: num(func(r *scaleResult) float64 { return r.BeyondDataRSS }, 0)},
		{label: "  bytes per znode beyond its data, anonymous memory", value: num(func(r *scaleResult) float64 { return r.BeyondDataAnon }, 0)},
		{label: "  bytes per znode beyond its data, live heap after a full GC", value: num(func(r *scaleResult) float64 { return r.BeyondDataHeap }, 0)},
		{label: "  loading them (s)", value: num(func(r *scaleResult) float64 { return r.LoadS }, 1), prec: 1},
		{label: fmt.Sprintf("resident MB per server, and %d children of one parent", first.Children), text: func(r *scaleResult) string { return withAnon(r.ChildrenRSSMB, r.ChildrenAnonMB) }},
		{label: "  bytes per child beyond its data, resident", value: num(func(r *scaleResult) float64 { return r.ChildBeyondRSS }, 0)},
		{label: "  bytes per child beyond its data, anonymous memory", value: num(func(r *scaleResult) float64 { return r.ChildBeyondAnon }, 0)},
		{label: "  bytes per child beyond its data, live heap after a full GC", value: num(func(r *scaleResult) float64 { return r.ChildBeyondHeap }, 0)},
		{label: "getChildren of that parent (ms)", value: num(func(r *scaleResult) float64 { return r.GetChildrenMS }, 0)},
		{label: "  its outcome, reply MB", text: func(r *scaleResult) string {
			if r.GetChildrenResult == "" {
				return "-"
			}
			return fmt.Sprintf("%s, %.1f", r.GetChildrenResult, r.GetChildrenMB)
		}},
		{label: "  other sessions on that server: p99 before / worst during (ms)", text: func(r *scaleResult) string {
			return fmt.Sprintf("%.1f / %.1f", r.OthersQuietP99MS, r.OthersMaxMS)
		}},
		{label: "  creating one more child (ms)", value: num(func(r *scaleResult) float64 { return r.CreateChildMS }, 1), prec: 1},
		{label: "writes under snapshots: writes/s", value: num(func(r *scaleResult) float64 { return r.Writes.OpsPerS }, 0)},
		{label: "  p99 (ms) without a snapshot running / during one", text: func(r *scaleResult) string {
			return fmt.Sprintf("%s / %s", msOrNone(r.Writes.QuietP99MS, r.Writes.QuietN), msOrNone(r.Writes.SnapP99MS, r.Writes.SnapN))
		}},
		{label: "  writes without / during a snapshot", text: func(r *scaleResult) string {
			return fmt.Sprintf("%d / %d", r.Writes.QuietN, r.Writes.SnapN)
		}},
		{label: "  snapshots: count, longest (s), largest (MB)", text: func(r *scaleResult) string {
			var longest, largest float64
			for _, s := range r.Snapshots {
				longest, largest = max(longest, s.S), max(largest, s.MB)
			}
			return fmt.Sprintf("%d, %.1f, %.0f", len(r.Snapshots), longest, largest)
		}},
		{label: "a follower restarted: serving (s)", value: num(func(r *scaleResult) float64 { return r.RestartServingS }, 2), prec: 2},
		{label: "  caught up (s)", value: num(func(r *scaleResult) float64 { return r.RestartCaughtUpS }, 2), prec: 2},
		{label: fmt.Sprintf("a follower that missed %d writes: serving (s)", first.CatchupWrites), value: num(func(r *scaleResult) float64 { return r.CatchupServingS }, 2), prec: 2},
		{label: "  caught up (s)", value: num(func(r *scaleResult) float64 { return r.CatchupS }, 2), prec: 2},
		{label: "a wiped follower rebuilt: serving (s)", value: num(func(r *scaleResult) float64 { return r.WipedServingS }, 2), prec: 2},
		{label: "  caught up (s)", value: num(func(r *scaleResult) float64 { return r.WipedCaughtUpS }, 2), prec: 2},
		{label: "  writes on the others meanwhile: writes/s, p99 (ms), errors", text: func(r *scaleResult) string {
			return fmt.Sprintf("%.0f, %.1f, %d", r.WipedWrites.OpsPerS, r.WipedWrites.P99MS, r.WipedWrites.Errors)
		}},
		{label: fmt.Sprintf("%d one-shot + %d persistent recursive watches: bytes per watch, anonymous memory (all servers)", first.Watches, first.Recursive), value: num(func(r *scaleResult) float64 { return r.BytesPerWatch }, 0)},
		{label: "  bytes per watch, live heap after a full GC", value: num(func(r *scaleResult) float64 { return r.HeapPerWatch }, 0)},
		{label: "  writes/s without / with them", text: func(r *scaleResult) string {
			return fmt.Sprintf("%.0f / %.0f", r.WritesNoWatches, r.WritesAndWatches)
		}},
		{label: fmt.Sprintf("%d sessions pinging: expired or lost", first.Sessions), text: func(r *scaleResult) string {
			if r.Sessions == 0 {
				return "-"
			}
			return fmt.Sprint(r.SessionsExpired)
		}},
		{label: "  bytes per session, anonymous memory (all servers)", value: num(func(r *scaleResult) float64 { return r.BytesPerSession }, 0)},
		{label: "  bytes per session, live heap after a full GC", value: num(func(r *scaleResult) float64 { return r.HeapPerSession }, 0)},
		{label: "  the leader's CPU (cores)", value: num(func(r *scaleResult) float64 { return r.LeaderCores }, 2), prec: 2},
		{label: fmt.Sprintf("%d sessions of coordd's Go client (shared connections): failed", first.GRPCSessions), text: func(r *scaleResult) string {
			if r.GRPCSessions == 0 {
				return "-"
			}
			return fmt.Sprint(r.GRPCSessionsLost)
		}},
		{label: "  bytes per session, resident (all servers)", value: num(func(r *scaleResult) float64 { return r.GRPCBytesPerSession }, 0)},
		{label: "  the leader's CPU (cores)", value: num(func(r *scaleResult) float64 { return r.GRPCLeaderCores }, 2), prec: 2},
		{label: "this machine: a process sleeping 10 ms at a time woke late by up to (ms), and > 500 ms late (times)", text: func(r *scaleResult) string {
			return fmt.Sprintf("%.0f, %d", r.MachineWorstLateMS, r.MachineLate500)
		}},
		{label: "leader changes, expired sessions (whole run)", text: func(r *scaleResult) string {
			return fmt.Sprintf("%d, %d", r.LeaderChanges, r.ExpiredSessions)
		}},
	}
	head := "| |"
	sep := "|---|"
	for _, r := range rs {
		head += " " + r.System + " |"
		sep += "---|"
	}
	ratio := len(rs) > 1
	if ratio {
		head += fmt.Sprintf(" %s/%s |", rs[len(rs)-1].System, rs[0].System)
		sep += "---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	for _, rw := range rows {
		line := "| " + rw.label + " |"
		var vals []float64
		var oks []bool
		for i := range rs {
			r := &rs[i]
			if rw.text != nil {
				line += " " + rw.text(r) + " |"
				continue
			}
			v, ok := rw.value(r)
			vals, oks = append(vals, v), append(oks, ok)
			if ok {
				line += " " + strings.TrimSpace(fmt.Sprintf("%.*f", rw.prec, v)) + " |"
			} else {
				line += " - |"
			}
		}
		if ratio {
			if rw.text == nil && oks[0] && oks[len(oks)-1] && vals[0] != 0 {
				line += fmt.Sprintf(" %.2f |", vals[len(vals)-1]/vals[0])
			} else {
				line += " |"
			}
		}
		fmt.Fprintln(w, line)
	}
	for _, r := range rs {
		fmt.Fprintf(w, "\n%s: started %s, load average %s.", r.System, r.Started, r.Load)
	}
	fmt.Fprintln(w)
}

// msOrNone prints a latency, or "-" when no sample made it.
func msOrNone(ms float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", ms)
}
