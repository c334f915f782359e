package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/chzyer/readline"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/rpc/apipb"
)

// The verbs that run a command under a recipe: lock (a mutex or a
// semaphore) and elect (leader election); and locks, which lists the
// contenders of such a path.

// exitLost is the exit status of lock and elect when the lock (or the
// leadership) was lost while CMD ran: EX_TEMPFAIL of sysexits.h.
const exitLost = 75

// exitStatusError ends coordctl with a given exit status, printing msg (if
// any) as an error.
type exitStatusError struct {
	code int
	msg  string
}

func (e *exitStatusError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// signalRoutes maps a running invocation (*cli) to the channel of the verb
// that handles signals itself (lock, elect): while it is registered, the
// signals coming from the invocation's signal channel go there instead of
// cancelling the verb.
var signalRoutes sync.Map

// routeSignals sends the invocation's signals to ch until the returned
// function is called.
func (c *cli) routeSignals(ch chan os.Signal) (stop func()) {
	signalRoutes.Store(c, ch)
	return func() { signalRoutes.Delete(c) }
}

// routeSignal hands s to the verb that takes the signals itself, if one
// runs, and reports whether it did.
func (c *cli) routeSignal(s os.Signal) bool {
	v, ok := signalRoutes.Load(c)
	if !ok {
		return false
	}
	select {
	case v.(chan os.Signal) <- s:
	default: // the verb is far behind: drop rather than block the caller
	}
	return true
}

// forwardedSignals are the signals lock and elect forward to CMD. SIGINT and
// SIGTERM come through the invocation's signal channel; the others are
// caught by the verb itself while it runs.
var (
	forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
	extraSignals     = []os.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
)

// runSemantics is the help text shared by lock and elect.
const runSemantics = `
CMD runs with coordctl's environment plus the token variable, and with
coordctl's stdin (none in the shell), stdout and stderr. The signals SIGINT,
SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 that coordctl receives are
forwarded to CMD. Unless stdin is a terminal, CMD runs in a process group of
its own and the signals go to that whole group (so its children get them
too); on a terminal CMD stays in the foreground group, where the terminal's
own Ctrl-C reaches it directly as well.

If the lock may be lost while CMD runs (the session is suspended, expired or
was closed, or the node was deleted), coordctl prints "coordctl: lock lost" (or
"leadership lost") on stderr, sends CMD (its group) SIGTERM and, if it is
still running after --grace, SIGKILL. When CMD ends, coordctl
releases the lock and closes its session.

The session is suspended before the leader can expire it and hand the lock
to the next waiter: when the leader has confirmed nothing the session sent
in the last T - V - M (T: --session-timeout; V: the server's vouch
interval, half its tick; M: max(T/50, 50ms)), so the lock cannot pass on
before V + M later. The SIGKILL must land before that: --grace is capped by
what is left until the session's earliest expiry, less M (about V after a
suspension: 500ms with coordd's default 1s tick), and coordctl warns at the
start when an explicit --grace is longer than V. A disconnection alone does
not lose the lock: the session moves to another server and stays confirmed.
With a server too old to vouch, the lock counts as lost at every
disconnection and --grace is not capped.

While waiting for the lock, SIGINT, SIGTERM, SIGHUP and SIGQUIT cancel the
wait (the waiting node is removed) and coordctl exits with 128 + the
signal's number (130 for SIGINT, 143 for SIGTERM); SIGUSR1 and SIGUSR2 are
ignored until CMD runs.

The verb uses a session of its own, even in the shell (the recipes must be
the only reader of their session's state changes), with --session-timeout.

If coordctl itself is killed (SIGKILL, a crash), CMD does not run on beside
the next holder's CMD: on Linux the kernel kills CMD with coordctl (the
parent-death signal), and on any Unix a reaper (/bin/sh, in a process group
of its own) kills CMD's whole process group with SIGKILL as soon as
coordctl is gone. What can still outlive coordctl: processes that left
CMD's group (setsid, daemons); when stdin is a terminal, CMD's children
(only CMD itself is killed then, and only on Linux); everything, if the
reaper is killed too. The lock is freed only when the session expires. The
fencing token is the protection that holds in every case: a resource that
refuses a token lower than the highest it has seen cannot be written by a
command that outlived its lock.

Exit status:
  CMD's own status when it exits by itself
  128+N   CMD was killed by signal N (as a shell reports it)
  75      the lock was lost while CMD ran (whatever CMD's status then)
  1       the lock was not taken: --try found it held, --wait ran out,
          or the cluster failed
  126     CMD could not be executed; 127: CMD was not found
  128+N   interrupted by signal N while waiting for the lock
  2       usage error`

var lockVerb = &verb{
	name:     "lock",
	synopsis: "lock [--wait D] [--try] [-s N] [--grace D] NAME -- CMD [ARGS...]",
	summary:  "run CMD while holding the lock NAME (a mutex, or with -s a semaphore)",
	detail: `
NAME is the lock's path; a NAME without a leading slash means /locks/NAME
(as elect's means /elections/NAME, and locks takes either).

Takes the lockrecipe Mutex on NAME (waiting in line behind earlier
contenders), runs CMD while holding it with its fencing token (the lock
node's creation zxid, which grows with every acquisition of the lock) in
COORD_LOCK_TOKEN, in decimal, and releases it when CMD ends. With -s N it
takes one of N permits of the semaphore NAME instead, and COORD_LOCK_TOKEN
is its lease node's creation zxid (growing with every permit handed out;
permits held together have different tokens). All users of a semaphore
must use the same N.

--wait bounds the wait (default: forever): when it runs out, coordctl exits
with status 1 and leaves no node behind. --try fails at once (status 1) if
the lock is held or others wait for it. Flags may also follow NAME, before
"--".
` + runSemantics,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		var o runOpts
		fs.DurationVar(&o.wait, "wait", 0, "give up after waiting `duration` for the lock (default forever)")
		try := fs.Bool("try", false, "fail at once if the lock is not free")
		n := fs.Int("s", 0, "take a permit of a semaphore of `N` holders instead of the mutex")
		fs.DurationVar(&o.grace, "grace", 5*time.Second, "after SIGTERM on a lost lock, wait `duration` before SIGKILL (capped so that the SIGKILL lands before the session can expire)")
		return func(x *cmd, args []string) error {
			name, argv, err := x.splitCommand(fs, args)
			if err != nil {
				return err
			}
			path, err := x.recipePath(name, lockrecipe.LockPath)
			if err != nil {
				return err
			}
			if *n < 0 {
				return x.usage("-s must be at least 1")
			}
			if err := o.check(x); err != nil {
				return err
			}
			o.graceSet = flagSet(fs, "grace")
			if *try && o.wait > 0 {
				return x.usage("--try and --wait exclude each other")
			}
			o.path, o.argv, o.try, o.tokenVar, o.what = path, argv, *try, "COORD_LOCK_TOKEN", "lock"
			return x.runHeld(o, func(s *lockrecipe.Session) heldRecipe {
				if *n > 0 {
					return semaphoreRecipe{lockrecipe.NewSemaphore(s, path, *n)}
				}
				return mutexRecipe{lockrecipe.NewMutex(s, path)}
			})
		}
	},
}

