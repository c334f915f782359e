package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// The guarantee of issue 29: a lock holder learns it may have lost the lock
// (Lost closes) strictly before its session can expire on the leader, so
// before anyone else can take the lock. All times below come from this
// process's clock.

// takeover is what happened to a lock whose holder's server failed.
type takeover struct {
	lost     time.Time // the holder's Lost closed
	deleted  time.Time // an observer on the majority saw the holder's node go
	acquired time.Time // the waiter's Lock returned
	state    client.State
}

// holdThenFault has a holder, connected to server f only, take path; a
// waiter and an observer connect to the other servers; then fault runs,
// and the holder's session expires. It returns when the waiter has the
// lock.
func holdThenFault(t *testing.T, c *Cluster, f int, path string, fault func()) takeover {
	t.Helper()
	ctx := lockCtx(t, 90*time.Second)
	holderCl := lockClient(t, c.Members[f].Cfg.ClientAddr)
	holder := lockrecipe.NewMutex(lockrecipe.NewSession(holderCl), path)
	tok, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for i, m := range c.Members {
		if i != f {
			others = append(others, m.Cfg.ClientAddr)
		}
	}
	obs := lockClient(t, others...)
	waiter := lockrecipe.NewMutex(lockrecipe.NewSession(lockClient(t, others...)), path)
	type acq struct {
		tok lockrecipe.Token
		err error
		at  time.Time
	}
	acquired := make(chan acq, 1)
	go func() {
		tok, err := waiter.Lock(ctx)
		acquired <- acq{tok, err, time.Now()}
	}()
	var node string
	c.Eventually(10*time.Second, "the waiter in line", func() bool {
		kids, _, err := obs.Children(ctx, path)
		if err != nil || len(kids) != 2 {
			return false
		}
		for _, k := range kids {
			if st, ok, err := obs.Exists(ctx, path+"/"+k); err == nil && ok && st.EphemeralOwner == holderCl.SessionID() {
				node = path + "/" + k
			}
		}
		return node != ""
	})
	_, ok, watch, err := obs.ExistsW(ctx, node)
	if err != nil || !ok {
		t.Fatalf("watching the holder's node %s: %v (exists %v)", node, err, ok)
	}
	deleted := make(chan time.Time, 1)
	go func() {
		ev := <-watch
		if ev.Type == client.EventNodeDeleted {
			deleted <- time.Now()
		}
	}()
	lost := make(chan time.Time, 1)
	go func() {
		select {
		case <-holder.Lost():
			lost <- time.Now()
		case <-ctx.Done():
		}
	}()
	c.Eventually(10*time.Second, "a vouch for the holder", func() bool {
		conf := holderCl.Confirmation()
		return conf.Vouched && time.Since(conf.Sent) < time.Second
	})

	start := time.Now()
	fault()
	var out takeover
	select {
	case a := <-acquired:
		if a.err != nil || a.tok <= tok {
			t.Fatalf("waiter: token %d (holder had %d): %v", a.tok, tok, a.err)
		}
		out.acquired = a.at
	case <-ctx.Done():
		t.Fatal("the waiter never acquired")
	}
	select {
	case out.deleted = <-deleted:
	case <-ctx.Done():
		t.Fatal("the observer never saw the holder's node deleted")
	}
	select {
	case out.lost = <-lost:
	default:
		t.Fatalf("the waiter acquired %v after the fault, the holder's Lost is still open (state %v)",
			out.acquired.Sub(start).Round(time.Millisecond), holderCl.State())
	}
	out.state = holderCl.State()
	t.Logf("after the fault: holder lost at %v, node deleted at %v, waiter acquired at %v (holder now %v)",
		out.lost.Sub(start).Round(time.Millisecond), out.deleted.Sub(start).Round(time.Millisecond),
		out.acquired.Sub(start).Round(time.Millisecond), out.state)
	if !out.lost.Before(out.deleted) || !out.lost.Before(out.acquired) {
		t.Fatalf("the holder learnt of its loss %v after its node was deleted, %v after the waiter acquired",
			out.lost.Sub(out.deleted), out.lost.Sub(out.acquired))
	}
	return out
}

