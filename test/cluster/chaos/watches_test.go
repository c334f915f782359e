package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/client"
)

// watchWork: a writer sets a few keys; each watcher client keeps a data
// watch (GetW) on every key and probes the key with plain Gets on the same
// session. Checked per client and key:
//   - the event is for the first change after the watch was set
//     (registration mzxid < event zxid <= first acknowledged change after it);
//   - the event arrives before any reply showing the change (a probe that
//     sees a newer mzxid finds the event already delivered), so none is
//     missing for a change the client was watching;
//   - the next GetW sees at least the announced change;
//   - no event is delivered twice.
//
// Events in zxid order across keys are checked on the stream by the order
// checker (zxObserver).
type watchWork struct {
	e        *env
	seed     int64
	watchers int
	keys     []string
	cnt      counters // writes
	ev       counters // ok: events checked; fail: watch sessions that ended

	mu       sync.Mutex
	changes  map[string][]int64 // key -> acknowledged change zxids
	unsure   map[string]int     // key -> writes with unknown outcome
	problems []string
	regs     []watchReg
}

// watchReg is one watch: where it was set and what fired it.
type watchReg struct {
	client  string
	key     string
	regZxid int64
	evZxid  int64
	evType  client.EventType
	probeAt int64 // mzxid a probe saw while the event was not delivered (0: none)
	resumed bool  // fired by the re-registration of a resumed session
}

func newWatchWork(e *env, seed int64, watchers, keys int) *watchWork {
	w := &watchWork{e: e, seed: seed, watchers: watchers, changes: map[string][]int64{}, unsure: map[string]int{}}
	for i := 0; i < keys; i++ {
		w.keys = append(w.keys, fmt.Sprintf("/watch/w%d", i))
	}
	return w
}

func (w *watchWork) name() string        { return "watches" }
func (w *watchWork) counters() *counters { return &w.cnt }

func (w *watchWork) setup(ctx context.Context, cl *client.Client) error {
	if err := createAll(ctx, cl, "/watch", w.e.dataACL()); err != nil {
		return err
	}
	for _, k := range w.keys {
		_, st, err := cl.CreateStat(ctx, k, []byte("0"), client.CreateMode{ACL: w.e.dataACL()})
		if err != nil && !errors.Is(err, client.ErrNodeExists) {
			return err
		}
		w.changes[k] = append(w.changes[k], st.Mzxid)
	}
	return nil
}

func (w *watchWork) problem(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.problems) < 100 {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

func (w *watchWork) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.writer(ctx) }()
	for i := 0; i < w.watchers; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); w.watcher(ctx, i) }(i)
	}
	wg.Wait()
}

func (w *watchWork) writer(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(w.seed), 5000))
	var cl *client.Client
	for n := 0; n < 100000 && ctx.Err() == nil; n++ {
		if cl == nil {
			var err error
			if cl, _, err = w.e.newClient(ctx, "watches-writer"); err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
		}
		key := w.keys[rng.IntN(len(w.keys))]
		octx, cancel := context.WithTimeout(context.Background(), opTimeout)
		st, err := cl.Set(octx, key, []byte(fmt.Sprint(n)), -1)
		cancel()
		w.mu.Lock()
		switch {
		case err == nil:
			w.cnt.ok.Add(1)
			w.changes[key] = append(w.changes[key], st.Mzxid)
		case indeterminate(err):
			w.cnt.indet.Add(1)
			w.unsure[key]++
		default:
			w.cnt.fail.Add(1)
		}
		w.mu.Unlock()
		if ended(err) {
			cl = nil
		}
		sleep(ctx, time.Duration(20+rng.IntN(60))*time.Millisecond)
	}
}