var electVerb = &verb{
	name:     "elect",
	synopsis: "elect [--value V] [--wait D] [--grace D] NAME -- CMD [ARGS...]",
	summary:  "campaign in the election NAME and run CMD while leader",
	detail: `
NAME is the election's path; a NAME without a leading slash means
/elections/NAME (as lock's means /locks/NAME, and locks takes either).

coordctl campaigns with --value (what the election reports as its leader,
and locks shows; default hostname:pid), waits until it leads, runs CMD with
the leader's fencing token (its candidate node's creation zxid) in
COORD_LEADER_TOKEN, in decimal, and resigns when CMD ends. --wait bounds the
wait for leadership (status 1 when it runs out).
` + strings.ReplaceAll(runSemantics, `"coordctl: lock lost" (or
"leadership lost")`, `"coordctl: leadership lost"`),
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		var o runOpts
		fs.DurationVar(&o.wait, "wait", 0, "give up after waiting `duration` for leadership (default forever)")
		value := fs.String("value", "", "the leader's `value` (default hostname:pid)")
		fs.DurationVar(&o.grace, "grace", 5*time.Second, "after SIGTERM on lost leadership, wait `duration` before SIGKILL (capped so that the SIGKILL lands before the session can expire)")
		return func(x *cmd, args []string) error {
			name, argv, err := x.splitCommand(fs, args)
			if err != nil {
				return err
			}
			if err := o.check(x); err != nil {
				return err
			}
			o.graceSet = flagSet(fs, "grace")
			path, err := x.recipePath(name, lockrecipe.ElectionPath)
			if err != nil {
				return err
			}
			v := *value
			if v == "" {
				host, _ := os.Hostname()
				v = fmt.Sprintf("%s:%d", host, os.Getpid())
			}
			o.path, o.argv, o.tokenVar, o.what = path, argv, "COORD_LEADER_TOKEN", "leadership"
			return x.runHeld(o, func(s *lockrecipe.Session) heldRecipe {
				return electionRecipe{lockrecipe.NewElection(s, path), v}
			})
		}
	},
}

