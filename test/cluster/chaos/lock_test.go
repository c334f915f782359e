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
	"sync/atomic"
	"testing"
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
// there exactly once. It also proves that no holder needed fencing: each
// hold ends when its holder stops (or learns through Lost that it may have
// lost the lock), and no later token is acquired before an earlier hold
// ended ("unfenced overlap", which a program that cannot check a token,
// such as a command run by coordctl lock, would suffer). Its ZooKeeper-protocol
// workers take go-zookeeper's Lock beside (zklock_test.go).
type lockWork struct {
	e       *env
	seed    int64
	workers int
	cnt     counters // guarded writes
	acq     counters // acquisitions

	// The ZooKeeper-protocol workers (zklock_test.go): how many, their
	// writes and acquisitions; the servers' lock-delay and the longest
	// cut of the schedule decide whether their overlaps fail the run.
	zkWorkers             int
	zkCnt, zkAcq          counters
	zkFreezes             atomic.Int64
	lockDelay, longestCut time.Duration

	mu     sync.Mutex
	acked  map[string]string // write id -> name
	unsure map[string]bool
	failed map[string]bool
	tokens map[int64]string // token -> acquisition
	dups   []string
	holds  []hold
	// zkHolds are the go-zookeeper Lock's holds, ordered by their node's
	// czxid (zkTokens); zkUntokened those whose node could not be read.
	zkHolds     []hold
	zkTokens    map[int64]string
	zkUntokened int
}

type hold struct {
	token         int64
	worker        int
	from, to      time.Duration // Lock returned; the holder stopped
	learned       time.Duration // Lost closed (0: not before to)
	lost          bool
	writes, fails int
}

// end is when the holder stopped relying on the hold: it stopped, or
// learned it might have lost the lock.
func (h hold) end() time.Duration {
	if h.learned > 0 && h.learned < h.to {
		return h.learned
	}
	return h.to
}

const lockPath, lockLog = "/lock/m", "/lock/log"

func newLockWork(e *env, seed int64, workers, zkWorkers int) *lockWork {
	return &lockWork{e: e, seed: seed, workers: workers, zkWorkers: zkWorkers, lockDelay: *flagLockDelay,
		acked: map[string]string{}, unsure: map[string]bool{}, failed: map[string]bool{}, tokens: map[int64]string{},
		zkTokens: map[int64]string{}}
}

func (l *lockWork) name() string        { return "lock" }
func (l *lockWork) counters() *counters { return &l.cnt }

func (l *lockWork) setup(ctx context.Context, cl *client.Client) error {
	if err := createAll(ctx, cl, lockLog, l.e.dataACL()); err != nil {
		return err
	}
	return createAll(ctx, cl, zkLockData, l.e.dataACL())
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
	for w := 0; w < l.zkWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			l.zkWorker(ctx, w)
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
			m = lockrecipe.NewMutex(sess, lockPath, lockrecipe.WithACL(l.e.creatorACL()))
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
		learned := make(chan time.Duration, 1)
		holding := make(chan struct{})
		go func() {
			select {
			case <-lost:
				learned <- l.e.since()
			case <-holding:
			}
		}()
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
			res, err := m.GuardedMulti(wctx, client.CreateOp(lockLog+"/"+id+"-", nil, client.CreateMode{Sequential: true, ACL: l.e.creatorACL()}))
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
		close(holding)
		select {
		case h.learned = <-learned:
		default:
		}
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
	lost, learned := 0, 0
	for _, h := range l.holds {
		if h.lost {
			lost++
		}
		if h.learned > 0 {
			learned++
		}
	}
	overlaps := unfencedOverlaps(l.holds)
	for _, o := range overlaps {
		v.failf("%s", o)
	}
	v.notef("acquisitions: %s; %d holds (%d lost while holding, %d told by Lost), %d distinct tokens, %d unfenced overlaps; log: %d entries, %d acknowledged (%d missing), %d indeterminate of which %d present",
		&l.acq, len(l.holds), lost, learned, len(l.tokens), len(overlaps), len(log), len(l.acked), missing, len(l.unsure), present)
	if len(l.holds) == 0 {
		v.failf("no acquisition at all")
	}
	l.checkZK(v)
}

// unfencedOverlaps lists the holds acquired (their Lock returned) before an
// earlier token's holder had stopped or learned through Lost that it may
// have lost the lock: two holders that both believed they held, which only
// fencing kept apart. Times come from this process's clock.
func unfencedOverlaps(holds []hold) []string {
	hs := append([]hold(nil), holds...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].token < hs[j].token })
	var out []string
	var latest hold // the earlier hold that ended last
	for i, h := range hs {
		if i > 0 && h.from < latest.end() {
			out = append(out, fmt.Sprintf("unfenced overlap: token %d (worker %d) acquired at %v while the holder of token %d (worker %d, from %v) relied on it until %v (%v later; Lost closed: %v)",
				h.token, h.worker, h.from.Round(time.Millisecond), latest.token, latest.worker, latest.from.Round(time.Millisecond),
				latest.end().Round(time.Millisecond), (latest.end()-h.from).Round(time.Millisecond), latest.learned > 0))
		}
		if i == 0 || h.end() > latest.end() {
			latest = h
		}
	}
	return out
}

// TestUnfencedOverlaps pins the lock checker's overlap rule on small
// histories: a hold ends when its holder stops or Lost closes, whichever
// comes first, and a later token acquired before then is an overlap.
func TestUnfencedOverlaps(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	cases := []struct {
		name  string
		holds []hold
		want  int
	}{
		{"in turn", []hold{{token: 1, from: ms(0), to: ms(10)}, {token: 2, from: ms(11), to: ms(20)}}, 0},
		{"told before the next", []hold{{token: 1, from: ms(0), to: ms(50), learned: ms(10)}, {token: 2, from: ms(11), to: ms(20)}}, 0},
		{"told after the next", []hold{{token: 1, from: ms(0), to: ms(50), learned: ms(30)}, {token: 2, from: ms(11), to: ms(20)}}, 1},
		{"never told", []hold{{token: 1, from: ms(0), to: ms(50)}, {token: 2, from: ms(11), to: ms(20)}}, 1},
		{"any earlier holder", []hold{{token: 1, from: ms(0), to: ms(100)}, {token: 2, from: ms(101), to: ms(110)}, {token: 3, from: ms(105), to: ms(120)}}, 1},
		{"in token order", []hold{{token: 5, from: ms(50), to: ms(60)}, {token: 3, from: ms(0), to: ms(55)}}, 1},
	}
	for _, c := range cases {
		if got := unfencedOverlaps(c.holds); len(got) != c.want {
			t.Errorf("%s: %d overlaps %v, want %d", c.name, len(got), got, c.want)
		}
	}
}
