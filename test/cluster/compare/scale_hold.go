package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Watches and sessions held (figures 7 and 8 of scale.go).

// rawSessions opens n minimal sessions over servers, from the source
// addresses in turn, 256 at a time.
func (s *scaler) rawSessions(servers []string, n int) ([]*rawSession, error) {
	out := make([]*rawSession, n)
	var from []net.Addr
	for _, ip := range s.c.sourceIPs {
		from = append(from, &net.TCPAddr{IP: net.ParseIP(ip)})
	}
	err := parallel(n, min(n, 256), func(_, i int) error {
		var err error
		out[i], err = dialRaw(servers[i%len(servers)], from[(i/len(servers))%len(from)], 30*time.Second)
		return err
	})
	if err != nil {
		for _, r := range out {
			if r != nil {
				r.close()
			}
		}
		return nil, err
	}
	return out, nil
}

// pinger pings every session every third of its timeout until stop.
func pinger(sessions []*rawSession, stop <-chan struct{}) {
	if len(sessions) == 0 {
		return
	}
	period := sessions[0].timeout / 3
	t := time.NewTicker(period / 10)
	defer t.Stop()
	next := 0
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		// A tenth of them each tick.
		for k := 0; k < (len(sessions)+9)/10; k++ {
			_ = sessions[next].ping()
			next = (next + 1) % len(sessions)
		}
	}
}