// recipePath is the path of a lock's or an election's NAME by lockrecipe's
// naming rule (rule: lockrecipe.LockPath or ElectionPath); a NAME that can
// be no path is a usage error.
func (x *cmd) recipePath(name string, rule func(string) (string, error)) (string, error) {
	p, err := rule(name)
	var pe *lockrecipe.PathError
	if errors.As(err, &pe) {
		return "", x.usage("invalid name or path %q: %s", pe.Name, pe.Reason)
	}
	return p, err
}

// runOpts is one lock or elect invocation.
type runOpts struct {
	path     string
	argv     []string
	wait     time.Duration
	try      bool
	grace    time.Duration
	graceSet bool   // --grace was given
	tokenVar string // the environment variable of the token
	what     string // "lock" or "leadership", for messages
	// killBy says by when CMD must be dead once the lock is lost: before
	// the session can expire on the leader, less the client's margin
	// (false: unknown, the server does not vouch).
	killBy func() (time.Time, bool)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// sessionKillBy returns runOpts.killBy for the session of cl, and warns on
// w when an explicit --grace cannot be honoured after a suspension.
func (o *runOpts) sessionKillBy(cl *client.Client, w io.Writer) func() (time.Time, bool) {
	if conf := cl.Confirmation(); conf.Vouched && o.graceSet && o.grace > conf.VouchInterval {
		fmt.Fprintf(w, "coordctl: warning: --grace %v exceeds the %v between a suspension of the session and its earliest expiry; if the %s is lost that way, CMD gets SIGKILL after at most that\n",
			o.grace, conf.VouchInterval, o.what)
	}
	return func() (time.Time, bool) {
		conf := cl.Confirmation()
		if !conf.Vouched {
			return time.Time{}, false
		}
		return conf.EarliestExpiry().Add(-conf.Margin), true
	}
}

// graceLeft is how long CMD may take to exit after SIGTERM on a lost lock:
// --grace, capped by what is left before the session can expire.
func (o *runOpts) graceLeft(now time.Time) (grace time.Duration, capped bool) {
	if o.killBy == nil {
		return o.grace, false
	}
	by, ok := o.killBy()
	if !ok {
		return o.grace, false
	}
	left := max(by.Sub(now), 0)
	if left < o.grace {
		return left, true
	}
	return o.grace, false
}

func (o *runOpts) check(x *cmd) error {
	if o.wait < 0 {
		return x.usage("--wait must not be negative")
	}
	if o.grace < 0 {
		return x.usage("--grace must not be negative")
	}
	return nil
}

// splitCommand splits "NAME [flags] [--] CMD ARGS..." (flags before NAME
// were parsed already).
func (x *cmd) splitCommand(fs *flag.FlagSet, args []string) (string, []string, error) {
	if len(args) == 0 || args[0] == "" {
		return "", nil, x.usage("missing argument")
	}
	path := args[0]
	if err := parseFlags(fs, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printVerbUsage(x.stdout, x.verb)
			return "", nil, errHelp
		}
		return "", nil, x.usage("%v", err)
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return "", nil, x.usage("missing command (after --)")
	}
	return path, argv, nil
}

