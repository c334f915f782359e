package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// The load and the big parent (figures 1 and 2 of scale.go).

// loadMulti creates n znodes of 100 bytes at path(k), in multis of 100
// from 16 sessions.
func (s *scaler) loadMulti(n int, path func(int) string) error {
	conns, err := s.sessionsOn(s.c.servers, 16)
	if err != nil {
		return err
	}
	defer closeConns(conns)
	value := bytes.Repeat([]byte("v"), 100)
	const batch = 100
	return parallel((n+batch-1)/batch, len(conns), func(w, b int) error {
		ops := make([]any, 0, batch)
		for k := b * batch; k < min(n, (b+1)*batch); k++ {
			ops = append(ops, &zk.CreateRequest{Path: path(k), Data: value, Acl: acl})
		}
		// A leader change drops connections: go-zookeeper reconnects, and
		// the multi is sent again (it applied whole or not at all: a
		// NodeExists says it did, here or in an earlier run).
		var err error
		for attempt := 0; attempt < 20; attempt++ {
			if _, err = conns[w].Multi(ops...); err == nil || errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			if !retryable(err) {
				return err
			}
			s.logf("multi failed (%v); again", err)
			time.Sleep(500 * time.Millisecond)
		}
		return err
	})
}

// retryable reports whether a request failed for want of a connection,
// rather than for what it asked.
func retryable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrClosing)
}

func (s *scaler) load() error {
	admin, err := s.session(s.c.servers[0])
	if err != nil {
		return err
	}
	defer admin.Close()
	for d := range 100 {
		if err := ensure(admin, fmt.Sprintf("%s/d%03d", scaleRoot, d)); err != nil {
			return err
		}
	}
	if err := ensure(admin, scaleRoot+"/big"); err != nil {
		return err
	}
	if s.c.znodes > 0 {
		start := time.Now()
		if err := s.loadMulti(s.c.znodes, flatPath); err != nil {
			return fmt.Errorf("loading %d znodes: %w", s.c.znodes, err)
		}
		if err := waitApplied(s.c.servers, 10*time.Minute); err != nil {
			return err
		}
		s.r.LoadS = time.Since(start).Seconds()
		m := s.memory()
		s.r.LoadedRSSMB, s.r.LoadedAnonMB, s.r.LoadedHeapMB = m.rss, m.anon, m.heap
		s.r.BeyondDataRSS = beyondData(s.r.IdleRSSMB, s.r.LoadedRSSMB, s.c.znodes)
		s.r.BeyondDataAnon = beyondData(s.r.IdleAnonMB, s.r.LoadedAnonMB, s.c.znodes)
		s.r.BeyondDataHeap = beyondData(s.r.IdleHeapMB, s.r.LoadedHeapMB, s.c.znodes)
		s.logf("%d znodes loaded in %.1fs; resident MB %s, anonymous %s (%.0f B per znode beyond its data, %.0f anonymous)", s.c.znodes, s.r.LoadS,
			mbList(s.r.LoadedRSSMB), mbList(s.r.LoadedAnonMB), s.r.BeyondDataRSS, s.r.BeyondDataAnon)
	}
	if s.c.children > 0 {
		if err := s.loadMulti(s.c.children, childPath); err != nil {
			return fmt.Errorf("loading %d children: %w", s.c.children, err)
		}
		if err := waitApplied(s.c.servers, 10*time.Minute); err != nil {
			return err
		}
		s.r.Children = s.c.children
		m := s.memory()
		s.r.ChildrenRSSMB, s.r.ChildrenAnonMB = m.rss, m.anon
		s.r.ChildBeyondRSS = beyondData(s.r.LoadedRSSMB, s.r.ChildrenRSSMB, s.c.children)
		s.r.ChildBeyondAnon = beyondData(s.r.LoadedAnonMB, s.r.ChildrenAnonMB, s.c.children)
		s.r.ChildBeyondHeap = beyondData(s.r.LoadedHeapMB, m.heap, s.c.children)
		s.logf("%d children of one parent loaded; resident MB %s, anonymous %s (%.0f B per child beyond its data, %.0f anonymous)", s.c.children,
			mbList(s.r.ChildrenRSSMB), mbList(s.r.ChildrenAnonMB), s.r.ChildBeyondRSS, s.r.ChildBeyondAnon)
	}
	return nil
}

