package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coordd/coordd/client"
)

// helperSessionTimeout is what the killed client processes ask for.
const helperSessionTimeout = 2 * time.Second

// sessionsWork: live clients' ephemerals never vanish; the ephemerals of
// client processes killed with SIGKILL vanish within session timeout + tick
// of the cluster being healthy.
type sessionsWork struct {
	e    *env
	seed int64
	live int
	cnt  counters // ok: checks passed / helpers killed; fail: checks or helpers that could not run

	mu       sync.Mutex
	problems []string
	dead     []*deadSession
	expired  map[int]time.Duration
}

type deadSession struct {
	k       int
	session int64
	timeout time.Duration
	path    string
	killAt  time.Duration
	goneAt  time.Duration
	gone    bool
}

func newSessionsWork(e *env, seed int64, live int) *sessionsWork {
	return &sessionsWork{e: e, seed: seed, live: live, expired: map[int]time.Duration{}}
}

func (s *sessionsWork) name() string        { return "sessions" }
func (s *sessionsWork) counters() *counters { return &s.cnt }

func (s *sessionsWork) setup(ctx context.Context, cl *client.Client) error {
	return createAll(ctx, cl, "/sess", s.e.dataACL())
}

func (s *sessionsWork) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

func (s *sessionsWork) run(ctx context.Context) {
	var wg sync.WaitGroup
	// Live clients and their checker.
	var lives []*client.Client
	for k := 0; k < s.live; k++ {
		cl, _, err := s.e.newClient(ctx, fmt.Sprintf("sessions-live-%d", k))
		if err != nil {
			s.problem("live client %d: %v", k, err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 3*opTimeout)
		_, err = cl.Create(cctx, fmt.Sprintf("/sess/live-%d", k), nil, client.CreateMode{Kind: client.Ephemeral, ACL: s.e.creatorACL()})
		cancel()
		if err != nil {
			s.problem("live client %d: create its ephemeral: %v", k, err)
			continue
		}
		lives = append(lives, cl)
		// Ends when the client is closed at the end of the run.
		go func(k int, cl *client.Client) {
			for ev := range cl.States() {
				if ev.State == client.StateExpired {
					at := s.e.since()
					s.mu.Lock()
					s.expired[k] = at
					s.mu.Unlock()
					s.problem("live client %d (session %#x): session EXPIRED at %v (%v)", k, cl.SessionID(), at.Round(time.Millisecond), ev.Err)
				}
				if ev.State == client.StateExpired || ev.State == client.StateClosed {
					return
				}
			}
		}(k, cl)
	}
	wg.Add(2)
	go func() { defer wg.Done(); s.checkLive(ctx, len(lives)) }()
	go func() { defer wg.Done(); s.killLoop(ctx) }()
	wg.Wait()
}

// watcherClient keeps a client for polling, replacing it when it ends.
type watcherClient struct {
	e    *env
	name string
	cl   *client.Client
}

func (w *watcherClient) get(ctx context.Context) *client.Client {
	if w.cl == nil {
		cl, _, err := w.e.newClient(ctx, w.name)
		if err != nil {
			return nil
		}
		w.cl = cl
	}
	return w.cl
}

// exists runs sync+exists (a linearizable existence check).
func (w *watcherClient) exists(ctx context.Context, path string) (bool, error) {
	cl := w.get(ctx)
	if cl == nil {
		return false, errors.New("no client")
	}
	octx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := cl.Sync(octx, path)
	var ok bool
	if err == nil {
		_, ok, err = cl.Exists(octx, path)
	}
	if ended(err) {
		w.cl = nil
	}
	return ok, err
}

func (s *sessionsWork) checkLive(ctx context.Context, n int) {
	w := &watcherClient{e: s.e, name: "sessions-observer"}
	for i := 0; i < 100000 && ctx.Err() == nil; i++ {
		sleep(ctx, time.Second)
		for k := 0; k < n && ctx.Err() == nil; k++ {
			path := fmt.Sprintf("/sess/live-%d", k)
			ok, err := w.exists(ctx, path)
			switch {
			case err != nil:
				s.cnt.fail.Add(1)
			case ok:
				s.cnt.ok.Add(1)
			default:
				s.mu.Lock()
				_, exp := s.expired[k]
				s.mu.Unlock()
				if !exp {
					s.problem("ephemeral %s of live client %d vanished (seen absent at %v) though its session never expired", path, k, s.e.since().Round(time.Millisecond))
				}
				s.cnt.ok.Add(1)
			}
		}
	}
}

func (s *sessionsWork) killLoop(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(s.seed), 4000))
	var wg sync.WaitGroup
	defer wg.Wait()
	for k := 0; k < 100 && ctx.Err() == nil; k++ {
		sleep(ctx, time.Duration(2000+rng.IntN(3000))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		d, err := s.startAndKill(ctx, k, time.Duration(rng.IntN(1000))*time.Millisecond)
		if err != nil {
			s.cnt.fail.Add(1)
			s.e.logf("sessions: helper %d: %v", k, err)
			continue
		}
		s.cnt.ok.Add(1)
		s.mu.Lock()
		s.dead = append(s.dead, d)
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.pollGone(d)
		}()
	}
}

