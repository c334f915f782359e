package rpc

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
)

// TestRestartedFollowerReachableAtOnce: a follower started again while
// the leader's connection to it waits out a reconnect backoff is reachable
// in the leader's status from the next asking, not once the backoff has
// run out. Before, every Info question failed at once during the backoff
// (gRPC's default, 1 s growing by 1.6 to 120 s; a minute here): under
// load, a server back in seconds showed as unreachable in coordctl status
// for up to 80 s (issue 36).
func TestRestartedFollowerReachableAtOnce(t *testing.T) {
	defer func(b backoff.Config) { peerBackoff = b }(peerBackoff)
	peerBackoff = backoff.Config{BaseDelay: time.Minute, Multiplier: 1.6, MaxDelay: 2 * time.Minute}
	o := stopFollower(t, func(*Config) {})
	cc, err := o.leader.peers.conn(o.cfg.PeerAddr)
	if err != nil {
		t.Fatal(err)
	}
	// The leader asks the stopped follower, fails, and backs off.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for st := cc.GetState(); st != connectivity.TransientFailure; st = cc.GetState() {
		if _, err := o.leader.status(ctx); err != nil {
			t.Fatal(err)
		}
		if st == connectivity.Idle {
			continue // the question made it connect
		}
		if !cc.WaitForStateChange(ctx, st) {
			t.Fatalf("the leader's connection to the stopped follower stays %v", st)
		}
	}
	back, _ := o.restart(t, 10*time.Second)
	// The first asking may fail (the connection is still failed), and
	// makes it connect again at once; well before the minute's backoff.
	wait, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	for asked := 1; ; asked++ {
		resp, err := o.leader.status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reachable := false
		for _, m := range resp.Members {
			reachable = reachable || m.Id == back.ID() && m.Role != "unreachable"
		}
		if reachable {
			return
		}
		if wait.Err() != nil || !cc.WaitForStateChange(wait, connectivity.TransientFailure) {
			t.Fatalf("the follower, back and caught up, is unreachable in the leader's status for 10s (%d askings)", asked)
		}
	}
}
