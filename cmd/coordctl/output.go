package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/coordd/coordd/client"
)

// printer writes a verb's results to stdout, as text or as one JSON value
// per result (one line each).
type printer struct {
	w    io.Writer
	json bool
	// eventPrefix starts each text line of a watch event: "WATCHER:: " for
	// the events of watches the shell left running.
	eventPrefix string
}

// emit writes v as JSON, or calls text to write it as text.
func (p *printer) emit(v any, text func(w io.Writer)) error {
	if !p.json {
		text(p.w)
		return nil
	}
	enc := json.NewEncoder(p.w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// The JSON shapes of the results. Stats use client.Stat's own JSON form
// (ZooKeeper's field names; "kind" and "ttlMs" added for non-persistent
// nodes).

type pathJSON struct {
	Path string `json:"path"`
}

// getJSON is get's result. Data is always there, in base64 (scripts decode
// it); Text is the same data as a string when it is valid UTF-8, for people
// and for jq.
type getJSON struct {
	Path string      `json:"path"`
	Data []byte      `json:"data"` // base64
	Text *string     `json:"text,omitempty"`
	Stat client.Stat `json:"stat"`
}

// newGetJSON is get's result for a node's data and stat.
func newGetJSON(path string, data []byte, stat client.Stat) getJSON {
	out := getJSON{Path: path, Data: data, Stat: stat}
	if utf8.Valid(data) {
		text := string(data)
		out.Text = &text
	}
	return out
}

type statJSON struct {
	Path string      `json:"path"`
	Stat client.Stat `json:"stat"`
}

type lsJSON struct {
	Path     string       `json:"path"`
	Children []string     `json:"children"`
	Stat     *client.Stat `json:"stat,omitempty"`
}

type eventJSON struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Zxid int64  `json:"zxid"`
}

type statusJSON struct {
	Leader  string       `json:"leader"`
	Level   int64        `json:"level"` // the cluster's command level
	Members []memberJSON `json:"members"`
}

type memberJSON struct {
	ID      string `json:"id"`
	Address string `json:"address"` // an unreachable member's as last registered; "" when never
	Voter   bool   `json:"voter"`   // false: a non-voter (an observer)
	Role    string `json:"role"`
	Applied int64  `json:"applied"` // 0 when unreachable
	Version string `json:"version"` // "" when unreachable
	Level   int64  `json:"level"`   // the command level its coordd applies; 0 when unreachable
}

type sessionsJSON struct {
	Sessions []sessionJSON `json:"sessions"`
}

type sessionJSON struct {
	ID         string `json:"id"` // hex, as ZooKeeper prints session ids
	TimeoutMs  int64  `json:"timeoutMs"`
	Ephemerals int64  `json:"ephemerals"`
	Server     string `json:"server"`
}

// hexID formats a session id or zxid as zkCli does.
func hexID(v int64) string { return fmt.Sprintf("0x%x", v) }

// writeStat prints a stat as zkCli's stat does: one "field = value" line
// each, zxids and the owner in hex, times as dates; the kind and TTL of
// container and TTL nodes follow, and the end of a lock-delay.
func writeStat(w io.Writer, s client.Stat) {
	fmt.Fprintf(w, "cZxid = %s\n", hexID(s.Czxid))
	fmt.Fprintf(w, "ctime = %s\n", formatMillis(s.Ctime))
	fmt.Fprintf(w, "mZxid = %s\n", hexID(s.Mzxid))
	fmt.Fprintf(w, "mtime = %s\n", formatMillis(s.Mtime))
	fmt.Fprintf(w, "pZxid = %s\n", hexID(s.Pzxid))
	fmt.Fprintf(w, "cversion = %d\n", s.Cversion)
	fmt.Fprintf(w, "dataVersion = %d\n", s.Version)
	fmt.Fprintf(w, "aclVersion = %d\n", s.Aversion)
	fmt.Fprintf(w, "ephemeralOwner = %s\n", hexID(s.EphemeralOwner))
	fmt.Fprintf(w, "dataLength = %d\n", s.DataLength)
	fmt.Fprintf(w, "numChildren = %d\n", s.NumChildren)
	if s.Kind == client.Container || s.Kind == client.TTL {
		fmt.Fprintf(w, "kind = %s\n", s.Kind)
	}
	if s.TTL > 0 {
		fmt.Fprintf(w, "ttl = %d ms\n", s.TTL.Milliseconds())
	}
	if s.LockDelayUntil > 0 {
		fmt.Fprintf(w, "lockDelayUntil = %s (the owner's session expired; the node is kept for a lock-delay until then%s)\n",
			formatMillis(s.LockDelayUntil), untilNote(s.LockDelayUntil))
	}
}

// untilNote says how far ahead a time (ms since the epoch) is: ", 8.2s from
// now", or "" once it has passed.
func untilNote(ms int64) string {
	if d := time.Until(time.UnixMilli(ms)); d > 0 {
		return ", " + d.Round(100*time.Millisecond).String() + " from now"
	}
	return ""
}

func formatMillis(ms int64) string {
	return time.UnixMilli(ms).Format("Mon Jan 02 15:04:05 MST 2006")
}

// emitEvent prints one watch event.
func (p *printer) emitEvent(ev client.Event) error {
	return p.emit(eventJSON{Type: ev.Type.String(), Path: ev.Path, Zxid: ev.Zxid}, func(w io.Writer) {
		fmt.Fprintf(w, "%s%s %s zxid=%s\n", p.eventPrefix, ev.Type, ev.Path, hexID(ev.Zxid))
	})
}

func writeStatus(w io.Writer, st statusJSON) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tVOTER\tROLE\tAPPLIED\tVERSION")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, dash(m.Address), yesNo(m.Voter), m.Role, appliedText(m.Role, m.Applied), dash(m.Version))
	}
	tw.Flush()
	leader := st.Leader
	if leader == "" {
		leader = "none"
	}
	fmt.Fprintf(w, "leader: %s\n", leader)
	if lv := lowestLevel(st); lv > st.Level {
		fmt.Fprintf(w, "command level: %d (every member applies %d: the leader raises it soon)\n", st.Level, lv)
	} else if st.Level > 0 {
		fmt.Fprintf(w, "command level: %d\n", st.Level)
	}
}

// lowestLevel is the lowest command level a reachable member applies (0:
// none reachable).
func lowestLevel(st statusJSON) int64 {
	var lv int64
	for _, m := range st.Members {
		if m.Level > 0 && (lv == 0 || m.Level < lv) {
			lv = m.Level
		}
	}
	return lv
}

// appliedText is a member's applied zxid as status and member list print
// it: "-" when the member did not answer (0 would read as a member that
// applied nothing).
func appliedText(role string, applied int64) string {
	if role == "unreachable" {
		return "-"
	}
	return fmt.Sprint(applied)
}

func writeSessions(w io.Writer, ss sessionsJSON) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tTIMEOUT\tEPHEMERALS\tSERVER")
	for _, s := range ss.Sessions {
		server := s.Server
		if server == "" {
			server = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.ID, time.Duration(s.TimeoutMs)*time.Millisecond, s.Ephemerals, server)
	}
	tw.Flush()
}
