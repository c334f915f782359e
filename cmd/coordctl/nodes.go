package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/coordd/coordd/client"
)

// The verbs on znodes: create, get, set, delete, deleteall, ls, stat, sync.

var createVerb = &verb{
	name:     "create",
	synopsis: "create [-e] [-s] [-c] [-t ttl_ms] [-a ACL] [-f FILE] PATH [DATA]",
	summary:  "create a node and print its path",
	detail: `
The data is DATA, or the contents of FILE with -f (-f - reads standard
input, except in the shell); without either the node has no data.

-e makes an ephemeral node, which lives as long as the session that made it.
In a one-shot call that session is coordctl's own: coordctl prints the path,
then keeps the session (and the node) alive until it is interrupted (SIGINT
or SIGTERM), and closes it, which deletes the node. In the shell the node
lives until the shell exits.

-s appends a 10-digit sequence number to the name (the printed path is the
real one). -c makes a container node, which the server deletes once it has
had children and is empty again. -t makes a TTL node, which the server
deletes when it has had no children and no change for ttl_ms milliseconds.
-e, -c and -t exclude each other; -s combines with any of them.

-a gives the node an ACL, written as setacl takes it (world:anyone:r,
auth::cdrwa, digest:USER:HASH:cdrwa, ...); without it everyone may do
anything with the node. Creating needs CREATE on the parent.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		eph := fs.Bool("e", false, "make an ephemeral node (see above)")
		seq := fs.Bool("s", false, "make a sequential node")
		ctr := fs.Bool("c", false, "make a container node")
		ttl := fs.Int64("t", 0, "make a TTL node living `ttl_ms` milliseconds without change")
		file := fs.String("f", "", "read the data from `FILE` (- for standard input)")
		aclFlag := fs.String("a", "", "the node's `ACL` (scheme:id:perms,...)")
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 2); err != nil {
				return err
			}
			var acl []client.ACL
			if *aclFlag != "" {
				var err error
				if acl, err = client.ParseACL(*aclFlag); err != nil {
					return x.usage("-a: %v", err)
				}
			}
			ttlSet := false
			fs.Visit(func(f *flag.Flag) { ttlSet = ttlSet || f.Name == "t" })
			mode := client.CreateMode{Sequential: *seq, ACL: acl}
			kinds := 0
			if *eph {
				kinds++
				mode.Kind = client.Ephemeral
			}
			if *ctr {
				kinds++
				mode.Kind = client.Container
			}
			if ttlSet {
				kinds++
				mode.Kind = client.TTL
				mode.TTL = time.Duration(*ttl) * time.Millisecond
			}
			if kinds > 1 {
				return x.usage("-e, -c and -t exclude each other")
			}
			path := args[0]
			data, err := x.data(args[1:], *file)
			if err != nil {
				return err
			}
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			name, err := cl.Create(ctx, path, data, mode)
			if err != nil {
				return nodeError(path, err)
			}
			if err := x.out.emit(pathJSON{Path: name}, func(w io.Writer) { fmt.Fprintln(w, name) }); err != nil {
				return err
			}
			if mode.Kind != client.Ephemeral || x.inShell {
				return nil
			}
			fmt.Fprintf(x.stderr, "coordctl: ephemeral node %s lives while this coordctl runs; interrupt it (Ctrl-C) to delete the node\n", name)
			select {
			case <-x.ctx.Done():
				return nil
			case <-x.sess.expired:
				return fmt.Errorf("%s: the session expired, the ephemeral node is gone", name)
			}
		}
	},
}

var getVerb = &verb{
	name:     "get",
	synopsis: "get [-s] [-w] [-sync] PATH",
	summary:  "print a node's data",
	detail: `
Text output is the data followed by a newline. -o json gives the data in
base64 ("data") with the node's stat and, when the data is valid UTF-8, the
same data as text ("text"). -s also prints the stat (text). -w leaves a
data watch: coordctl prints the data, waits for the node's next change or
deletion, prints that event and exits. In the shell -w does not wait: the
shell goes on, and the event is printed when it fires ("WATCHER:: TYPE PATH
zxid=...", or its JSON).

The server a command reaches answers from its own copy, which may lag the
leader by a few milliseconds. -sync makes the read linearizable: it sees
every write acknowledged, to any client, before the command began (a sync
and the read, sent together; Client.SyncGet).`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		withStat := fs.Bool("s", false, "also print the stat")
		watch := fs.Bool("w", false, "wait for and print the next change of the node")
		synced := fs.Bool("sync", false, "sync first, so that the read is linearizable")
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 1); err != nil {
				return err
			}
			path := args[0]
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			var (
				data []byte
				stat client.Stat
				ch   <-chan client.Event
			)
			switch {
			case *watch:
				if *synced {
					err = cl.Sync(ctx, path)
				}
				if err == nil {
					data, stat, ch, err = cl.GetW(ctx, path)
				}
			case *synced:
				data, stat, err = cl.SyncGet(ctx, path)
			default:
				data, stat, err = cl.Get(ctx, path)
			}
			if err != nil {
				return nodeError(path, err)
			}
			if data == nil {
				data = []byte{}
			}
			err = x.out.emit(newGetJSON(path, data, stat), func(w io.Writer) {
				w.Write(data)
				fmt.Fprintln(w)
				if *withStat {
					writeStat(w, stat)
				}
			})
			if err != nil || !*watch {
				return err
			}
			return x.watchEvent(ch)
		}
	},
}

var setVerb = &verb{
	name:     "set",
	synopsis: "set [-s] [-v VERSION] [-f FILE] PATH [DATA]",
	summary:  "replace a node's data",
	detail: `
The data is DATA, or the contents of FILE with -f (-f - reads standard
input, except in the shell). With -v the write applies only if the node's
version is VERSION (-1: any).
Text output is empty unless -s asks for the new stat; -o json prints the path
and the new stat.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		withStat := fs.Bool("s", false, "print the new stat")
		version := fs.Int("v", -1, "expected `version` (-1: any)")
		file := fs.String("f", "", "read the data from `FILE` (- for standard input)")
		return func(x *cmd, args []string) error {
			min := 2
			if *file != "" {
				min = 1
			}
			if err := x.nargs(args, min, 2); err != nil {
				return err
			}
			v, err := version32(x, *version)
			if err != nil {
				return err
			}
			path := args[0]
			data, err := x.data(args[1:], *file)
			if err != nil {
				return err
			}
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			stat, err := cl.Set(ctx, path, data, v)
			if err != nil {
				return nodeError(path, err)
			}
			return x.out.emit(statJSON{Path: path, Stat: stat}, func(w io.Writer) {
				if *withStat {
					writeStat(w, stat)
				}
			})
		}
	},
}