// heldRecipe is what lock and elect hold while CMD runs.
type heldRecipe interface {
	acquire(ctx context.Context, try bool) (lockrecipe.Token, error)
	release(ctx context.Context) error
	lost() <-chan struct{}
}

type mutexRecipe struct{ m *lockrecipe.Mutex }

func (r mutexRecipe) acquire(ctx context.Context, try bool) (lockrecipe.Token, error) {
	if try {
		return r.m.TryLock(ctx)
	}
	return r.m.Lock(ctx)
}
func (r mutexRecipe) release(ctx context.Context) error { return r.m.Unlock(ctx) }
func (r mutexRecipe) lost() <-chan struct{}             { return r.m.Lost() }

type semaphoreRecipe struct{ s *lockrecipe.Semaphore }

func (r semaphoreRecipe) acquire(ctx context.Context, try bool) (lockrecipe.Token, error) {
	if try {
		return r.s.TryAcquire(ctx)
	}
	return r.s.Acquire(ctx)
}
func (r semaphoreRecipe) release(ctx context.Context) error { return r.s.Release(ctx) }
func (r semaphoreRecipe) lost() <-chan struct{}             { return r.s.Lost() }

type electionRecipe struct {
	e     *lockrecipe.Election
	value string
}

func (r electionRecipe) acquire(ctx context.Context, _ bool) (lockrecipe.Token, error) {
	if err := r.e.Campaign(ctx, r.value); err != nil {
		return 0, err
	}
	return r.e.Token(), nil
}
func (r electionRecipe) release(ctx context.Context) error { return r.e.Resign(ctx) }
func (r electionRecipe) lost() <-chan struct{}             { return r.e.Lost() }

// signalNumber is the number of a syscall signal (0 for another kind).
func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// runHeld acquires the recipe that newRecipe builds on a session of its own,
// runs o.argv while holding it and returns CMD's exit status as an
// *exitStatusError (nil for 0).
func (x *cmd) runHeld(o runOpts, newRecipe func(*lockrecipe.Session) heldRecipe) (err error) {
	sigs := make(chan os.Signal, 16)
	defer x.cli.routeSignals(sigs)()
	signal.Notify(sigs, extraSignals...)
	defer signal.Stop(sigs)

	// The session: our own, so that the recipes alone read its states.
	cctx, cancel := x.deadline()
	cl, err := client.Connect(cctx, x.servers, x.clientOptions()...)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot connect to %s: %w", strings.Join(x.servers, ","), err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), x.timeout)
		defer cancel()
		if cerr := cl.Close(ctx); cerr != nil && err == nil {
			fmt.Fprintf(x.stderr, "coordctl: closing the session: %s\n", errText(cerr))
		}
	}()
	rec := newRecipe(lockrecipe.NewSession(cl))
	o.killBy = o.sessionKillBy(cl, x.stderr)

	// Acquire, interruptibly.
	tok, err, interrupted := x.acquire(o, rec, sigs)
	if err == nil && interrupted != nil {
		x.releaseHeld(o, rec)
	}
	if interrupted != nil {
		return &exitStatusError{code: 128 + signalNumber(interrupted)}
	}
	if err != nil {
		return err
	}

	code, lost := x.runCommand(o, tok, rec.lost(), sigs)
	if !lost {
		x.releaseHeld(o, rec)
	}
	if lost {
		code = exitLost
	}
	if code == 0 {
		return nil
	}
	return &exitStatusError{code: code}
}