func (w *watchWork) watcher(ctx context.Context, i int) {
	for gen := 0; gen < 1000 && ctx.Err() == nil; gen++ {
		name := fmt.Sprintf("watches-%d.%d", i, gen)
		cl, obs, err := w.e.newClient(ctx, name)
		if err != nil {
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		var wg sync.WaitGroup
		for _, key := range w.keys {
			wg.Add(1)
			go func(key string) { defer wg.Done(); w.watchKey(ctx, cl, obs, name, key) }(key)
		}
		wg.Wait()
		if ctx.Err() == nil {
			// The session ended: that is only expected if it expired.
			w.ev.fail.Add(1)
		}
	}
}

// watchKey keeps a watch on key until ctx ends or the session does.
func (w *watchWork) watchKey(ctx context.Context, cl *client.Client, obs *zxObserver, name, key string) {
	var prevEv int64
	seenEv := map[int64]bool{}
	for n := 0; n < 1000000 && ctx.Err() == nil; n++ {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		_, st, ch, err := cl.GetW(octx, key)
		cancel()
		if err != nil {
			if ended(err) {
				return
			}
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		if st.Mzxid < prevEv {
			w.problem("%s: GetW(%s) after event zxid %d returned older data (mzxid %d)", name, key, prevEv, st.Mzxid)
		}
		reg := watchReg{client: name, key: key, regZxid: st.Mzxid}
		ev, ok := w.await(ctx, cl, &reg, ch)
		if !ok {
			return
		}
		if ev.Type == client.EventNotWatching {
			return
		}
		reg.evZxid, reg.evType = ev.Zxid, ev.Type
		reg.resumed = obs.resumeEvent(key, ev.Zxid)
		if seenEv[ev.Zxid] {
			w.problem("%s: duplicate event %v %s zxid %d", name, ev.Type, key, ev.Zxid)
		}
		seenEv[ev.Zxid] = true
		prevEv = ev.Zxid
		w.ev.ok.Add(1)
		w.mu.Lock()
		w.regs = append(w.regs, reg)
		w.mu.Unlock()
	}
}

// await waits for the watch to fire, probing the key with plain Gets on the
// same session meanwhile: a Get that shows a change newer than the
// registration must find the event already delivered. It returns false when
// ctx ended first.
func (w *watchWork) await(ctx context.Context, cl *client.Client, reg *watchReg, ch <-chan client.Event) (client.Event, bool) {
	t := time.NewTicker(40 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case ev := <-ch:
			return ev, true
		case <-ctx.Done():
			// Last probe: the run is over and the cluster healthy.
			w.finalProbe(cl, reg, ch)
			return client.Event{}, false
		case <-t.C:
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		_, st, err := cl.Get(octx, reg.key)
		cancel()
		if err != nil || st.Mzxid <= reg.regZxid {
			continue
		}
		select {
		case ev := <-ch:
			return ev, true
		default:
			reg.probeAt = st.Mzxid
			w.problem("%s: Get(%s) returned mzxid %d before the event of the watch set at mzxid %d was delivered (event missing or late)",
				reg.client, reg.key, st.Mzxid, reg.regZxid)
			// Wait for it a little, to tell late from missing.
			select {
			case ev := <-ch:
				return ev, true
			case <-time.After(5 * time.Second):
				w.problem("%s: watch on %s set at mzxid %d: no event 5s after the change at %d was read", reg.client, reg.key, reg.regZxid, st.Mzxid)
				return client.Event{Type: client.EventNotWatching}, true
			}
		}
	}
}

// finalProbe: after the run, a sync+get that sees a change newer than a
// pending watch must find its event delivered.
func (w *watchWork) finalProbe(cl *client.Client, reg *watchReg, ch <-chan client.Event) {
	octx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if cl.Sync(octx, reg.key) != nil {
		return
	}
	_, st, err := cl.Get(octx, reg.key)
	if err != nil || st.Mzxid <= reg.regZxid {
		return
	}
	select {
	case ev := <-ch:
		if ev.Type != client.EventNotWatching {
			reg.evZxid, reg.evType = ev.Zxid, ev.Type
			w.mu.Lock()
			w.regs = append(w.regs, *reg)
			w.mu.Unlock()
			w.ev.ok.Add(1)
		}
	default:
		w.problem("%s: at the end, %s is at mzxid %d but the watch set at mzxid %d never fired", reg.client, reg.key, st.Mzxid, reg.regZxid)
	}
}

func (w *watchWork) check(ctx context.Context, cl *client.Client, v *verdict) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.problems {
		v.failf("%s", p)
	}
	for k := range w.changes {
		sort.Slice(w.changes[k], func(i, j int) bool { return w.changes[k][i] < w.changes[k][j] })
	}
	exact, resumedLater := 0, 0
	for _, r := range w.regs {
		ch := w.changes[r.key]
		i := sort.Search(len(ch), func(i int) bool { return ch[i] > r.regZxid })
		if r.evType != client.EventNodeDataChanged {
			v.failf("%s: unexpected event %v on %s", r.client, r.evType, r.key)
			continue
		}
		if r.evZxid <= r.regZxid {
			v.failf("%s: event on %s with zxid %d for a watch set at mzxid %d (not a later change)", r.client, r.key, r.evZxid, r.regZxid)
			continue
		}
		if i < len(ch) && r.evZxid > ch[i] && r.resumed {
			// A watch re-registered on another server fires with the
			// node's current mzxid: the server cannot know the first
			// change after the registration. Legitimate.
			resumedLater++
			continue
		}
		if i < len(ch) && r.evZxid > ch[i] {
			v.failf("%s: watch on %s set at mzxid %d fired for zxid %d, skipping the change at %d", r.client, r.key, r.regZxid, r.evZxid, ch[i])
			continue
		}
		if i < len(ch) && r.evZxid == ch[i] {
			exact++
		} else if w.unsure[r.key] == 0 {
			v.failf("%s: event on %s with zxid %d matches no write of the key", r.client, r.key, r.evZxid)
		}
	}
	v.notef("%d events checked (%d matched an acknowledged write exactly, %d fired on resume for a later change); %d watch sessions ended", len(w.regs), exact, resumedLater, w.ev.fail.Load())
	if len(w.regs) == 0 {
		v.failf("no watch event at all")
	}
}
