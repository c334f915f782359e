package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// lockWork: clients take a lockrecipe.Mutex and, while holding it, append
// entries named with their fencing token to /lock/log through GuardedMulti
// (sequential creates, so the log's order is the commit order). The checker
// proves the critical sections are ordered by token: once an entry with
// token T is in the log, no entry with a smaller token follows it, i.e. no
// write of a stale holder was accepted; and every acknowledged write is
// there exactly once.
type lockWork struct {
	e       *env
	seed    int64
	workers int
	cnt     counters // guarded writes
	acq     counters // acquisitions

	mu     sync.Mutex
	acked  map[string]string // write id -> name
	unsure map[string]bool
	failed map[string]bool
	tokens map[int64]string // token -> acquisition
	dups   []string
	holds  []hold
}

type hold struct {
	token         int64
	worker        int
	from, to      time.Duration
	lost          bool
	writes, fails int
}

const lockPath, lockLog = "/lock/m", "/lock/log"

func newLockWork(e *env, seed int64, workers int) *lockWork {
	return &lockWork{e: e, seed: seed, workers: workers, acked: map[string]string{},
		unsure: map[string]bool{}, failed: map[string]bool{}, tokens: map[int64]string{}}
}

func (l *lockWork) name() string        { return "lock" }
func (l *lockWork) counters() *counters { return &l.cnt }

func (l *lockWork) setup(ctx context.Context, cl *client.Client) error {
	return createAll(ctx, cl, lockLog)
}

func (l *lockWork) run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := 0; w < l.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			l.worker(ctx, w)
		}(w)
	}
	wg.Wait()
}

func (l *lockWork) worker(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(uint64(l.seed), uint64(3000+w)))
	var sess *lockrecipe.Session
	var m *lockrecipe.Mutex
	for round := 0; round < 20000 && ctx.Err() == nil; round++ {
		if sess != nil {
			select {
			case <-sess.Done():
				sess = nil
			default:
			}
		}
		if sess == nil {
			cl, _, err := l.e.newClient(ctx, fmt.Sprintf("lock-%d", w))
			if err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			sess = lockrecipe.NewSession(cl)
			m = lockrecipe.NewMutex(sess, lockPath)
		}
		lctx, cancel := context.WithTimeout(ctx, 2*opTimeout)
		tok, err := m.Lock(lctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				l.acq.fail.Add(1)
			}
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		l.acq.ok.Add(1)
		h := hold{token: int64(tok), worker: w, from: l.e.since()}
		l.mu.Lock()
		if other, dup := l.tokens[int64(tok)]; dup {
			l.dups = append(l.dups, fmt.Sprintf("token %d handed out twice: %s and worker %d round %d", tok, other, w, round))
		}
		l.tokens[int64(tok)] = fmt.Sprintf("worker %d round %d", w, round)
		l.mu.Unlock()
		lost := m.Lost()
		for k := 0; k < 3; k++ {
			select {
			case <-lost:
				h.lost = true
			default:
			}
			if h.lost {
				break
			}
			id := fmt.Sprintf("t%d-w%d-r%d-k%d", tok, w, round, k)
			wctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			res, err := m.GuardedMulti(wctx, client.CreateOp(lockLog+"/"+id+"-", nil, client.CreateMode{Sequential: true}))
			cancel()
			l.mu.Lock()
			switch {
			case err == nil:
				l.cnt.ok.Add(1)
				h.writes++
				if len(res) > 0 {
					l.acked[id] = res[0].Path
				}
			case errors.Is(err, lockrecipe.ErrLockLost) && !errors.Is(err, client.ErrOutcomeUnknown) && !errors.Is(err, context.DeadlineExceeded),
				errors.Is(err, lockrecipe.ErrNotHeld):
				l.cnt.fail.Add(1)
				l.failed[id] = true
				h.fails++
				h.lost = true
			default:
				l.cnt.indet.Add(1)
				l.unsure[id] = true
			}
			l.mu.Unlock()
			if h.lost {
				break
			}
			sleep(ctx, time.Duration(5+rng.IntN(20))*time.Millisecond)
		}
		h.to = l.e.since()
		uctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_ = m.Unlock(uctx)
		cancel()
		l.mu.Lock()
		l.holds = append(l.holds, h)
		l.mu.Unlock()
		sleep(ctx, time.Duration(rng.IntN(30))*time.Millisecond)
	}
}

type logEntry struct {
	name  string
	id    string
	token int64
	seq   int64
}

func (l *lockWork) check(ctx context.Context, cl *client.Client, v *verdict) {
	if err := cl.Sync(ctx, lockLog); err != nil {
		v.failf("final sync: %v", err)
		return
	}
	kids, _, err := cl.Children(ctx, lockLog)
	if err != nil {
		v.failf("final listing: %v", err)
		return
	}
	var log []logEntry
	for _, k := range kids {
		i := strings.LastIndexByte(k, '-')
		if i < 0 || !strings.HasPrefix(k, "t") {
			v.failf("unexpected log entry %q", k)
			continue
		}
		seq, err1 := strconv.ParseInt(k[i+1:], 10, 64)
		tok, err2 := strconv.ParseInt(k[1:strings.IndexByte(k, '-')], 10, 64)
		if err1 != nil || err2 != nil {
			v.failf("unparsable log entry %q", k)
			continue
		}
		log = append(log, logEntry{name: k, id: k[:i], token: tok, seq: seq})
	}
	sort.Slice(log, func(i, j int) bool { return log[i].seq < log[j].seq })
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.dups {
		v.failf("%s", d)
	}
	seen := map[string]int{}
	var maxTok int64
	maxAt := ""
	for _, en := range log {
		seen[en.id]++
		if en.token < maxTok {
			v.failf("stale write accepted: %s (token %d) committed after %s (token %d)", en.name, en.token, maxAt, maxTok)
		}
		if en.token > maxTok {
			maxTok, maxAt = en.token, en.name
		}
	}
	for id, n := range seen {
		if n > 1 {
			v.failf("guarded write %s applied %d times", id, n)
		}
		if l.failed[id] {
			v.failf("guarded write %s was refused (lock lost) but is in the log", id)
		}
	}
	missing := 0
	for id, name := range l.acked {
		if seen[id] == 0 {
			missing++
			v.failf("acknowledged guarded write %s (%s) is missing", id, name)
		}
	}
	present := 0
	for id := range l.unsure {
		if seen[id] > 0 {
			present++
		}
	}
	lost := 0
	for _, h := range l.holds {
		if h.lost {
			lost++
		}
	}
	v.notef("acquisitions: %s; %d holds (%d lost while holding), %d distinct tokens; log: %d entries, %d acknowledged (%d missing), %d indeterminate of which %d present",
		&l.acq, len(l.holds), lost, len(l.tokens), len(log), len(l.acked), missing, len(l.unsure), present)
	if len(l.holds) == 0 {
		v.failf("no acquisition at all")
	}
}
