package chaos

import (
	"flag"
	"fmt"
)

// flagRaftLog chooses each server's Raft log store (coordd's --raft-log):
// "" leaves coordd's default, "wal" or "bolt" gives every server that
// store, and "mixed" gives them in turn, starting with wal, as in a cluster
// moving from one to the other one server at a time.
var flagRaftLog = flag.String("chaos.raft-log", "", "Raft log store of every server: wal, bolt, or mixed (alternating, wal first); default coordd's")

// raftLogArgs returns the --raft-log flag for node idx (0-based), if any.
func raftLogArgs(idx int) []string {
	switch *flagRaftLog {
	case "":
		return nil
	case "mixed":
		if idx%2 == 0 {
			return []string{"--raft-log", "wal"}
		}
		return []string{"--raft-log", "bolt"}
	}
	return []string{"--raft-log", *flagRaftLog}
}

// raftLogDesc says which stores the servers use, for the run's first line.
func raftLogDesc() string {
	if *flagRaftLog == "" {
		return "coordd's default raft log"
	}
	return fmt.Sprintf("raft log %s", *flagRaftLog)
}