// maxFileData is the most data -f reads: the most any coordd server admits
// (fsm.DataSizeCap; a server's own --max-data-size is usually less, and it
// refuses a larger write with BadArguments).
const maxFileData = 64 << 20

// data is a create's or set's data: the DATA argument (rest holds it, if
// given) or, with -f, the contents of file ("-": standard input).
func (x *cmd) data(rest []string, file string) ([]byte, error) {
	switch {
	case file == "":
		if len(rest) == 0 {
			return nil, nil
		}
		return []byte(rest[0]), nil
	case len(rest) > 0:
		return nil, x.usage("-f and DATA exclude each other")
	case file == "-" && x.inShell:
		return nil, x.usage("-f -: standard input holds the shell's commands; give a file")
	}
	var r io.Reader = x.stdin
	name := "standard input"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("-f: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > maxFileData {
			return nil, fmt.Errorf("-f: %s: %d bytes, more than a znode may hold (%d MiB)", file, fi.Size(), maxFileData>>20)
		}
		r, name = f, file
	}
	b, err := io.ReadAll(io.LimitReader(r, maxFileData+1))
	if err != nil {
		return nil, fmt.Errorf("-f: reading %s: %w", name, err)
	}
	if len(b) > maxFileData {
		return nil, fmt.Errorf("-f: %s: more than a znode may hold (%d MiB)", name, maxFileData>>20)
	}
	return b, nil
}

