package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Followers restarted, behind and wiped (figures 4 to 6 of scale.go).

// stopServer stops server i and returns how to start it again.
func (s *scaler) stopServer(i int) (*procSpec, error) {
	s.mu.Lock()
	s.stopped[i] = true
	s.mu.Unlock()
	return stopProc(s.c.pids[i])
}

// startServer starts server i again and times it: until a new session on
// it answers a read, and until its srvr reports target.
func (s *scaler) startServer(i int, spec *procSpec, target int64) (serving, caughtUp float64, err error) {
	t0 := time.Now()
	pid, err := s.procs.start(spec)
	if err != nil {
		return 0, 0, err
	}
	s.c.pids[i] = pid
	server := s.c.servers[i]
	servingC := make(chan float64, 1)
	go func() {
		for time.Since(t0) < 15*time.Minute {
			if c, err := connectWithin(server, 250*time.Millisecond); err == nil {
				_, _, err := c.Get("/")
				c.Close()
				if err == nil {
					servingC <- time.Since(t0).Seconds()
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		servingC <- -1
	}()
	for {
		if _, z, err := srvr(server); err == nil && z >= target {
			break
		}
		if time.Since(t0) > 15*time.Minute {
			return 0, 0, fmt.Errorf("%s not caught up after 15 minutes", server)
		}
		time.Sleep(20 * time.Millisecond)
	}
	caughtUp = time.Since(t0).Seconds()
	serving = <-servingC
	s.mu.Lock()
	delete(s.stopped, i)
	s.mu.Unlock()
	return serving, caughtUp, nil
}

// others returns the servers but i.
func (s *scaler) others(i int) []string {
	var out []string
	for k, a := range s.c.servers {
		if k != i {
			out = append(out, a)
		}
	}
	return out
}

// restarts: a follower restarted, one that missed writes, one wiped.
func (s *scaler) restarts() error {
	// Restarted, nothing missed.
	f, err := s.follower()
	if err != nil {
		return err
	}
	spec, err := s.stopServer(f)
	if err != nil {
		return err
	}
	_, target, err := leaderOf(s.others(f))
	if err != nil {
		return err
	}
	if s.r.RestartServingS, s.r.RestartCaughtUpS, err = s.startServer(f, spec, target); err != nil {
		return err
	}
	s.logf("follower %s restarted: serving after %.2fs, caught up after %.2fs", s.c.servers[f], s.r.RestartServingS, s.r.RestartCaughtUpS)

	// Missed writes.
	if s.c.catchupWrites > 0 && s.c.znodes > 0 {
		if f, err = s.follower(); err != nil {
			return err
		}
		if spec, err = s.stopServer(f); err != nil {
			return err
		}
		conns, err := s.sessionsOn(s.others(f), 64)
		if err != nil {
			return err
		}
		value := bytes.Repeat([]byte("m"), 100)
		err = parallel(s.c.catchupWrites, len(conns), func(w, k int) error {
			_, err := conns[w].Set(flatPath(k%s.c.znodes), value, -1)
			return err
		})
		closeConns(conns)
		if err != nil {
			return fmt.Errorf("writing with %s stopped: %w", s.c.servers[f], err)
		}
		_, target, err := leaderOf(s.others(f))
		if err != nil {
			return err
		}
		if s.r.CatchupServingS, s.r.CatchupS, err = s.startServer(f, spec, target); err != nil {
			return err
		}
		s.r.CatchupWrites = s.c.catchupWrites
		s.logf("follower %s missed %d writes: serving after %.2fs, caught up after %.2fs", s.c.servers[f], s.c.catchupWrites, s.r.CatchupServingS, s.r.CatchupS)
	}

	// Wiped, while the others take writes.
	if f, err = s.follower(); err != nil {
		return err
	}
	if spec, err = s.stopServer(f); err != nil {
		return err
	}
	if err := wipe(s.c.dataDirs[f]); err != nil {
		return err
	}
	stop := make(chan struct{})
	var wait func() ([]writeSample, int64, time.Duration)
	if s.c.znodes > 0 {
		if wait, err = s.writeLoad(s.others(f), 16, stop); err != nil {
			return err
		}
	}
	time.Sleep(2 * time.Second)
	_, target, err = leaderOf(s.others(f))
	if err != nil {
		return err
	}
	s.r.WipedServingS, s.r.WipedCaughtUpS, err = s.startServer(f, spec, target)
	close(stop)
	if wait != nil {
		samples, errs, took := wait()
		s.r.WipedWrites = figures(samples, errs, took)
		if errs > 0 {
			s.fail("%d writes failed while %s was rebuilt", errs, s.c.servers[f])
		}
	}
	if err != nil {
		return err
	}
	s.logf("follower %s wiped: serving after %.2fs, caught up after %.2fs; meanwhile %.0f writes/s on the others, p99 %.1f ms, %d errors",
		s.c.servers[f], s.r.WipedServingS, s.r.WipedCaughtUpS, s.r.WipedWrites.OpsPerS, s.r.WipedWrites.P99MS, s.r.WipedWrites.Errors)
	return nil
}

// wipe empties a server's data: ZooKeeper's version-2 (its myid and
// configuration stay), or all of a coordd data dir.
func wipe(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "myid")); err == nil {
		return os.RemoveAll(filepath.Join(dir, "version-2"))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
