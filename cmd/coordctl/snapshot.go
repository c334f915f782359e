package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coordd/coordd/rpc/apipb"
	"github.com/coordd/coordd/rpc/backup"
)

// The snapshot verb: backups of a running cluster (save) and what a backup
// file holds (status). Restoring one seeds the data dirs of a new cluster,
// which is the server's business: coordd restore.

var snapshotVerb = &verb{
	name:     "snapshot",
	synopsis: "snapshot save [-force] FILE | status FILE",
	summary:  "save a backup of the cluster to FILE, or check a backup file",
	detail: `
snapshot save FILE streams a consistent backup from a server (the first that
answers): the server first catches up with everything committed when the
save began, so the backup holds every write acknowledged before it; writes
go on meanwhile. The file has a header (index, term, counts, the
membership), the state, and a SHA-256 over both; it is written to FILE.part,
checked, and only then renamed to FILE. An existing FILE is kept unless
-force is given. --timeout bounds the wait for each part of the stream, not
the whole save.

snapshot status FILE checks a backup file whole and prints its index, term,
znode count, size and checksum. A corrupt or truncated file is refused with
exit status 1 and code Corrupt, Truncated, NotBackup or Version.

To restore a backup into a new cluster, run coordd restore FILE on each of
its servers (see coordd restore -h, and docs/operations.md).`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		force := fs.Bool("force", false, "snapshot save: overwrite FILE if it exists")
		return func(x *cmd, args []string) error {
			args, err := x.interleaved(fs, args)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return x.usage("missing sub-command (save or status)")
			}
			switch args[0] {
			case "save":
				if len(args) != 2 {
					return x.usage("save takes one argument, FILE")
				}
				return x.snapshotSave(args[1], *force)
			case "status":
				if len(args) != 2 {
					return x.usage("status takes one argument, FILE")
				}
				if *force {
					return x.usage("-force goes with save only")
				}
				info, err := readBackup(args[1])
				if err != nil {
					return err
				}
				out := backupJSONOf(args[1], info)
				return x.out.emit(out, func(w io.Writer) { writeBackup(w, out) })
			}
			return x.usage("unknown sub-command %q (want save or status)", args[0])
		}
	},
}

