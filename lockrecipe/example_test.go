package lockrecipe_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
	"github.com/coordd/coordd/rpc"
)

// startServer runs a single-node coordd server on free 127.0.0.1 ports for
// an example and returns its client address and a stop function.
func startServer() (string, func()) {
	// Both probes are open at once, so that the two addresses differ, and
	// closed before the server listens on them.
	var addrs [2]string
	var probes [2]net.Listener
	for i := range probes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		probes[i], addrs[i] = ln, ln.Addr().String()
	}
	for _, ln := range probes {
		ln.Close()
	}
	dir, err := os.MkdirTemp("", "lockrecipe-example")
	if err != nil {
		log.Fatal(err)
	}
	n, err := rpc.NewNode(rpc.Config{ID: "1", DataDir: dir, ClientAddr: addrs[0], PeerAddr: addrs[1],
		Tick: 200 * time.Millisecond, HeartbeatTimeout: 300 * time.Millisecond,
		ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 200 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !n.IsLeader() {
		if time.Now().After(deadline) {
			log.Fatal("no leader")
		}
		time.Sleep(10 * time.Millisecond) // poll: an example has no test helper
	}
	return n.ClientAddr(), func() { n.Close(); os.RemoveAll(dir) }
}

// newSession connects a client and wraps it in a Session.
func newSession(ctx context.Context, addr string) (*lockrecipe.Session, func()) {
	c, err := client.Connect(ctx, []string{addr}, client.WithSessionTimeout(4*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	return lockrecipe.NewSession(c), func() { c.Close(context.Background()) }
}

// ExampleMutex takes a lock, writes under its guard, and shows that a
// second owner cannot take it meanwhile.
func ExampleMutex() {
	addr, stop := startServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s1, close1 := newSession(ctx, addr)
	defer close1()
	s2, close2 := newSession(ctx, addr)
	defer close2()

	m := lockrecipe.NewMutex(s1, "/app/locks/report")
	token, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked, token > 0:", token > 0)

	// Writes that apply only while the lock is still held.
	if _, err := m.GuardedMulti(ctx, client.CreateOp("/app/report", []byte("done"), client.CreateMode{})); err != nil {
		log.Fatal(err)
	}

	other := lockrecipe.NewMutex(s2, "/app/locks/report")
	_, err = other.TryLock(ctx)
	fmt.Println("other owner:", err)

	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	token2, err := other.TryLock(ctx)
	fmt.Println("other owner after unlock:", err, "newer token:", token2 > token)
	// Output:
	// locked, token > 0: true
	// other owner: lockrecipe: locked by another owner
	// other owner after unlock: <nil> newer token: true
}

// ExampleRWMutex shows readers sharing the lock and a writer waiting for
// them.
func ExampleRWMutex() {
	addr, stop := startServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s1, close1 := newSession(ctx, addr)
	defer close1()
	s2, close2 := newSession(ctx, addr)
	defer close2()

	reader1 := lockrecipe.NewRWMutex(s1, "/config/lock")
	reader2 := lockrecipe.NewRWMutex(s2, "/config/lock")
	writer := lockrecipe.NewRWMutex(s2, "/config/lock")

	if _, err := reader1.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := reader2.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers hold the lock")
	_, err := writer.TryLock(ctx)
	fmt.Println("writer:", err)

	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := writer.Lock(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Println("writer holds the lock")
	}()
	reader1.RUnlock(ctx)
	reader2.RUnlock(ctx)
	<-done
	writer.Unlock(ctx)
	// Output:
	// two readers hold the lock
	// writer: lockrecipe: locked by another owner
	// writer holds the lock
}

// ExampleElection elects a leader, observes it, and hands leadership over
// when it resigns.
func ExampleElection() {
	addr, stop := startServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s1, close1 := newSession(ctx, addr)
	defer close1()
	s2, close2 := newSession(ctx, addr)
	defer close2()

	alice := lockrecipe.NewElection(s1, "/service/leader")
	queued := make(chan struct{}, 1)
	bob := lockrecipe.NewElection(s2, "/service/leader", lockrecipe.WithObserver(func(ev lockrecipe.LockEvent) {
		if ev.Kind == lockrecipe.LockWatching {
			queued <- struct{}{} // bob waits behind alice
		}
	}))

	if err := alice.Campaign(ctx, "alice:8080"); err != nil {
		log.Fatal(err)
	}
	leaders := bob.Observe(ctx)
	fmt.Println("leader:", <-leaders)

	elected := make(chan error, 1)
	go func() { elected <- bob.Campaign(ctx, "bob:8080") }()
	<-queued

	if err := alice.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	if err := <-elected; err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", <-leaders)
	select {
	case <-alice.Lost():
		fmt.Println("alice no longer leads")
	default:
	}
	// Output:
	// leader: alice:8080
	// leader: bob:8080
	// alice no longer leads
}