// leaderOf finds the leader among servers, asking for up to 30 s (a
// server busy with a large batch may answer srvr late).
func leaderOf(servers []string) (int, int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		i, z, err := leaderIndex(servers)
		if err == nil || time.Now().After(deadline) {
			return i, z, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// follower returns the index of a server that does not lead.
func (s *scaler) follower() (int, error) {
	lead, _, err := leaderOf(s.c.servers)
	if err != nil {
		return 0, err
	}
	return (lead + 1) % len(s.c.servers), nil
}

// bigParent lists the big parent on a follower while 8 other sessions on
// that server read and write, then creates one more child.
func (s *scaler) bigParent() error {
	if s.c.children == 0 {
		return nil
	}
	f, err := s.follower()
	if err != nil {
		return err
	}
	server := s.c.servers[f]
	probes, err := s.sessionsOn([]string{server}, 8)
	if err != nil {
		return err
	}
	defer closeConns(probes)
	lister, events, err := zk.Connect([]string{server}, 30*time.Second, zk.WithLogger(quiet{}), zk.WithLogInfo(false), zk.WithMaxBufferSize(256<<20))
	if err != nil {
		return err
	}
	go func() {
		for range events { // drain: the client blocks on a full channel
		}
	}()
	defer lister.Close()
	if _, _, err := lister.Exists("/"); err != nil {
		return err
	}
	// The probes: a getData and a setData each, over and over.
	type sample struct {
		at  time.Time
		lat time.Duration
	}
	var mu sync.Mutex
	var samples []sample
	stop := make(chan struct{})
	var wg sync.WaitGroup
	value := bytes.Repeat([]byte("p"), 100)
	for i, c := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				p := flatPath((i*7919 + k) % max(1, s.c.znodes))
				t0 := time.Now()
				var err error
				if s.c.znodes > 0 {
					if k%2 == 0 {
						_, _, err = c.Get(p)
					} else {
						_, err = c.Set(p, value, -1)
					}
				} else {
					_, _, err = c.Get("/")
				}
				lat := time.Since(t0)
				if err != nil {
					continue
				}
				mu.Lock()
				samples = append(samples, sample{t0, lat})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(3 * time.Second)
	begin := time.Now()
	names, _, err := lister.Children(scaleRoot + "/big")
	took := time.Since(begin)
	end := time.Now()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	s.r.GetChildrenMS = float64(took.Microseconds()) / 1000
	switch {
	case err != nil:
		s.r.GetChildrenResult = err.Error()
	case len(names) != s.c.children:
		s.r.GetChildrenResult = fmt.Sprintf("%d names of %d", len(names), s.c.children)
		s.fail("getChildren of the big parent: %s", s.r.GetChildrenResult)
	default:
		s.r.GetChildrenResult = "ok"
		size := 0
		for _, n := range names {
			size += 4 + len(n)
		}
		s.r.GetChildrenMB = float64(size) / (1 << 20)
	}
	var quiet, during []float64
	for _, x := range samples {
		ms := float64(x.lat.Microseconds()) / 1000
		switch {
		case x.at.Before(begin) && x.at.Add(x.lat).Before(begin):
			quiet = append(quiet, ms)
		case x.at.Before(end) && x.at.Add(x.lat).After(begin):
			during = append(during, ms)
		}
	}
	s.r.OthersQuietP99MS = percentile(quiet, 0.99)
	if len(during) > 0 {
		s.r.OthersMaxMS = slices.Max(during)
	}
	t0 := time.Now()
	if _, err := lister.Create(childPath(s.c.children), bytes.Repeat([]byte("v"), 100), 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		s.fail("create child %d of the big parent: %v", s.c.children+1, err)
	}
	s.r.CreateChildMS = float64(time.Since(t0).Microseconds()) / 1000
	s.logf("getChildren of %d children on %s: %s in %.0f ms (%.1f MB); other sessions there: p99 %.1f ms before, worst %.1f ms during; child %d created in %.1f ms",
		s.c.children, server, s.r.GetChildrenResult, s.r.GetChildrenMS, s.r.GetChildrenMB, s.r.OthersQuietP99MS, s.r.OthersMaxMS, s.c.children+1, s.r.CreateChildMS)
	return nil
}