// snapshotSave streams a backup into file.
func (x *cmd) snapshotSave(file string, force bool) error {
	if _, err := os.Stat(file); err == nil && !force {
		return &cliError{code: "Exists", status: 1, msg: fmt.Sprintf("snapshot save: %s exists (add -force to overwrite it)", file)}
	}
	part := file + ".part"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	keep := false
	defer func() {
		f.Close()
		if !keep {
			os.Remove(part)
		}
	}()
	// A day: the stream's own watchdog (each chunk within --timeout) bounds
	// a save that makes no progress.
	err = x.adminCall(24*time.Hour, func(ctx context.Context, c apipb.CoordClient) error {
		if err := f.Truncate(0); err != nil { // a server that failed midway
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return receiveSnapshot(ctx, c, f, x.timeout)
	})
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	info, _, err := backup.Read(f, st.Size())
	if err != nil {
		return backupError("snapshot save: the file received is not good", err)
	}
	if err := os.Rename(part, file); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	keep = true
	if d, err := os.Open(filepath.Dir(file)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	out := backupJSONOf(file, info)
	return x.out.emit(out, func(w io.Writer) {
		fmt.Fprintf(w, "saved %s: index %s, %d znodes, %d bytes, sha256 %s\n", file, hexID(out.Index), out.Znodes, out.Size, out.SHA256)
	})
}

// receiveSnapshot writes the SaveSnapshot stream to w, failing when no
// chunk arrives within idle.
func receiveSnapshot(ctx context.Context, c apipb.CoordClient, w io.Writer, idle time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchdog := time.AfterFunc(idle, cancel)
	defer watchdog.Stop()
	stream, err := c.SaveSnapshot(ctx, &apipb.SaveSnapshotRequest{})
	if err != nil {
		return err
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if !watchdog.Stop() && ctx.Err() != nil {
				return fmt.Errorf("no part of the backup arrived within %v: %w", idle, context.DeadlineExceeded)
			}
			return err
		}
		watchdog.Reset(idle)
		if _, err := w.Write(chunk.Data); err != nil {
			return &cliError{code: "Error", status: 1, msg: err.Error()}
		}
	}
}

// readBackup checks a backup file whole.
func readBackup(file string) (*backup.Info, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("snapshot status: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("snapshot status: %w", err)
	}
	info, _, err := backup.Read(f, st.Size())
	if err != nil {
		return nil, backupError("snapshot status: "+file, err)
	}
	return info, nil
}

// backupError codes a refused backup file: Corrupt, Truncated, NotBackup,
// Version.
func backupError(what string, err error) error {
	code := "Error"
	for _, c := range []struct {
		err  error
		code string
	}{{backup.ErrCorrupt, "Corrupt"}, {backup.ErrTruncated, "Truncated"}, {backup.ErrNotBackup, "NotBackup"}, {backup.ErrVersion, "Version"}} {
		if errors.Is(err, c.err) {
			code = c.code
		}
	}
	msg := strings.TrimPrefix(err.Error(), "backup: ")
	return &cliError{code: code, status: 1, msg: what + ": " + msg}
}

type backupJSON struct {
	File          string             `json:"file"`
	Format        uint32             `json:"format"`
	Index         int64              `json:"index"`
	Term          uint64             `json:"term"`
	Znodes        int64              `json:"znodes"`
	Sessions      int64              `json:"sessions"`
	Ephemerals    int64              `json:"ephemerals"`
	Size          int64              `json:"size"`
	BodySize      int64              `json:"bodySize"`
	SHA256        string             `json:"sha256"`
	ChecksumOK    bool               `json:"checksumOK"`
	CreatedUnixMs int64              `json:"createdUnixMs"`
	Server        string             `json:"server"`
	ServerVersion string             `json:"serverVersion"`
	ConfigIndex   uint64             `json:"configIndex"`
	Members       []backupMemberJSON `json:"members"`
}

type backupMemberJSON struct {
	ID          string `json:"id"`
	PeerAddress string `json:"peerAddress"`
	Voter       bool   `json:"voter"`
}

func backupJSONOf(file string, info *backup.Info) backupJSON {
	h := info.Header
	out := backupJSON{
		File: file, Format: info.Version, Index: h.GetIndex(), Term: h.GetTerm(), Znodes: h.GetZnodes(),
		Sessions: h.GetSessions(), Ephemerals: h.GetEphemerals(), Size: info.Size, BodySize: info.BodySize,
		SHA256: hex.EncodeToString(info.Checksum[:]), ChecksumOK: true, CreatedUnixMs: h.GetCreatedUnixMs(),
		Server: h.GetServerId(), ServerVersion: h.GetServerVersion(), ConfigIndex: h.GetConfigIndex(),
		Members: []backupMemberJSON{},
	}
	for _, m := range h.GetMembers() {
		out.Members = append(out.Members, backupMemberJSON{ID: m.GetId(), PeerAddress: m.GetPeerAddress(), Voter: m.GetVoter()})
	}
	return out
}

func writeBackup(w io.Writer, b backupJSON) {
	var members []string
	for _, m := range b.Members {
		kind := "voter"
		if !m.Voter {
			kind = "non-voter"
		}
		members = append(members, fmt.Sprintf("%s=%s (%s)", m.ID, m.PeerAddress, kind))
	}
	fmt.Fprintf(w, "file:       %s (format %d)\n", b.File, b.Format)
	fmt.Fprintf(w, "index:      %s (%d), term %d\n", hexID(b.Index), b.Index, b.Term)
	fmt.Fprintf(w, "znodes:     %d\n", b.Znodes)
	fmt.Fprintf(w, "sessions:   %d, with %d ephemerals (a restore drops them)\n", b.Sessions, b.Ephemerals)
	fmt.Fprintf(w, "size:       %d bytes (state %d)\n", b.Size, b.BodySize)
	fmt.Fprintf(w, "sha256:     %s (checksum OK)\n", b.SHA256)
	fmt.Fprintf(w, "taken:      %s by server %s (version %s)\n", formatMillis(b.CreatedUnixMs), b.Server, b.ServerVersion)
	fmt.Fprintf(w, "members:    %s (configuration index %d)\n", strings.Join(members, ", "), b.ConfigIndex)
}
