package rpc

import "log/slog"

// hashicorp/raft warns of three things that are Raft working as it should
// when a server joins a running cluster, and when one comes back behind
// the others: a server that waits to be added has no configuration, so its
// elections abort ("no known peers"); once added, the leader's first
// append names an entry beyond the end of its log, which it rejects
// ("failed to get previous log"), and the leader backs off and sends the
// earlier entries or a snapshot ("appendEntries rejected, sending older
// logs"). They are info here, so that such a start logs nothing at warn.
// A failure to replicate is still logged as one (peerlog.go), and a log
// that cannot be read where the entry should be stays a warning.

// catchUpLevel returns the level to log one of hashicorp/raft's messages
// at: info for the routine catch-up messages above, lvl for the rest.
func catchUpLevel(msg string, lvl slog.Level, args []any) slog.Level {
	switch msg {
	case "no known peers, aborting election", "appendEntries rejected, sending older logs":
		return min(lvl, slog.LevelInfo)
	case "failed to get previous log":
		// Routine only when the entry is beyond this server's log: it
		// is behind, and the leader sends what it lacks.
		prev, okPrev := uintArg(args, "previous-index")
		last, okLast := uintArg(args, "last-index")
		if okPrev && okLast && prev > last {
			return min(lvl, slog.LevelInfo)
		}
	}
	return lvl
}

// uintArg finds the value of key among hclog's alternating key/value
// arguments, as hashicorp/raft passes log indexes (uint64).
func uintArg(args []any, key string) (uint64, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == key {
			v, ok := args[i+1].(uint64)
			return v, ok
		}
	}
	return 0, false
}