func sumMB(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// watchFigures registers the watches and measures memory and writes.
func (s *scaler) watchFigures() error {
	if (s.c.watches == 0 && s.c.recursive == 0) || s.c.znodes == 0 {
		return nil
	}
	throughput := func() (float64, error) {
		stop := make(chan struct{})
		wait, err := s.writeLoad(s.c.servers, 16, stop)
		if err != nil {
			return 0, err
		}
		time.Sleep(10 * time.Second)
		close(stop)
		samples, errs, took := wait()
		if errs > 0 {
			s.fail("%d writes failed in the watch figure", errs)
		}
		return figures(samples, errs, took).OpsPerS, nil
	}
	var err error
	if s.r.WritesNoWatches, err = throughput(); err != nil {
		return err
	}
	m0 := s.memory()
	sessions, err := s.rawSessions(s.c.servers, 64)
	if err != nil {
		return err
	}
	defer func() {
		for _, r := range sessions {
			r.closeSession()
		}
	}()
	stopPing := make(chan struct{})
	go pinger(sessions, stopPing)
	defer close(stopPing)
	// Recursive watches on the last znodes, one-shot ones on the first:
	// each znode has one watch at most.
	recursive := min(s.c.recursive, s.c.znodes)
	watches := min(s.c.watches, s.c.znodes-recursive)
	start := time.Now()
	err = parallel(len(sessions), len(sessions), func(_, i int) error {
		r := sessions[i]
		for k := i; k < watches; k += len(sessions) {
			if err := r.getDataWatch(flatPath(k)); err != nil {
				return err
			}
		}
		for k := i; k < recursive; k += len(sessions) {
			if err := r.addRecursiveWatch(flatPath(s.c.znodes - 1 - k)); err != nil {
				return err
			}
		}
		return r.waitReplies(5 * time.Minute)
	})
	if err != nil {
		return fmt.Errorf("registering watches: %w", err)
	}
	s.r.WatchRegisterS = time.Since(start).Seconds()
	s.r.Watches, s.r.Recursive = watches, recursive
	m1 := s.memory()
	n := float64(watches + recursive)
	s.r.BytesPerWatch = (sumMB(m1.anon) - sumMB(m0.anon)) * (1 << 20) / n
	if len(m0.heap) > 0 && len(m1.heap) == len(m0.heap) {
		s.r.HeapPerWatch = (sumMB(m1.heap) - sumMB(m0.heap)) * (1 << 20) / n
	}
	if s.r.WritesAndWatches, err = throughput(); err != nil {
		return err
	}
	for _, r := range sessions {
		s.r.Notifications += r.notified.Load()
	}
	s.logf("%d one-shot and %d persistent recursive watches set in %.1fs: %.0f B each (anonymous memory, all servers); writes/s %.0f without, %.0f with them (%d notifications)",
		watches, recursive, s.r.WatchRegisterS, s.r.BytesPerWatch, s.r.WritesNoWatches, s.r.WritesAndWatches, s.r.Notifications)
	return nil
}

// sessionFigures holds many sessions and measures them: ZooKeeper-protocol
// sessions, a connection each, opened by worker processes of at most
// holdPerWorker each (a process here may open 20 000 files), and on coordd
// also sessions of its Go client over shared connections (coordctl bench
// session-hold).
func (s *scaler) sessionFigures() error {
	if s.c.sessions > 0 {
		if err := s.zkSessionFigures(); err != nil {
			return err
		}
	}
	if s.c.grpcSessions > 0 && s.c.coordctl != "" {
		return s.grpcSessionFigures()
	}
	return nil
}

// holdPerWorker is the most sessions one worker process opens.
const holdPerWorker = 15000

func (s *scaler) zkSessionFigures() error {
	m0 := s.memory()
	start := time.Now()
	var workers []*holdWorker
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	for k := 0; k*holdPerWorker < s.c.sessions; k++ {
		n := min(holdPerWorker, s.c.sessions-k*holdPerWorker)
		// Each worker from addresses of its own: a source address has
		// about 28 000 ports in all.
		from := s.c.sourceIPs[k%len(s.c.sourceIPs)]
		w, err := startHoldWorker(s.c.servers, n, from)
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		if err := w.expect("open"); err != nil {
			return fmt.Errorf("opening sessions: %w", err)
		}
	}
	s.r.SessionsOpenS = time.Since(start).Seconds()
	s.r.Sessions = s.c.sessions
	s.logf("%d sessions open in %.1fs", s.c.sessions, s.r.SessionsOpenS)
	lead, _, err := leaderOf(s.c.servers)
	if err != nil {
		return err
	}
	cpu0, t0 := procCPU([]int{s.c.pids[lead]}), time.Now()
	time.Sleep(s.c.hold)
	s.r.LeaderCores = float64(procCPU([]int{s.c.pids[lead]})-cpu0) / float64(time.Since(t0))
	s.r.SessionsHeldS = time.Since(t0).Seconds()
	m1 := s.memory() // the pings go on meanwhile
	for _, w := range workers {
		lost, err := w.check()
		if err != nil {
			return err
		}
		s.r.SessionsExpired += lost
	}
	s.r.BytesPerSession = (sumMB(m1.anon) - sumMB(m0.anon)) * (1 << 20) / float64(s.c.sessions)
	if len(m0.heap) > 0 && len(m1.heap) == len(m0.heap) {
		s.r.HeapPerSession = (sumMB(m1.heap) - sumMB(m0.heap)) * (1 << 20) / float64(s.c.sessions)
	}
	s.logf("%d sessions held %.0fs: %d expired or lost, %.0f B each (anonymous memory, all servers), the leader used %.2f cores",
		s.c.sessions, s.r.SessionsHeldS, s.r.SessionsExpired, s.r.BytesPerSession, s.r.LeaderCores)
	return nil
}

// grpcSessionFigures runs coordctl bench session-hold.
func (s *scaler) grpcSessionFigures() error {
	out, err := exec.Command(s.c.coordctl, "--servers", strings.Join(s.c.servers, ","), "bench",
		fmt.Sprintf("session-hold:%d", s.c.grpcSessions), "--duration", s.c.hold.String(), "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("coordctl bench session-hold: %w", err)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var r struct {
		Errors       int64   `json:"errors"`
		HeldSessions int     `json:"held_sessions"`
		KBPerSession float64 `json:"kb_per_session"`
		LeaderCores  float64 `json:"leader_cores"`
		FirstError   string  `json:"first_error"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &r); err != nil {
		return fmt.Errorf("coordctl bench session-hold: %w", err)
	}
	s.r.GRPCSessions, s.r.GRPCSessionsLost = r.HeldSessions, int(r.Errors)
	s.r.GRPCBytesPerSession, s.r.GRPCLeaderCores = r.KBPerSession*1024, r.LeaderCores
	if r.Errors > 0 {
		s.fail("%d of %d gRPC sessions failed: %s", r.Errors, r.HeldSessions, r.FirstError)
	}
	s.logf("%d gRPC sessions (shared connections) held %v: %d failed, %.0f B each, the leader used %.2f cores",
		r.HeldSessions, s.c.hold, r.Errors, s.r.GRPCBytesPerSession, r.LeaderCores)
	return nil
}

// holdWorker is a child process (compare scale-hold) holding sessions.
type holdWorker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startHoldWorker(servers []string, n int, from string) (*holdWorker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "scale-hold", strings.Join(servers, ","), strconv.Itoa(n), from)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &holdWorker{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// expect reads the worker's next line, which must start with word.
func (w *holdWorker) expect(word string) error {
	if !w.out.Scan() {
		return fmt.Errorf("session worker ended: %v", w.out.Err())
	}
	if line := w.out.Text(); !strings.HasPrefix(line, word) {
		return fmt.Errorf("session worker: %s", line)
	}
	return nil
}

// check asks the worker how many of its sessions are lost.
func (w *holdWorker) check() (int, error) {
	fmt.Fprintln(w.in, "check")
	if !w.out.Scan() {
		return 0, fmt.Errorf("session worker ended: %v", w.out.Err())
	}
	var lost int
	if _, err := fmt.Sscanf(w.out.Text(), "lost %d", &lost); err != nil {
		return 0, fmt.Errorf("session worker: %s", w.out.Text())
	}
	return lost, nil
}

// stop has the worker close its sessions, and waits for it.
func (w *holdWorker) stop() {
	w.in.Close()
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = w.cmd.Process.Kill()
		<-done
	}
}

// holdMain is compare scale-hold SERVERS N FROM: it opens N minimal
// sessions over SERVERS from local address FROM, says "open", pings them
// until stdin says "check" (it answers "lost K", the sessions lost so
// far), and closes them when stdin ends.
func holdMain(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: compare scale-hold SERVERS N FROM")
	}
	servers := strings.Split(args[0], ",")
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 {
		return fmt.Errorf("scale-hold: bad count %q", args[1])
	}
	from := &net.TCPAddr{IP: net.ParseIP(args[2])}
	sessions := make([]*rawSession, n)
	err = parallel(n, min(n, 128), func(_, i int) error {
		var err error
		sessions[i], err = dialRaw(servers[i%len(servers)], from, 30*time.Second)
		return err
	})
	if err != nil {
		fmt.Printf("failed %v\n", err)
		return err
	}
	fmt.Println("open")
	stop := make(chan struct{})
	go pinger(sessions, stop)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "check" {
			lost := 0
			for _, r := range sessions {
				if !r.alive() {
					lost++
				}
			}
			fmt.Printf("lost %d\n", lost)
		}
	}
	close(stop)
	_ = parallel(n, min(n, 128), func(_, i int) error {
		sessions[i].closeSession()
		return nil
	})
	return nil
}