func version32(x *cmd, v int) (int32, error) {
	if v < -1 || v > 1<<31-1 {
		return 0, x.usage("-v: version %d out of range", v)
	}
	return int32(v), nil
}

var deleteVerb = &verb{
	name:     "delete",
	synopsis: "delete [-v VERSION] PATH",
	summary:  "delete a node (it must have no children)",
	detail:   `With -v the delete applies only if the node's version is VERSION (-1: any).`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		version := fs.Int("v", -1, "expected `version` (-1: any)")
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 1); err != nil {
				return err
			}
			v, err := version32(x, *version)
			if err != nil {
				return err
			}
			path := args[0]
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			if err := cl.Delete(ctx, path, v); err != nil {
				return nodeError(path, err)
			}
			return x.out.emit(pathJSON{Path: path}, func(io.Writer) {})
		}
	},
}

var deleteallVerb = &verb{
	name:     "deleteall",
	synopsis: "deleteall [-force] PATH",
	summary:  "delete a node and all its descendants",
	detail: `
Deletes depth first: every child's subtree, then the node. Nodes that vanish
meanwhile are skipped; children created meanwhile are deleted too (a few
retries).

deleteall / deletes every node but the root and ZooKeeper's own /zookeeper
subtree. It asks first in an interactive shell; elsewhere (a one-shot call,
commands from a pipe or file) it is refused unless -force is given.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		force := fs.Bool("force", false, "delete everything when PATH is /, without asking")
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 1); err != nil {
				return err
			}
			path := args[0]
			if path == "/" && !*force {
				if !x.interactive {
					return x.usage("deleteall / deletes every node: add -force to mean it")
				}
				yes, err := x.confirm("delete every node of the cluster? [y/N] ")
				if err != nil {
					return err
				}
				if !yes {
					return &cliError{code: "NotConfirmed", status: 1, msg: "deleteall /: not confirmed; nothing deleted"}
				}
			}
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			if err := deleteAll(ctx, cl, path, true); err != nil {
				return err
			}
			return x.out.emit(pathJSON{Path: path}, func(io.Writer) {})
		}
	},
}

// zookeeperNode is ZooKeeper's own subtree, which deleteall / leaves alone
// (as ZooKeeper's deleteall does: the server refuses to delete it).
const zookeeperNode = "zookeeper"

// deleteAll deletes path's subtree depth first. Only for the top node is a
// missing node an error.
func deleteAll(ctx context.Context, cl *client.Client, path string, top bool) error {
	for attempt := 0; ; attempt++ {
		children, _, err := cl.Children(ctx, path)
		if err != nil {
			if !top && errors.Is(err, client.ErrNoNode) {
				return nil
			}
			return nodeError(path, err)
		}
		for _, c := range children {
			if path == "/" && c == zookeeperNode {
				continue
			}
			if err := deleteAll(ctx, cl, childPath(path, c), false); err != nil {
				return err
			}
		}
		if path == "/" {
			return nil
		}
		err = cl.Delete(ctx, path, -1)
		switch {
		case err == nil, errors.Is(err, client.ErrNoNode):
			return nil
		case errors.Is(err, client.ErrNotEmpty) && attempt < 5:
			continue
		}
		return nodeError(path, err)
	}
}

func childPath(parent, child string) string {
	if parent == "/" {
		return "/" + child
	}
	return parent + "/" + child
}

var lsVerb = &verb{
	name:     "ls",
	synopsis: "ls [-R] [-s] [-w] PATH",
	summary:  "list a node's children",
	detail: `
Text output is one child name per line. -R lists every descendant's full
path instead, sorted. -s also prints the node's stat. -w leaves a child
watch: coordctl prints the children, waits for a child to be created or
deleted (or the node to be deleted), prints that event and exits. In the
shell -w does not wait: the shell goes on, and the event is printed when it
fires ("WATCHER:: TYPE PATH zxid=...", or its JSON).`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		recursive := fs.Bool("R", false, "list every descendant, by full path")
		withStat := fs.Bool("s", false, "also print the node's stat")
		watch := fs.Bool("w", false, "wait for and print the next change of the children")
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 1); err != nil {
				return err
			}
			if *recursive && *watch {
				return x.usage("-R and -w exclude each other")
			}
			path := args[0]
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			var (
				children []string
				stat     client.Stat
				ch       <-chan client.Event
			)
			switch {
			case *watch:
				children, stat, ch, err = cl.ChildrenW(ctx, path)
			case *recursive:
				children, stat, err = descendants(ctx, cl, path)
			default:
				children, stat, err = cl.Children(ctx, path)
			}
			if err != nil {
				return nodeError(path, err)
			}
			if children == nil {
				children = []string{}
			}
			out := lsJSON{Path: path, Children: children}
			if *withStat {
				out.Stat = &stat
			}
			err = x.out.emit(out, func(w io.Writer) {
				for _, c := range children {
					fmt.Fprintln(w, c)
				}
				if *withStat {
					writeStat(w, stat)
				}
			})
			if err != nil || !*watch {
				return err
			}
			return x.watchEvent(ch)
		}
	},
}

// descendants lists the full paths of every descendant of root, sorted, and
// root's stat. Nodes deleted during the walk are skipped.
func descendants(ctx context.Context, cl *client.Client, root string) ([]string, client.Stat, error) {
	var out []string
	var rootStat client.Stat
	var walk func(p string, top bool) error
	walk = func(p string, top bool) error {
		children, stat, err := cl.Children(ctx, p)
		if err != nil {
			if !top && errors.Is(err, client.ErrNoNode) {
				return nil
			}
			return err
		}
		if top {
			rootStat = stat
		}
		for _, c := range children {
			cp := childPath(p, c)
			out = append(out, cp)
			if err := walk(cp, false); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root, true); err != nil {
		return nil, client.Stat{}, err
	}
	sort.Strings(out)
	return out, rootStat, nil
}

var statVerb = &verb{
	name:     "stat",
	synopsis: "stat [-w] PATH",
	summary:  "print a node's stat",
	detail: `
Text output is zkCli's: one "field = value" line per field. -w leaves an
exists watch: coordctl prints the stat, waits for the node's next change or
deletion, prints that event and exits. On a node that does not exist, -w
reports so on stderr and waits for the node's creation (exit status 0). In
the shell -w does not wait: the shell goes on, and the event is printed when
it fires ("WATCHER:: TYPE PATH zxid=...", or its JSON).`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		watch := fs.Bool("w", false, "wait for and print the next change of the node")
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 1); err != nil {
				return err
			}
			path := args[0]
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			var (
				stat client.Stat
				ok   bool
				ch   <-chan client.Event
			)
			if *watch {
				stat, ok, ch, err = cl.ExistsW(ctx, path)
			} else {
				stat, ok, err = cl.Exists(ctx, path)
			}
			if err != nil {
				return nodeError(path, err)
			}
			if !ok {
				if !*watch {
					return nodeError(path, client.ErrNoNode)
				}
				if x.bg != nil {
					fmt.Fprintf(x.stderr, "coordctl: %s: node does not exist; the watch reports its creation\n", path)
				} else {
					fmt.Fprintf(x.stderr, "coordctl: %s: node does not exist; waiting for its creation\n", path)
				}
			} else {
				err := x.out.emit(statJSON{Path: path, Stat: stat}, func(w io.Writer) { writeStat(w, stat) })
				if err != nil {
					return err
				}
			}
			if !*watch {
				return nil
			}
			return x.watchEvent(ch)
		}
	},
}

var syncVerb = &verb{
	name:     "sync",
	synopsis: "sync PATH",
	summary:  "bring the server up to the leader (in a shell, a sync then a read is linearizable; see get -sync)",
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 1); err != nil {
				return err
			}
			path := args[0]
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			if err := cl.Sync(ctx, path); err != nil {
				return nodeError(path, err)
			}
			return x.out.emit(pathJSON{Path: path}, func(io.Writer) {})
		}
	},
}
