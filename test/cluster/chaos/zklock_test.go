package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// The lock workload's ZooKeeper-protocol half: workers that take
// go-zookeeper's own Lock (unchanged: it never learns that its session may
// be lost, and starts a new session silently after an expiry) and, holding
// it, write a node a few times. The server faults alone never expire their
// sessions (a new leader gives every session a fresh timeout, a server cut
// off closes its clients' connections and they move), so a holder is
// itself frozen now and then, as a process in a long GC pause or cut off
// from every server would be: its connections are cut and it does nothing
// for a while (zkFreezeMin..zkFreezeMax), believing it holds the lock. A
// freeze longer than its session's timeout (zkLockSession) expires it.
//
// Their holds go through the same unfenced-overlap rule as lockrecipe's; a
// hold ends when the worker stops relying on it: it unlocks, or
// go-zookeeper tells it its session expired (StateExpired, when it gets
// through again). Without a lock-delay the next waiter takes the lock as
// the frozen holder's session expires, an overlap (ZooKeeper shows the
// same), so the overlaps are counted, not failed; with -chaos.lockdelay
// longer than the longest cut of the run (a server fault's or a freeze's)
// there must be none.

var flagLockDelay = flag.Duration("chaos.lockdelay", 0, "run the servers with --lock-delay /lock=DURATION (the lock workload's paths); with a delay longer than the run's longest cut (a fault's hold, or a lock holder's freeze of up to 5s), the ZooKeeper-protocol lock holders must count no unfenced overlap")

// lockDelayArgs are the servers' lock-delay flags (none by default).
func lockDelayArgs() []string {
	if *flagLockDelay <= 0 {
		return nil
	}
	return []string{"--lock-delay", "/lock=" + flagLockDelay.String()}
}

// zkLockPath is go-zookeeper's Lock of the workload; zkLockData the node
// its holders write.
const zkLockPath, zkLockData = "/lock/zk", "/lock/zkdata"

// zkLockACL is the ACL of the nodes the ZooKeeper-protocol workers create:
// with -chaos.acl their creator's identity (the workloads' digest), else
// open.
func (e *env) zkLockACL() []zk.ACL {
	if e.c.acl == nil {
		return zk.WorldACL(zk.PermAll)
	}
	return zk.AuthACL(zk.PermAll)
}

// longestCut is the longest cut of the run: the longest hold of a fault
// that cuts servers off or stops them (every kind but slow links) in the
// schedule, or the longest freeze of a lock holder.
func longestCut(steps []step) time.Duration {
	d := zkFreezeMax
	for _, s := range steps {
		if s.Kind != fSlow {
			d = max(d, s.Hold)
		}
	}
	return d
}

// zkLockSession is the session timeout of the ZooKeeper-protocol lock
// workers; zkFreezeMin and zkFreezeMax bound a holder's freeze, and one hold
// in zkFreezeOdds freezes.
const (
	zkLockSession = 2 * time.Second
	zkFreezeMin   = 500 * time.Millisecond
	zkFreezeMax   = 5 * time.Second
	zkFreezeOdds  = 5
)

// zkCut is a go-zookeeper dialer whose connections a freeze cuts: while
// cut it refuses to dial, as for a process that is stopped or cut off.
type zkCut struct {
	tls   *tls.Config // nil: plaintext
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (z *zkCut) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.cut {
		return nil, errors.New("chaos: the lock holder is frozen")
	}
	var c net.Conn
	var err error
	if z.tls != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, z.tls)
	} else {
		c, err = net.DialTimeout(network, addr, timeout)
	}
	if err == nil {
		z.conns = append(z.conns, c)
	}
	return c, err
}

// freeze cuts (on) or restores (off) the connections.
func (z *zkCut) freeze(on bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.cut = on
	if on {
		for _, c := range z.conns {
			c.Close()
		}
		z.conns = nil
	}
}

