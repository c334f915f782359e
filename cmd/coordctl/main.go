// Command coordctl is the command-line client of coordd, with ZooKeeper
// zkCli's verbs in a scriptable form:
//
//	coordctl [global flags] VERB [verb flags] [ARGS]
//
// Each one-shot call opens a session, runs one verb and closes the session.
// With no verb (or with "shell") it opens an interactive shell on one session,
// in which every verb works on that same session. Results go to stdout, as
// text or as one JSON value per result (-o json); errors go to stderr as
// "coordctl: <message>" (with -o json as {"error": {"code", "message"}}),
// with exit status 1 for a failed operation, 2 for a usage error and 3 for a
// status that finds the cluster unhealthy.
//
// It speaks to the cluster only through package client, plus the unary Status
// and Sessions calls of the public API.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
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
	return newCLI(stdin, stdout, stderr, sig).main(args)
}

// newCLI makes an invocation with its I/O and interrupt signals.
func newCLI(stdin io.Reader, stdout, stderr io.Writer, sig <-chan os.Signal) *cli {
	return &cli{
		stdin:  stdin,
		stdout: &syncWriter{w: stdout, term: terminalOf(stdout)},
		stderr: &syncWriter{w: stderr},
		sig:    sig,
	}
}

// cli is one invocation of coordctl: its global settings, its I/O and, once
// opened, its session.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	sig            <-chan os.Signal

	servers        []string
	tlsFlags       tlsSettings
	tls            *tls.Config // nil: plaintext
	probe          tlsProbe    // which servers speak TLS, for the errors
	format         string
	timeout        time.Duration
	sessionTimeout time.Duration
	auth           authList // --auth: identities added to every new session

	inShell     bool       // running the shell: verbs do not block for ephemerals
	interactive bool       // the shell reads a terminal: it may ask questions
	lines       lineReader // where the shell reads its commands (and answers)
	bg          *shellJobs // in the shell: the watches left running
	errJSON     bool       // the running command asked for -o json: errors too
	// terminal makes the shell take stdin for a terminal (without line
	// editing), for tests.
	terminal bool
	sess     *session // nil until a verb needs it
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
	fs.StringVar(&c.tlsFlags.cacert, "cacert", os.Getenv("COORD_CACERT"), "")
	fs.StringVar(&c.tlsFlags.cert, "cert", os.Getenv("COORD_CERT"), "")
	fs.StringVar(&c.tlsFlags.key, "key", os.Getenv("COORD_KEY"), "")
	fs.StringVar(&c.format, "o", "text", "")
	fs.StringVar(&c.format, "output", "text", "")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "")
	fs.DurationVar(&c.sessionTimeout, "session-timeout", 10*time.Second, "")
	fs.Var(&c.auth, "auth", "")
	c.errJSON = wantsJSON(args)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printGlobalUsage(c.stdout)
			return 0
		}
		return c.report(&usageError{msg: err.Error()})
	}
	c.errJSON = c.format == "json"
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
			addr, err := normalizeServer(s)
			if err != nil {
				return usagef("", "%v", err)
			}
			if !slices.Contains(c.servers, addr) {
				c.servers = append(c.servers, addr)
			}
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
	cfg, err := c.tlsFlags.tlsConfig()
	if err != nil {
		return err
	}
	c.tls = cfg
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
	// term is the terminal w writes to, if any (w may be readline's
	// writer in front of it): help is wrapped to its width.
	term *os.File
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