// startAndKill runs a client process that creates an ephemeral, then
// SIGKILLs it after wait.
func (s *sessionsWork) startAndKill(ctx context.Context, k int, wait time.Duration) (*deadSession, error) {
	path := fmt.Sprintf("/sess/dead-%d", k)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChaosHelperClient$", "-test.v=false", "-test.timeout=5m")
	cmd.Env = append(append(append(os.Environ(), s.e.c.helperEnv()...), s.e.c.helperAuthEnv()...), "COORDD_CHAOS_HELPER=1",
		"COORDD_SESSION_TIMEOUT="+helperSessionTimeout.String(),
		"COORDD_EPHEMERAL="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(20 * time.Second):
		return nil, errors.New("client process not ready after 20s")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d := &deadSession{k: k, path: path}
	var ms int64
	if _, err := fmt.Sscanf(line, "ready %d %d", &d.session, &ms); err != nil {
		return nil, fmt.Errorf("client process said %q", strings.TrimSpace(line))
	}
	d.timeout = time.Duration(ms) * time.Millisecond
	sleep(ctx, wait)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	d.killAt = s.e.since()
	return d, nil
}

// pollGone polls until the dead session's ephemeral is gone (bounded).
func (s *sessionsWork) pollGone(d *deadSession) {
	w := &watcherClient{e: s.e, name: fmt.Sprintf("sessions-poll-%d", d.k)}
	defer func() {
		if w.cl != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = w.cl.Close(ctx)
			cancel()
		}
	}()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		ok, err := w.exists(context.Background(), d.path)
		if err == nil && !ok {
			s.mu.Lock()
			d.gone, d.goneAt = true, s.e.since()
			s.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *sessionsWork) check(ctx context.Context, cl *client.Client, v *verdict) {
	tick := serverTiming.Tick
	const slack = time.Second // polling, sync and scheduling on 2 loaded cores
	end := s.e.since()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		v.failf("%s", p)
	}
	checked, lenient, worst := 0, 0, time.Duration(0)
	for _, d := range s.dead {
		bound := d.timeout + tick + slack
		if !d.gone {
			v.failf("ephemeral %s of killed session %#x (killed at %v) still present at the end (%v)", d.path, d.session, d.killAt.Round(time.Millisecond), end.Round(time.Millisecond))
			continue
		}
		if early := d.killAt + d.timeout/2; d.goneAt < early {
			v.failf("ephemeral %s of killed session %#x vanished %v after the kill, before half its timeout %v", d.path, d.session, (d.goneAt - d.killAt).Round(time.Millisecond), d.timeout)
		}
		h, ok := s.e.tl.healthyFrom(d.killAt, bound, end)
		if !ok {
			lenient++
			continue
		}
		checked++
		if lag := d.goneAt - h; lag > worst {
			worst = lag
		}
		if d.goneAt > h+bound {
			v.failf("ephemeral %s of killed session %#x (timeout %v) vanished %v after the kill and %v after the cluster was healthy: more than timeout + tick (+%v slack)",
				d.path, d.session, d.timeout, (d.goneAt - d.killAt).Round(time.Millisecond), (d.goneAt - h).Round(time.Millisecond), slack)
		}
	}
	v.notef("%d live clients (%d expired); %d clients killed: %d timed against a healthy cluster (slowest %v from healthy to gone, bound %v + %v + %v), %d overlapped faults (only checked to vanish)",
		s.live, len(s.expired), len(s.dead), checked, worst.Round(time.Millisecond), helperSessionTimeout, tick, slack, lenient)
	if len(s.dead) == 0 {
		v.notef("no client process was killed (run too short?)")
	}
}

// waitDead waits (bounded) for the dead sessions' ephemerals to vanish, for
// the final check.
func (s *sessionsWork) waitDead(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		all := true
		for _, x := range s.dead {
			if !x.gone {
				all = false
			}
		}
		s.mu.Unlock()
		if all {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
