package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/coordd/coordd/client"
)

// verb is one coordctl command, the same in one-shot mode and in the shell.
type verb struct {
	name     string
	synopsis string
	summary  string
	detail   string
	// define declares the verb's flags on fs and returns the function that
	// runs the verb with the remaining arguments.
	define func(fs *flag.FlagSet) func(x *cmd, args []string) error
}

// verbs is every verb, in the order help lists them (filled in init, since
// help refers to it).
var verbs []*verb

func init() {
	verbs = []*verb{
		createVerb, getVerb, setVerb, deleteVerb, deleteallVerb, lsVerb, statVerb, syncVerb,
		getaclVerb, setaclVerb, addauthVerb, whoamiVerb, digestVerb,
		watchVerb, statusVerb, sessionsVerb, memberVerb, leaderVerb, snapshotVerb, copyVerb, benchVerb, lockVerb, electVerb, locksVerb,
		certsVerb, shellVerb, helpVerb, versionVerb,
	}
}

func lookupVerb(name string) *verb {
	for _, v := range verbs {
		if v.name == name {
			return v
		}
	}
	return nil
}

// cmd is one running verb: its invocation, its context (which an interrupt
// cancels) and its output.
type cmd struct {
	*cli
	ctx  context.Context
	verb *verb
	out  *printer
}

// deadline returns the context of one step of the verb, bounded by --timeout.
func (x *cmd) deadline() (context.Context, context.CancelFunc) {
	return context.WithTimeout(x.ctx, x.timeout)
}

// connected gives the command's deadline and its session (opened if
// needed); on error the deadline is already released.
func (x *cmd) connected() (context.Context, context.CancelFunc, *client.Client, error) {
	ctx, cancel := x.deadline()
	cl, err := x.client(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, cl, nil
}

// client returns the session, opening it if needed.
func (x *cmd) client(ctx context.Context) (*client.Client, error) {
	return x.session(ctx)
}

// usage returns a usage error of this verb.
func (x *cmd) usage(format string, a ...any) error {
	return usagef(x.verb.name, "%s: %s", x.verb.name, fmt.Sprintf(format, a...))
}

// nargs checks the number of positional arguments.
func (x *cmd) nargs(args []string, min, max int) error {
	switch {
	case len(args) < min:
		return x.usage("missing argument")
	case len(args) > max:
		return x.usage("unexpected argument %q", args[max])
	}
	return nil
}

// newVerbFlags makes the flag set of v, with the -o flag every verb accepts.
func newVerbFlags(v *verb, format *string) (*flag.FlagSet, func(x *cmd, args []string) error) {
	fs := flag.NewFlagSet(v.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(format, "o", *format, "output `format`: json or text")
	run := v.define(fs)
	return fs, run
}

// execute parses argv (a verb and its arguments) and runs the verb.
func (c *cli) execute(ctx context.Context, argv []string) error {
	c.errJSON = c.format == "json" || wantsJSON(argv[1:])
	v := lookupVerb(argv[0])
	if v == nil {
		return usagef("", "unknown verb %q", argv[0])
	}
	format := c.format
	fs, run := newVerbFlags(v, &format)
	if err := parseFlags(fs, argv[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printVerbUsage(c.stdout, v)
			return errHelp
		}
		return usagef(v.name, "%s: %v", v.name, err)
	}
	args := fs.Args()
	// -o may also end the command line: "get /a -o json" (but not a
	// command run by lock or elect after "--").
	if n := len(args); n >= 3 && !slices.Contains(args, "--") && (args[n-2] == "-o" || args[n-2] == "--o") && (args[n-1] == "json" || args[n-1] == "text") {
		format, args = args[n-1], args[:n-2]
	}
	if err := checkFormat(v.name, format); err != nil {
		return err
	}
	c.errJSON = format == "json"
	x := &cmd{cli: c, ctx: ctx, verb: v, out: &printer{w: c.stdout, json: format == "json"}}
	return run(x, args)
}

var helpVerb = &verb{
	name:     "help",
	synopsis: "help [VERB]",
	summary:  "show the usage of coordctl or of one verb",
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 0, 1); err != nil {
				return err
			}
			if len(args) == 0 && x.inShell {
				printShellUsage(x.stdout)
				return nil
			}
			if len(args) == 0 {
				printGlobalUsage(x.stdout)
				return nil
			}
			v := lookupVerb(args[0])
			if v == nil {
				return x.usage("unknown verb %q", args[0])
			}
			printVerbUsage(x.stdout, v)
			return nil
		}
	},
}

var versionVerb = &verb{
	name:     "version",
	synopsis: "version",
	summary:  "print coordctl's version",
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 0, 0); err != nil {
				return err
			}
			return x.out.emit(struct {
				Version string `json:"version"`
			}{buildVersion()}, func(w io.Writer) {
				fmt.Fprintf(w, "coordctl %s\n", buildVersion())
			})
		}
	},
}

var shellVerb = &verb{
	name:     "shell",
	synopsis: "shell",
	summary:  "open an interactive shell on one session (the default with no verb)",
	detail: `
Every verb but shell works in the shell, on the shell's one session; quit or exit (or
end of input) leaves it, closing the session. Arguments may be quoted with
"..." or '...'. Ctrl-C interrupts the running command (a watch, say).

On a terminal the shell offers line editing, history (kept in
$HOME/.coordctl_history; answers to its questions are not kept) and Tab
completion of verbs, sub-commands, flags and node paths (the children of
the typed parent, listed through the shell's session: get /ap<Tab>, ls
/app/j<Tab>). Otherwise it reads commands line by line from
stdin, runs them in order and exits at end of input with status 1 if any
command failed, else 0; so (echo 'create -e /a x'; sleep 30) | coordctl keeps
/a for 30 seconds. Connection state changes are reported on stderr.

No command of the shell waits for a watch: get -w, ls -w and stat -w set
theirs and the shell goes on, and so does watch when the commands come from
a pipe or file (on a terminal it runs until Ctrl-C). Each event is printed
when it fires, as zkCli does: "WATCHER:: TYPE PATH zxid=..." (with -o json,
the event's JSON); the events that fired before the shell ends are printed
before it exits.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			return x.usage("already in a shell")
		}
	},
}