func (l *lockWork) zkWorker(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(uint64(l.seed), uint64(4000+w)))
	cut := &zkCut{}
	if l.e.c.tls != nil {
		cut.tls = l.e.c.tls.client
	}
	var conn *zk.Conn
	// expired is the run time (ns) of the last StateExpired go-zookeeper
	// reported on conn (0: none).
	var expired atomic.Int64
	stopClose := func() bool { return false }
	drop := func() {
		stopClose()
		conn.Close()
		conn = nil
	}
	defer func() {
		if conn != nil {
			drop()
		}
	}()
	for round := 0; round < 20000 && ctx.Err() == nil; round++ {
		if conn == nil {
			c, events, err := zk.Connect(l.e.c.servers(), zkLockSession, zk.WithDialer(cut.dial), zk.WithLogInfo(false), zk.WithLogger(zkQuietLogger{}))
			if err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			conn = c
			stopClose = context.AfterFunc(ctx, c.Close)
			go func() {
				for ev := range events {
					if ev.State == zk.StateExpired {
						expired.Store(int64(l.e.since()))
					}
				}
			}()
			if err := zkAuthenticate(l.e, c); err != nil {
				drop()
				sleep(ctx, 500*time.Millisecond)
				continue
			}
		}
		lk := zk.NewLock(conn, zkLockPath, l.e.zkLockACL())
		if err := lk.Lock(); err != nil {
			if ctx.Err() == nil {
				l.zkAcq.fail.Add(1)
			}
			if errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrNoServer) {
				drop()
			}
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		before := expired.Load()
		h := hold{worker: w, from: l.e.since()}
		l.zkAcq.ok.Add(1)
		tok, ok := zkHolderToken(conn)
		for k := 0; k < 3 && ok; k++ {
			if expired.Load() != before {
				break
			}
			if k == 1 && rng.IntN(zkFreezeOdds) == 0 {
				d := dur(rng, zkFreezeMin, zkFreezeMax)
				cut.freeze(true)
				sleep(ctx, d)
				cut.freeze(false)
				l.zkFreezes.Add(1)
			}
			_, err := conn.Set(zkLockData, []byte(fmt.Sprintf("t%d-w%d-r%d-k%d", tok, w, round, k)), -1)
			switch {
			case err == nil:
				l.zkCnt.ok.Add(1)
				h.writes++
			case errors.Is(err, zk.ErrSessionExpired):
				l.zkCnt.fail.Add(1)
				h.fails++
			default:
				l.zkCnt.indet.Add(1)
			}
			if errors.Is(err, zk.ErrSessionExpired) {
				break
			}
			sleep(ctx, time.Duration(5+rng.IntN(20))*time.Millisecond)
		}
		h.to = l.e.since()
		if e := expired.Load(); e != before {
			h.learned, h.lost = time.Duration(e), true
		}
		_ = lk.Unlock()
		l.mu.Lock()
		if !ok {
			l.zkUntokened++
		} else {
			h.token = tok
			if other, dup := l.zkTokens[tok]; dup {
				l.dups = append(l.dups, fmt.Sprintf("go-zookeeper lock: node with czxid %d held twice: %s and worker %d round %d", tok, other, w, round))
			}
			l.zkTokens[tok] = fmt.Sprintf("worker %d round %d", w, round)
			l.zkHolds = append(l.zkHolds, h)
		}
		l.mu.Unlock()
		sleep(ctx, time.Duration(rng.IntN(30))*time.Millisecond)
	}
}

// zkHolderToken returns the creation zxid of the lock node that holds
// go-zookeeper's Lock (the one with the lowest sequence number), if it is
// conn's session's: the order of the holds. go-zookeeper keeps its own
// node's name to itself.
func zkHolderToken(conn *zk.Conn) (int64, bool) {
	for try := 0; try < 3; try++ {
		kids, _, err := conn.Children(zkLockPath)
		if err != nil {
			continue
		}
		first, low := "", int64(-1)
		for _, k := range kids {
			i := strings.LastIndex(k, "-lock-")
			if i < 0 {
				continue
			}
			seq, err := strconv.ParseInt(k[i+len("-lock-"):], 10, 64)
			if err == nil && (low < 0 || seq < low) {
				first, low = k, seq
			}
		}
		if first == "" {
			return 0, false
		}
		_, st, err := conn.Get(zkLockPath + "/" + first)
		if err != nil {
			continue
		}
		return st.Czxid, st.EphemeralOwner == conn.SessionID()
	}
	return 0, false
}

// longestOverlap is the longest time by which a hold began before an
// earlier token's holder stopped relying on it (as unfencedOverlaps counts
// them), 0 without overlaps.
func longestOverlap(holds []hold) time.Duration {
	hs := append([]hold(nil), holds...)
	sort.Slice(hs, func(i, j int) bool { return hs[i].token < hs[j].token })
	var most time.Duration
	var latest hold
	for i, h := range hs {
		if i > 0 && h.from < latest.end() {
			most = max(most, latest.end()-h.from)
		}
		if i == 0 || h.end() > latest.end() {
			latest = h
		}
	}
	return most
}

