package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/coordd/coordd/client"
)

// The verbs of ACLs and authentication: getacl, setacl, addauth, whoami,
// digest; and --auth, which authenticates a command's session.

// authEnv holds --auth's default: credentials in the environment stay out of
// the process list and of shell histories.
const authEnv = "COORD_AUTH"

// authList is --auth: SCHEME:CREDENTIALS, any number of times.
type authList []string

func (a *authList) String() string { return "" } // never show credentials

func (a *authList) Set(s string) error {
	if _, _, ok := strings.Cut(s, ":"); !ok {
		return errors.New("want SCHEME:CREDENTIALS, such as digest:user:password")
	}
	*a = append(*a, s)
	return nil
}

// authenticate adds --auth's identities (and $COORD_AUTH's) to a new
// session. An error names the scheme, never the credentials.
func (c *cli) authenticate(ctx context.Context, cl *client.Client) error {
	auths := c.auth
	if len(auths) == 0 {
		if env := os.Getenv(authEnv); env != "" {
			for _, a := range strings.Split(env, ",") {
				if err := auths.Set(a); err != nil {
					return fmt.Errorf("$%s: %w", authEnv, err)
				}
			}
		}
	}
	for _, a := range auths {
		scheme, cred, _ := strings.Cut(a, ":")
		if err := cl.AddAuth(ctx, scheme, []byte(cred)); err != nil {
			return fmt.Errorf("authenticating (%s): %w", scheme, err)
		}
	}
	return nil
}

type aclJSON struct {
	Path string       `json:"path"`
	ACL  []client.ACL `json:"acl"`
	Stat client.Stat  `json:"stat"`
}

var getaclVerb = &verb{
	name:     "getacl",
	synopsis: "getacl [-s] PATH",
	summary:  "print a node's ACL, one scheme:id:perms entry a line",
	detail: `
Each line is one entry as setacl takes it: scheme:id:perms, perms being
letters of cdrwa (create, delete, read, write, admin). Reading an ACL needs
READ or ADMIN on the node; without ADMIN a digest's hash reads x. -s also
prints the stat (aclVersion counts the ACL's changes); -o json gives the
entries with perms as ZooKeeper's bits (read 1, write 2, create 4, delete
8, admin 16) and the stat.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		withStat := fs.Bool("s", false, "also print the stat")
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
			acl, stat, err := cl.GetACL(ctx, path)
			if err != nil {
				return nodeError(path, err)
			}
			return x.out.emit(aclJSON{Path: path, ACL: acl, Stat: stat}, func(w io.Writer) {
				for _, a := range acl {
					fmt.Fprintln(w, a)
				}
				if *withStat {
					writeStat(w, stat)
				}
			})
		}
	},
}

var setaclVerb = &verb{
	name:     "setacl",
	synopsis: "setacl [-s] [-v ACLVERSION] PATH ACL",
	summary:  "replace a node's ACL",
	detail: `
ACL is entries separated by commas, each scheme:id:perms as zkCli's setAcl
takes them, perms being letters of cdrwa:

  world:anyone:r                 everyone may read
  digest:USER:HASH:cdrwa         whoever authenticates as USER (coordctl digest
                                 USER:PASSWORD prints USER:HASH)
  auth::cdrwa                    every identity this session authenticated as
                                 (--auth, addauth)
  ip:10.0.0.0/8:rw               clients from those IPv4 addresses
  x509:CN=app,O=example:r        clients with that verified certificate

Replacing an ACL needs ADMIN on the node. With -v the change applies only if
the node's ACL version (aclVersion) is ACLVERSION (-1: any). -s prints the
new stat.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		withStat := fs.Bool("s", false, "print the new stat")
		version := fs.Int("v", -1, "expected ACL `version` (-1: any)")
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 2, 2); err != nil {
				return err
			}
			v, err := version32(x, *version)
			if err != nil {
				return err
			}
			acl, err := client.ParseACL(args[1])
			if err != nil {
				return x.usage("%v", err)
			}
			path := args[0]
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			stat, err := cl.SetACL(ctx, path, acl, v)
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

var addauthVerb = &verb{
	name:     "addauth",
	synopsis: "addauth SCHEME CREDENTIALS",
	summary:  "authenticate the session (digest USER:PASSWORD)",
	detail: `
Adds an identity to the session for the rest of its life, as zkCli's
addauth: "addauth digest alice:secret" makes the session digest:alice:HASH,
which ACLs may name (and the super user's, if it is the servers'
--superdigest). It is mostly for the shell; a one-shot command is
authenticated with --auth or $COORD_AUTH instead. ip and x509 are the
connection's own identities: adding them changes nothing (x509 fails
without a verified client certificate); any other scheme fails with
AuthFailed.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 2, 2); err != nil {
				return err
			}
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			if err := cl.AddAuth(ctx, args[0], []byte(args[1])); err != nil {
				return fmt.Errorf("addauth %s: %w", args[0], err)
			}
			return nil
		}
	},
}

type whoamiJSON struct {
	Identities []client.Identity `json:"identities"`
}

var whoamiVerb = &verb{
	name:     "whoami",
	synopsis: "whoami",
	summary:  "print the session's identities, one scheme:id a line",
	detail: `
The connection's identities come first (ip, and x509 with a verified client
certificate), then those the session authenticated as (a digest by its user
name only; super for the super user).`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 0, 0); err != nil {
				return err
			}
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			ids, err := cl.WhoAmI(ctx)
			if err != nil {
				return err
			}
			return x.out.emit(whoamiJSON{Identities: ids}, func(w io.Writer) {
				for _, id := range ids {
					fmt.Fprintf(w, "%s:%s\n", id.Scheme, id.ID)
				}
			})
		}
	},
}

type digestJSON struct {
	Digest string `json:"digest"`
}

var digestVerb = &verb{
	name:     "digest",
	synopsis: "digest USER:PASSWORD",
	summary:  "print USER:HASH, the digest id of a user and password",
	detail: `
Prints user:base64(sha1(user:password)), as ZooKeeper computes it: the id of
a digest ACL entry (setacl PATH digest:USER:HASH:cdrwa) and what coordd's
--superdigest takes. With - it reads USER:PASSWORD from the first line of
standard input, keeping the password out of the process list. It needs no
server.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 1); err != nil {
				return err
			}
			up := args[0]
			if up == "-" {
				if x.inShell {
					return x.usage("-: standard input holds the shell's commands")
				}
				b, err := io.ReadAll(io.LimitReader(x.stdin, 64<<10))
				if err != nil {
					return fmt.Errorf("reading standard input: %w", err)
				}
				up, _, _ = strings.Cut(string(b), "\n")
				up = strings.TrimSuffix(up, "\r")
			}
			user, password, ok := strings.Cut(up, ":")
			if !ok {
				return x.usage("want USER:PASSWORD")
			}
			d := client.Digest(user, password)
			return x.out.emit(digestJSON{Digest: d}, func(w io.Writer) { fmt.Fprintln(w, d) })
		}
	},
}
