package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/rpc"
)

// TestZKLockDelay: go-zookeeper's own Lock, unchanged, on a cluster with
// --lock-delay /locks=2s. A holder that releases (Unlock) or closes its
// session hands the lock to the waiter at once; a holder that vanishes (its
// connections cut, as a frozen process's) loses its session after its
// timeout, and the waiter acquires only once the lock-delay, counted from
// the expiry, has passed. Meanwhile coordd's own client sees the holder's
// node kept and until when (Stat.LockDelayUntil, lockrecipe.Inspect).
func TestZKLockDelay(t *testing.T) {
	const delay = 2 * time.Second
	c := New(t, 3, Options{LockDelays: []rpc.LockDelay{{Prefix: "/locks", Delay: delay}}})
	servers := c.Servers()
	observer := lockClient(t, servers...)
	for _, tc := range []struct {
		name    string
		release func(l *zk.Lock, cl *zkClient, d *blockDialer)
		expire  bool
	}{
		{"unlock", func(l *zk.Lock, _ *zkClient, _ *blockDialer) {
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"close", func(_ *zk.Lock, cl *zkClient, _ *blockDialer) { cl.Close() }, false},
		{"expiry", func(_ *zk.Lock, _ *zkClient, d *blockDialer) { d.block(true) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/locks/" + tc.name
			d := &blockDialer{}
			holder := zkConnect(t, servers, zkOpts{timeout: time.Second, dial: d.dial})
			waiter := zkConnect(t, servers, zkOpts{})
			hl := zk.NewLock(holder.Conn, path, zkACL)
			if err := hl.Lock(); err != nil {
				t.Fatal(err)
			}
			acquired := make(chan time.Time, 1)
			go func() {
				if err := zk.NewLock(waiter.Conn, path, zkACL).Lock(); err == nil {
					acquired <- time.Now()
				}
			}()
			Eventually(t, 10*time.Second, "the waiter queued", func() bool {
				kids, _, err := waiter.Children(path)
				return err == nil && len(kids) == 2
			})
			// The console's view: WatchContenders, whose readings must show
			// the lock-delay though no node changes when it begins.
			var watched atomic.Bool
			wctx, stopWatch := context.WithCancel(context.Background())
			defer stopWatch()
			go func() {
				_ = lockrecipe.WatchContenders(wctx, observer, path, func(cs lockrecipe.Contenders) {
					if len(cs.Holders) == 1 && !cs.Holders[0].LockDelayUntil.IsZero() {
						watched.Store(true)
					}
				})
			}()
			released := time.Now()
			tc.release(hl, holder, d)
			if !tc.expire {
				select {
				case at := <-acquired:
					if wait := at.Sub(released); wait > delay/2 {
						t.Fatalf("acquired %v after a clean release", wait)
					}
					t.Logf("acquired %v after the release", at.Sub(released).Round(time.Millisecond))
				case <-time.After(10 * time.Second):
					t.Fatal("the waiter never acquired")
				}
				return
			}
			// The holder's session expires; its node stays, and coordd's
			// client sees until when.
			var until time.Time
			var node string
			Eventually(t, 10*time.Second, "the holder's node kept for its lock-delay", func() bool {
				cs, err := lockrecipe.Inspect(context.Background(), observer, path)
				if err != nil || len(cs.Holders) != 1 || cs.Holders[0].LockDelayUntil.IsZero() {
					return false
				}
				if cs.Holders[0].Session != holder.SessionID() {
					t.Fatalf("the holder is session %#x, not %#x", cs.Holders[0].Session, holder.SessionID())
				}
				until, node = cs.Holders[0].LockDelayUntil, cs.Holders[0].Node
				return true
			})
			Eventually(t, 5*time.Second, "WatchContenders to show the lock-delay", watched.Load)
			if expiry := until.Add(-delay); expiry.Before(released) {
				t.Fatalf("the delay runs from %v, before the holder was cut off (%v)", expiry, released)
			}
			select {
			case at := <-acquired:
				t.Fatalf("acquired at %v, during the lock-delay (until %v)", at, until)
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = observer.Sync(ctx, path)
			kids, _, err := observer.Children(ctx, path)
			if err != nil || len(kids) != 2 {
				t.Fatalf("during the delay %s holds %v (%v)", path, kids, err)
			}
			_, st, err := observer.Get(ctx, path+"/"+node)
			if err != nil || st.EphemeralOwner != holder.SessionID() || st.LockDelayUntil != until.UnixMilli() {
				t.Fatalf("the kept node's stat: %+v, %v", st, err)
			}
			select {
			case at := <-acquired:
				if at.Before(until) {
					t.Fatalf("acquired at %v, %v before the lock-delay ended", at, until.Sub(at))
				}
				if late := at.Sub(until); late > 2*time.Second {
					t.Fatalf("acquired %v after the lock-delay ended", late)
				}
				t.Logf("holder cut off at %v, its session expired at %v (+%v), the waiter acquired at %v (+%v after the expiry, +%v after the delay)",
					released.Format("15:04:05.000"), until.Add(-delay).Format("15:04:05.000"), until.Add(-delay).Sub(released).Round(time.Millisecond),
					at.Format("15:04:05.000"), at.Sub(until.Add(-delay)).Round(time.Millisecond), at.Sub(until).Round(time.Millisecond))
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter never acquired")
			}
			// The holder, back, learns that its session expired.
			d.block(false)
			holder.waitState(t, zk.StateExpired, 20*time.Second)
		})
	}
}