// checkZK judges the ZooKeeper-protocol holds (l.mu held): their unfenced
// overlaps fail the run only with a lock-delay longer than the longest cut
// of the schedule; otherwise they are reported.
func (l *lockWork) checkZK(v *verdict) {
	overlaps := unfencedOverlaps(l.zkHolds)
	told := 0
	for _, h := range l.zkHolds {
		if h.learned > 0 {
			told++
		}
	}
	// How many holds were overlapped (an overlap names the earlier one).
	overlapped := map[string]bool{}
	for _, o := range overlaps {
		if i := strings.Index(o, "while the holder of token "); i >= 0 {
			overlapped[strings.Fields(o[i+len("while the holder of token "):])[0]] = true
		}
	}
	enforced := l.lockDelay > 0 && l.lockDelay > l.longestCut
	rule := fmt.Sprintf("lock-delay %v, longest cut %v: overlaps are counted", l.lockDelay, l.longestCut)
	if enforced {
		rule = fmt.Sprintf("lock-delay %v, longer than the longest cut %v: no overlap allowed", l.lockDelay, l.longestCut)
	}
	v.notef("go-zookeeper Lock (%s): acquisitions %s; %d holds (%d frozen %v..%v with %v sessions, %d told of their session's expiry, %d not ordered), %d distinct nodes, %d unfenced overlaps (of %d holds, the longest %v)",
		rule, &l.zkAcq, len(l.zkHolds), l.zkFreezes.Load(), zkFreezeMin, zkFreezeMax, zkLockSession, told, l.zkUntokened, len(l.zkTokens),
		len(overlaps), len(overlapped), longestOverlap(l.zkHolds).Round(time.Millisecond))
	for i, o := range overlaps {
		switch {
		case enforced:
			v.failf("go-zookeeper Lock: %s", o)
		case i < 5:
			v.notef("go-zookeeper Lock: %s", o)
		}
	}
	if len(l.zkHolds) == 0 && l.zkWorkers > 0 {
		v.failf("go-zookeeper Lock: no acquisition at all")
	}
}

// TestZKLockVerdict pins when the go-zookeeper holds' overlaps fail the
// run: only with a lock-delay longer than the longest cut; they are
// counted either way.
func TestZKLockVerdict(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	overlapping := []hold{{token: 1, from: ms(0), to: ms(50)}, {token: 2, from: ms(11), to: ms(20)}}
	inTurn := []hold{{token: 1, from: ms(0), to: ms(10)}, {token: 2, from: ms(11), to: ms(20)}}
	cases := []struct {
		name                  string
		lockDelay, longestCut time.Duration
		holds                 []hold
		pass                  bool
	}{
		{"no lock-delay: counted", 0, 5 * time.Second, overlapping, true},
		{"a short lock-delay: counted", 2 * time.Second, 5 * time.Second, overlapping, true},
		{"as long as the longest cut: counted", 5 * time.Second, 5 * time.Second, overlapping, true},
		{"longer than the longest cut: failed", 8 * time.Second, 5 * time.Second, overlapping, false},
		{"longer, and in turn", 8 * time.Second, 5 * time.Second, inTurn, true},
		{"no acquisition", 0, 5 * time.Second, nil, false},
	}
	for _, c := range cases {
		l := &lockWork{zkWorkers: 1, lockDelay: c.lockDelay, longestCut: c.longestCut, zkHolds: c.holds, zkTokens: map[int64]string{}}
		v := &verdict{pass: true}
		l.checkZK(v)
		if v.pass != c.pass {
			t.Errorf("%s: pass %v, want %v (notes %v, problems %v)", c.name, v.pass, c.pass, v.notes, v.problems)
		}
		if len(c.holds) > 0 && !strings.Contains(v.notes[0], fmt.Sprintf("%d unfenced overlaps", len(unfencedOverlaps(c.holds)))) {
			t.Errorf("%s: note %q", c.name, v.notes[0])
		}
	}
	if got := longestCut([]step{{Kind: fSlow, Hold: 9 * time.Second}, {Kind: fSplit, Hold: 6 * time.Second}}); got != 6*time.Second {
		t.Errorf("longestCut = %v, want the split's 6s (slow links cut nothing)", got)
	}
	if got := longestOverlap(append(overlapping, hold{token: 3, from: ms(30), to: ms(40)})); got != ms(39) {
		t.Errorf("longestOverlap = %v, want 39ms (token 2 from 11ms while token 1 held until 50ms)", got)
	}
	if got := longestOverlap(inTurn); got != 0 {
		t.Errorf("longestOverlap of holds in turn = %v", got)
	}
	if got := longestCut(nil); got != zkFreezeMax {
		t.Errorf("longestCut of no fault = %v, want a holder's longest freeze %v", got, zkFreezeMax)
	}
}