// TestLockLostBeforeTakeoverPartition: the holder's server is cut off from
// the others. With a 2s election timeout it notices it has no leader only
// after 2-4s, and goes on answering pings for twice that more, past the
// moment the leader expires the session (4s): before vouches the holder
// learnt of its loss after the waiter had the lock. It stops vouching at
// once, so the holder is suspended first.
func TestLockLostBeforeTakeoverPartition(t *testing.T) {
	c := New(t, 3, Options{ElectionTimeout: 2 * time.Second})
	f := c.Follower()
	holdThenFault(t, c, f, "/locks/partition", func() { c.Isolate(f) })
}

// TestLockLostBeforeTakeoverSlowLink: everything the holder's server sends
// to the others arrives 6s late (more than the session timeout and than
// Raft's 5s I/O timeout). It keeps its leader for a while and goes on
// answering pings, while its keep-alives reach the leader too late; its
// vouches stop, so the holder is suspended before the leader expires the
// session.
func TestLockLostBeforeTakeoverSlowLink(t *testing.T) {
	c := New(t, 3, Options{ElectionTimeout: 2 * time.Second})
	f := c.Follower()
	holdThenFault(t, c, f, "/locks/slow", func() {
		for i, m := range c.Members {
			if i != f {
				c.Net.SetDelay(c.Members[f].ID, m.ID, 6*time.Second)
			}
		}
	})
}

// TestLeaderChangeKeepsLock: a leader change alone, a transfer or the
// leader's crash, while the holder's server stays in the majority, does not
// suspend the session (a new leader gives every session a full timeout, and
// the holder's server vouches again as soon as it has one): Lost stays
// open, and the holder writes under its lock afterwards.
func TestLeaderChangeKeepsLock(t *testing.T) {
	for _, how := range []string{"transfer", "stop"} {
		t.Run(how, func(t *testing.T) {
			c := New(t, 3, Options{})
			ctx := lockCtx(t, 60*time.Second)
			l := c.LeaderIndex()
			f := c.Follower()
			third := 3 - l - f
			holderCl := lockClient(t, c.Members[f].Cfg.ClientAddr)
			m := lockrecipe.NewMutex(lockrecipe.NewSession(holderCl), "/locks/change")
			if _, err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := holderCl.Create(ctx, "/guarded", nil, client.CreateMode{}); err != nil {
				t.Fatal(err)
			}
			_, states, stop := holderCl.NotifyStates()
			defer stop()
			changed := time.Now()
			switch how {
			case "transfer":
				to := c.Members[third]
				if err := c.Members[l].Node().Raft().LeadershipTransferToServer(raft.ServerID(to.ID), raft.ServerAddress(to.Cfg.PeerAddr)).Error(); err != nil {
					t.Fatalf("leadership transfer: %v", err)
				}
			case "stop":
				c.Stop(l)
			}
			nl := c.WaitLeader(15 * time.Second)
			if nl == l || (how == "transfer" && nl != third) {
				t.Fatalf("leader %s after the change", c.Members[nl].ID)
			}
			t.Logf("new leader %s after %v", c.Members[nl].ID, time.Since(changed).Round(time.Millisecond))
			// Two session timeouts: any suspension would have come by then.
			window := time.NewTimer(2 * holderCl.SessionTimeout())
			defer window.Stop()
		watch:
			for {
				select {
				case ev := <-states:
					t.Fatalf("state %v after the leader change (%v)", ev.State, ev.Err)
				case <-m.Lost():
					t.Fatal("Lost closed after the leader change")
				case <-window.C:
					break watch
				}
			}
			if conf := holderCl.Confirmation(); conf.Suspended || !conf.Sent.After(changed) {
				t.Fatalf("confirmation %+v: want one sent after the change at %v", conf, changed)
			}
			if _, err := m.GuardedMulti(ctx, client.SetOp("/guarded", []byte(fmt.Sprint(how)), -1)); err != nil {
				t.Fatalf("a guarded write after the change: %v", err)
			}
		})
	}
}
