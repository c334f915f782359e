package bench

import (
	"context"
	"sync"
	"time"
)

// Opening and closing the measured sessions, of either protocol.

// connectTries bounds how often a session that landed on a server already
// holding its share is opened again.
const connectTries = 8

// connectBalanced opens n sessions spread evenly over the servers, many at
// a time, and says how many each server got. Session i is offered the
// servers starting at the i-th: coordd's client tries them in random
// order, so a session that lands on a server already holding its share is
// closed and opened again, a few times at most; a ZooKeeper session stays
// on the first, so the spread is even at once. record, if set, is given
// the time each kept session took to open.
func (b *Bench) connectBalanced(n int, record func(time.Duration)) ([]session, map[string]int, error) {
	quota := (n + len(b.cfg.Servers) - 1) / len(b.cfg.Servers)
	sessions := make([]session, n)
	spread := map[string]int{}
	var mu sync.Mutex
	var first error
	b.many(n, 64, func(i int) {
		servers := rotate(b.cfg.Servers, i)
		for try := 0; ; try++ {
			t := time.Now()
			s, err := b.proto.open(b.ctx, servers)
			took := time.Since(t)
			mu.Lock()
			if err != nil {
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			if srv := s.server(); spread[srv] < quota || try == connectTries-1 {
				spread[srv]++
				sessions[i] = s
				if record != nil {
					record(took)
				}
				mu.Unlock()
				return
			}
			mu.Unlock()
			b.closeAll([]session{s})
		}
	})
	if first != nil {
		b.closeAll(sessions)
		return nil, nil, first
	}
	return sessions, spread, nil
}

// closeAll closes the sessions (nil ones skipped), many at a time.
func (b *Bench) closeAll(sessions []session) {
	b.many(len(sessions), 64, func(i int) {
		if s := sessions[i]; s != nil {
			ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
			defer cancel()
			s.close(ctx)
		}
	})
}

// many calls f(0) ... f(n-1), at most limit at a time, and returns when
// all have returned.
func (b *Bench) many(n, limit int, f func(i int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

// rotate returns servers starting at the i-th (modulo their number).
func rotate(servers []string, i int) []string {
	k := i % len(servers)
	return append(append([]string(nil), servers[k:]...), servers[:k]...)
}
