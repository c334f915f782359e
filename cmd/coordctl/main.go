// Command coordctl is the command-line client of coordd, with ZooKeeper
// zkCli's verbs in a scriptable form:
//
//	coordctl [global flags] VERB [verb flags] [ARGS]
//
// Each one-shot call opens a session, runs one verb and closes the session.
// With no verb (or with "shell") it opens an interactive shell on one session,
// in which every verb works on that same session. Results go to stdout, as
// text or as one JSON value per result (-o json); errors go to stderr as
// "coordctl: <message>", with exit status 1 for a failed operation and 2 for a
// usage error.
//
// It speaks to the cluster only through package client, plus the unary Status
// and Sessions calls of the public API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultServers = "127.0.0.1:2181"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is coordctl's entry point: it runs one invocation and returns the exit
// status. SIGINT and SIGTERM interrupt the running verb (and end a shell).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	return runWith(args, stdin, stdout, stderr, sig)
}

// runWith is run with the interrupt signals coming from sig (nil: none), so
// that tests can interrupt a blocking verb.
func runWith(args []string, stdin io.Reader, stdout, stderr io.Writer, sig <-chan os.Signal) int {
	c := &cli{
		stdin:  stdin,
		stdout: &syncWriter{w: stdout},
		stderr: &syncWriter{w: stderr},
		sig:    sig,
	}
	return c.main(args)
}

// cli is one invocation of coordctl: its global settings, its I/O and, once
// opened, its session.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	sig            <-chan os.Signal

	servers        []string
	format         string
	timeout        time.Duration
	sessionTimeout time.Duration

	inShell bool     // running the shell: verbs do not block for ephemerals
	sess    *session // nil until a verb needs it
}

// usageError is a mistake in the command line (exit status 2). verb names the
// verb whose usage should be shown ("" for the global usage).
type usageError struct {
	verb string
	msg  string
}

func (e *usageError) Error() string { return e.msg }

func usagef(verb, format string, a ...any) error {
	return &usageError{verb: verb, msg: fmt.Sprintf(format, a...)}
}

// errHelp is returned when -h was asked for: the usage was printed, exit 0.
var errHelp = errors.New("help requested")

func (c *cli) main(args []string) int {
	fs := flag.NewFlagSet("coordctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	servers := os.Getenv("COORD_SERVERS")
	if servers == "" {
		servers = defaultServers
	}
	fs.StringVar(&servers, "servers", servers, "")
	fs.StringVar(&c.format, "o", "text", "")
	fs.StringVar(&c.format, "output", "text", "")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "")
	fs.DurationVar(&c.sessionTimeout, "session-timeout", 10*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printGlobalUsage(c.stdout)
			return 0
		}
		return c.report(&usageError{msg: err.Error()})
	}
	if err := c.checkGlobals(servers); err != nil {
		return c.report(err)
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] == "shell" {
		if len(rest) > 1 {
			if rest[1] == "-h" || rest[1] == "--help" || rest[1] == "-help" {
				printVerbUsage(c.stdout, shellVerb)
				return 0
			}
			return c.report(usagef("shell", "shell: unexpected argument %q", rest[1]))
		}
		return c.shell()
	}
	err := c.oneShot(rest)
	return c.report(err)
}

func (c *cli) checkGlobals(servers string) error {
	if err := checkFormat("", c.format); err != nil {
		return err
	}
	for _, s := range strings.Split(servers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.servers = append(c.servers, s)
		}
	}
	if len(c.servers) == 0 {
		return usagef("", "--servers: no server given")
	}
	if c.timeout <= 0 {
		return usagef("", "--timeout must be positive")
	}
	if c.sessionTimeout <= 0 {
		return usagef("", "--session-timeout must be positive")
	}
	return nil
}

func checkFormat(verb, f string) error {
	if f != "text" && f != "json" {
		return usagef(verb, "-o: unknown output format %q (want json or text)", f)
	}
	return nil
}

// oneShot runs one verb, interruptibly, then closes the session if the verb
// opened one.
func (c *cli) oneShot(argv []string) error {
	_, err := c.interruptible(func(ctx context.Context) error { return c.execute(ctx, argv) })
	if c.sess != nil {
		if cerr := c.sess.close(c.timeout); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// interruptible runs f with a context that SIGINT or SIGTERM cancels.
// terminated reports a SIGTERM.
func (c *cli) interruptible(f func(ctx context.Context) error) (terminated bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	for {
		select {
		case err := <-done:
			return terminated, err
		case s := <-c.sig:
			if c.routeSignal(s) {
				continue // the verb handles its signals (lock, elect)
			}
			if s == syscall.SIGTERM {
				terminated = true
			}
			cancel()
		}
	}
}

// report prints err as coordctl reports errors and returns the exit status.
func (c *cli) report(err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, errHelp) {
		return 0
	}
	var xs *exitStatusError
	if errors.As(err, &xs) {
		if xs.msg != "" {
			fmt.Fprintf(c.stderr, "coordctl: %s\n", errText(xs))
		}
		return xs.code
	}
	var ue *usageError
	if errors.As(err, &ue) {
		// One write, so that a shell prompt is redrawn only once.
		var b strings.Builder
		fmt.Fprintf(&b, "coordctl: %s\n", ue.msg)
		help := "coordctl help"
		if c.inShell {
			help = "help"
		}
		if ue.verb == "" {
			fmt.Fprintf(&b, "Run '%s' for usage.\n", help)
		} else if v := lookupVerb(ue.verb); v != nil {
			fmt.Fprintf(&b, "usage: %s\n", v.synopsis)
			fmt.Fprintf(&b, "Run '%s %s' for details.\n", help, v.name)
		}
		io.WriteString(c.stderr, b.String())
		return 2
	}
	fmt.Fprintf(c.stderr, "coordctl: %s\n", errText(err))
	return 1
}

// errText renders an error for a human: package prefixes ("client: ",
// "tree: ", ...) are dropped, and so is a server message that repeats the
// error's own text ("node does not exist: node does not exist").
func errText(err error) string {
	s := err.Error()
	for _, p := range []string{"client: ", "tree: ", "fsm: ", "rpc: ", "session: "} {
		s = strings.ReplaceAll(s, p, "")
	}
	for {
		parts := strings.Split(s, ": ")
		changed := false
		for i := 0; i+1 < len(parts); i++ {
			if parts[i] == parts[i+1] {
				parts = append(parts[:i+1], parts[i+2:]...)
				changed = true
				break
			}
		}
		s = strings.Join(parts, ": ")
		if !changed {
			break
		}
	}
	return s
}

func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// syncWriter serialises writes from the verb and the state reporter.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
