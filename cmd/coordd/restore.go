package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/coordd/coordd/rpc"
)

// runRestore is "coordd restore FILE --data-dir DIR --id ID --peers ...":
// it seeds the data dir of one server of a new cluster from a backup file
// (coordctl snapshot save) and exits. All logic lives in rpc.RestoreBackup.
func runRestore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("coordd restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		id       = fs.String("id", "1", "the id of the server whose data dir is seeded")
		dataDir  = fs.String("data-dir", "coordd-data", "the data dir to seed; it must hold no Raft state")
		peerAddr = fs.String("peer-addr", "", "this server's peer address (checked against --peers; without --peers, the single server's, default 127.0.0.1:2888)")
		peers    = fs.String("peers", "", "every voter of the new cluster as id=host:port,... (the same on each server restored); omit for a single-node cluster")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: coordd restore FILE [flags]

Seeds the data dir of one server of a NEW cluster from a backup file
(coordctl snapshot save). Run it on every server of the new cluster with the
same FILE and --peers and each server's own --id and --data-dir, then start
each with coordd and the same --id, --data-dir and addresses. The new
cluster holds the backup's znodes; the sessions in it are closed and their
ephemeral nodes deleted. A corrupt or truncated file is refused and nothing
is written.

Flags:
`)
		fs.PrintDefaults()
	}
	var file string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		if file != "" {
			fmt.Fprintf(stderr, "coordd restore: unexpected argument %q\n", fs.Arg(0))
			return 2
		}
		file, rest = fs.Arg(0), fs.Args()[1:]
	}
	if file == "" {
		fmt.Fprintln(stderr, "coordd restore: missing the backup FILE")
		fs.Usage()
		return 2
	}
	peerList, err := rpc.ParsePeers(*peers)
	if err != nil {
		fmt.Fprintf(stderr, "coordd restore: %s\n", startError(err))
		return 2
	}
	r, err := rpc.RestoreBackup(file, rpc.RestoreConfig{ID: *id, DataDir: *dataDir, PeerAddr: *peerAddr, Peers: peerList})
	if err != nil {
		fmt.Fprintf(stderr, "coordd restore: %s\n", startError(err))
		return 1
	}
	fmt.Fprintf(stdout, "restored %s into %s for server %s: %d znodes at index %d (backup index %d, taken by server %s); %d sessions closed, %d ephemerals deleted\n",
		file, *dataDir, *id, r.Znodes, r.Index, r.Backup.Header.GetIndex(), r.Backup.Header.GetServerId(), r.Sessions, r.Ephemerals)
	return 0
}