// acquire takes the recipe, giving up when --wait runs out or on a
// terminating signal (returned as interrupted).
func (x *cmd) acquire(o runOpts, rec heldRecipe, sigs <-chan os.Signal) (tok lockrecipe.Token, err error, interrupted os.Signal) {
	ctx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	if o.wait > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, o.wait)
		defer c2()
	}
	type result struct {
		tok lockrecipe.Token
		err error
	}
	done := make(chan result, 1)
	go func() {
		tok, err := rec.acquire(ctx, o.try)
		done <- result{tok, err}
	}()
	for {
		select {
		case r := <-done:
			if r.err == nil {
				return r.tok, nil, interrupted
			}
			switch {
			case interrupted != nil:
			case errors.Is(r.err, lockrecipe.ErrLocked):
				r.err = fmt.Errorf("%s %s: held by another owner", o.what, o.path)
			case o.wait > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && x.ctx.Err() == nil:
				r.err = fmt.Errorf("%s %s: not acquired within %s", o.what, o.path, o.wait)
			default:
				r.err = fmt.Errorf("%s %s: %w", o.what, o.path, r.err)
			}
			return 0, r.err, interrupted
		case s := <-sigs:
			switch s {
			case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
				if interrupted == nil {
					interrupted = s
				}
				cancel()
			}
		}
	}
}

// releaseHeld releases the recipe, reporting (not returning) a failure: the
// session's close removes the node anyway.
func (x *cmd) releaseHeld(o runOpts, rec heldRecipe) {
	ctx, cancel := context.WithTimeout(context.Background(), x.timeout)
	defer cancel()
	if err := rec.release(ctx); err != nil {
		fmt.Fprintf(x.stderr, "coordctl: releasing %s %s: %s\n", o.what, o.path, errText(err))
	}
}

// runCommand runs o.argv with the token in its environment, forwarding
// sigs, and kills it when lost closes. It returns CMD's exit status as a
// shell reports it, and whether the lock was lost meanwhile.
func (x *cmd) runCommand(o runOpts, tok lockrecipe.Token, lost <-chan struct{}, sigs <-chan os.Signal) (code int, wasLost bool) {
	c := exec.Command(o.argv[0], o.argv[1:]...)
	c.Env = append(os.Environ(), o.tokenVar+"="+strconv.FormatInt(int64(tok), 10))
	if !x.inShell {
		c.Stdin = x.stdin
	}
	c.Stdout = outputOf(x.stdout)
	c.Stderr = outputOf(x.stderr)
	foreground := false
	if f, ok := c.Stdin.(*os.File); ok && readline.IsTerminal(int(f.Fd())) {
		foreground = true
	}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: !foreground}
	// Once CMD has exited, do not wait long for children that keep its
	// output pipes open.
	c.WaitDelay = max(o.grace, time.Second)
	// CMD (and its group) must not outlive a coordctl killed with SIGKILL.
	done, err := startTied(c, !foreground, func(err error) {
		fmt.Fprintf(x.stderr, "coordctl: warning: %s runs without a reaper (if coordctl is killed, its process group may outlive it): %s\n", o.argv[0], errText(err))
	})
	if err != nil {
		fmt.Fprintf(x.stderr, "coordctl: %s\n", errText(err))
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127, false
		}
		return 126, false
	}
	send := func(s os.Signal) {
		if foreground {
			_ = c.Process.Signal(s)
			return
		}
		if n, ok := s.(syscall.Signal); ok {
			_ = syscall.Kill(-c.Process.Pid, n)
		}
	}
	var (
		kill        <-chan time.Time
		interrupted = x.ctx.Done() // only when signals are not routed to us
	)
	for {
		select {
		case err := <-done:
			return exitCode(c, err), wasLost
		case s := <-sigs:
			send(s)
		case <-interrupted:
			interrupted = nil
			send(syscall.SIGTERM)
		case <-lost:
			lost = nil
			wasLost = true
			fmt.Fprintf(x.stderr, "coordctl: %s lost\n", o.what)
			grace, capped := o.graceLeft(time.Now())
			if capped {
				fmt.Fprintf(x.stderr, "coordctl: the session may expire soon: SIGKILL in %v unless CMD exits\n", grace.Round(time.Millisecond))
			}
			send(syscall.SIGTERM)
			t := time.NewTimer(grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			send(syscall.SIGKILL)
		}
	}
}

// exitCode is the status of an ended command as a shell reports it.
func exitCode(c *exec.Cmd, err error) int {
	if c.ProcessState == nil {
		return 1
	}
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return c.ProcessState.ExitCode()
}

// outputOf returns the file under w (through a syncWriter) when there is
// one, so that CMD writes to coordctl's own stdout or stderr directly, else w.
func outputOf(w io.Writer) io.Writer {
	inner := w
	if sw, ok := w.(*syncWriter); ok {
		sw.mu.Lock()
		inner = sw.w
		sw.mu.Unlock()
	}
	if f, ok := inner.(*os.File); ok {
		return f
	}
	return w
}

var locksVerb = &verb{
	name:     "locks",
	synopsis: "locks NAME",
	summary:  "list the holders and waiters of a lock, semaphore or election",
	detail: `
Lists the contenders of the lock (or semaphore, read/write lock, election)
NAME in queue order, holders first. NAME is a path, or a name as lock and
elect take it: the lock /locks/NAME or the election /elections/NAME,
whichever exists (if both do, give the path).

Each contender shows its role (holder or waiting), its node's name
(relative to the path), its session (hex), the server the session is
connected to (a member id, "-" when unknown), since (the node's creation
time, RFC 3339 in UTC), its token (the node's creation zxid, in decimal, as
COORD_LOCK_TOKEN gives it) and its value (an election candidate's --value,
the data of the node; "-" when it has none or it is not text). A path with
a "leases" child is a semaphore: every lease holds a permit, except the
lease of the contender at the head of its internal queue ("lock"), which
waits for one, followed by the rest of that queue. A contender whose
session expired but whose node the servers keep for a lock-delay (coordd
--lock-delay) still holds: a line after the table says until when. -o json
prints {"path":...,"holders":[...],"waiting":[...]}, each item
{"node":...,"session":...,"server":...,"since":...,"token":...} with
"value" when the node holds text and "lockDelayUntil" (RFC 3339) when it is
kept for a lock-delay. A path that does not exist has no contenders.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		return func(x *cmd, args []string) error {
			if err := x.nargs(args, 1, 1); err != nil {
				return err
			}
			name := args[0]
			if _, err := x.recipePath(name, lockrecipe.LockPath); err != nil {
				return err
			}
			ctx, cancel, cl, err := x.connected()
			if err != nil {
				return err
			}
			defer cancel()
			path, err := lockrecipe.Resolve(ctx, cl, name)
			if errors.Is(err, lockrecipe.ErrAmbiguousName) {
				lock, _ := lockrecipe.LockPath(name)
				election, _ := lockrecipe.ElectionPath(name)
				return x.usage("%q names both the lock %s and the election %s: give the path", name, lock, election)
			}
			if err != nil {
				return err
			}
			out, err := listContenders(ctx, cl, path)
			if err != nil {
				return err
			}
			// The servers of the sessions, from the Sessions call.
			var resp *apipb.SessionsResponse
			err = x.unary(func(ctx context.Context, c apipb.CoordClient) (err error) {
				resp, err = c.Sessions(ctx, &apipb.SessionsRequest{})
				return err
			})
			if err != nil {
				return fmt.Errorf("sessions: %w", err)
			}
			servers := map[string]string{}
			for _, s := range resp.GetSessions() {
				servers[hexID(s.GetId())] = s.GetServer()
			}
			for _, l := range [][]contenderJSON{out.Holders, out.Waiting} {
				for i := range l {
					l[i].Server = servers[l[i].Session]
				}
			}
			return x.out.emit(out, func(w io.Writer) { writeLocks(w, out) })
		}
	},
}

type locksJSON struct {
	Path    string          `json:"path"`
	Holders []contenderJSON `json:"holders"`
	Waiting []contenderJSON `json:"waiting"`
}

type contenderJSON struct {
	Node    string `json:"node"`
	Session string `json:"session"`
	Server  string `json:"server"`
	Since   string `json:"since"`
	Token   int64  `json:"token"`
	// Value is the node's data when it is text (an election candidate's
	// value); absent when empty or not UTF-8.
	Value string `json:"value,omitempty"`
	// LockDelayUntil is set when the contender's session expired and its
	// node is kept for a lock-delay until then (RFC 3339, UTC, ms).
	LockDelayUntil string `json:"lockDelayUntil,omitempty"`
}

// untilLayout is how locks prints the end of a lock-delay.
const untilLayout = "2006-01-02T15:04:05.000Z07:00"

// contenderJSONOf is one contender as locks prints it.
func contenderJSONOf(k lockrecipe.Contender) contenderJSON {
	c := contenderJSON{
		Node:    k.Node,
		Session: hexID(k.Session),
		Since:   k.Created.UTC().Format(time.RFC3339),
		Token:   int64(k.Token),
	}
	if utf8.Valid(k.Data) {
		c.Value = string(k.Data)
	}
	if !k.LockDelayUntil.IsZero() {
		c.LockDelayUntil = k.LockDelayUntil.UTC().Format(untilLayout)
	}
	return c
}

// listContenders reads the holders and waiters of the recipe at path.
func listContenders(ctx context.Context, cl *client.Client, path string) (locksJSON, error) {
	out := locksJSON{Path: path, Holders: []contenderJSON{}, Waiting: []contenderJSON{}}
	cs, err := lockrecipe.Inspect(ctx, cl, path)
	if err != nil {
		return out, err
	}
	for _, k := range cs.Holders {
		out.Holders = append(out.Holders, contenderJSONOf(k))
	}
	for _, k := range cs.Waiting {
		out.Waiting = append(out.Waiting, contenderJSONOf(k))
	}
	return out, nil
}

// maxValueText is the most runes of a contender's value locks prints as
// text (JSON has all of it).
const maxValueText = 40

// valueText is a contender's value in one table cell: "-" when there is
// none, quoted when it holds blanks or characters a terminal would act on,
// cut short after maxValueText runes.
func valueText(v string) string {
	if v == "" {
		return "-"
	}
	cut := false
	if r := []rune(v); len(r) > maxValueText {
		v, cut = string(r[:maxValueText]), true
	}
	plain := strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) < 0
	if !plain {
		v = strconv.Quote(v)
	}
	if cut {
		v += "…"
	}
	return v
}

func writeLocks(w io.Writer, out locksJSON) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tNODE\tSESSION\tSERVER\tSINCE\tTOKEN\tVALUE")
	row := func(role string, c contenderJSON) {
		server := c.Server
		if server == "" {
			server = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", role, c.Node, c.Session, server, c.Since, c.Token, valueText(c.Value))
	}
	for _, c := range out.Holders {
		row("holder", c)
	}
	for _, c := range out.Waiting {
		row("waiting", c)
	}
	tw.Flush()
	for _, l := range [][]contenderJSON{out.Holders, out.Waiting} {
		for _, c := range l {
			if c.LockDelayUntil != "" {
				fmt.Fprintf(w, "%s: session %s expired; the lock-delay keeps its node until %s\n", c.Node, c.Session, c.LockDelayUntil)
			}
		}
	}
}
