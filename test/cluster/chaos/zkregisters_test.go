package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"

	"github.com/coordd/coordd/client"
)

// zkRegisters drives the registers workload's keys through ZooKeeper's
// client protocol, with an unchanged ZooKeeper client library
// (go-zookeeper): setData, versioned setData (CAS) and sync+getData. Its
// operations go into the registers' history, beside those of the Go client,
// so one porcupine check covers both protocols at once: a ZooKeeper
// client's write must be seen by a gRPC client's linearizable read, and the
// other way round.
//
// go-zookeeper never re-sends a request: one in flight when its connection
// breaks fails with ErrConnectionClosed, and its outcome is unknown (it may
// still apply); such an operation is recorded without a return, never as
// failed.
type zkRegisters struct {
	r       *registers
	workers int
	cnt     counters
}

func newZKRegisters(r *registers, workers int) *zkRegisters {
	return &zkRegisters{r: r, workers: workers}
}

func (z *zkRegisters) name() string        { return "zk-registers" }
func (z *zkRegisters) counters() *counters { return &z.cnt }

// setup does nothing: the registers workload creates the keys.
func (z *zkRegisters) setup(context.Context, *client.Client) error { return nil }

func (z *zkRegisters) run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := 0; w < z.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			z.worker(ctx, w)
		}(w)
	}
	wg.Wait()
}

// zkDefinite reports whether a go-zookeeper error says the request did not
// apply.
func zkDefinite(err error) bool {
	return errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadArguments)
}

type zkQuietLogger struct{}

func (zkQuietLogger) Printf(string, ...any) {}

func (z *zkRegisters) worker(ctx context.Context, w int) {
	r := z.r
	rng := rand.New(rand.NewPCG(uint64(r.seed), uint64(2000+w)))
	known := map[string]int32{}
	lane := r.lane()
	var conn *zk.Conn
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
	for n := 0; n < 200000 && ctx.Err() == nil; n++ {
		if conn == nil {
			c, _, err := zk.Connect(r.e.c.servers(), workloadSessionTimeout, zkOptions(r.e.c, zk.WithLogInfo(false), zk.WithLogger(zkQuietLogger{}))...)
			if err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			conn = c
			// A request waits for as long as the connection does: closing
			// it at the end of the run fails what is in flight.
			stopClose = context.AfterFunc(ctx, c.Close)
			// With -chaos.acl, authenticate once; go-zookeeper sends the
			// identity again after each reconnect (as ZooKeeper's clients
			// do), which changes nothing on the server.
			if err := zkAuthenticate(r.e, c); err != nil {
				drop()
				sleep(ctx, 500*time.Millisecond)
				continue
			}
		}
		key := r.keys[rng.IntN(len(r.keys))]
		in := regInput{Op: rng.IntN(3), Key: key, Value: fmt.Sprintf("zk%d-%d", w, n)}
		if in.Op == opCAS {
			in.Expect = known[key] + int32(rng.IntN(2))
		}
		call := r.e.since().Nanoseconds()
		var out regOutput
		var err error
		switch in.Op {
		case opWrite, opCAS:
			version := int32(-1)
			if in.Op == opCAS {
				version = in.Expect
			}
			var st *zk.Stat
			st, err = conn.Set(key, []byte(in.Value), version)
			if err == nil {
				out.Version = st.Version
			}
			if in.Op == opCAS && errors.Is(err, zk.ErrBadVersion) {
				out.BadVersion, err = true, nil
			}
		default:
			// ZooKeeper's linearizable read: sync, then getData on the
			// same connection.
			var data []byte
			var st *zk.Stat
			if _, err = conn.Sync(key); err == nil {
				data, st, err = conn.Get(key)
			}
			if err == nil {
				out.Value, out.Version = string(data), st.Version
			}
		}
		ret := r.e.since().Nanoseconds()
		if errors.Is(err, zk.ErrNoAuth) {
			r.e.authProblem("zk-registers worker %d (session %#x, authenticated): %s refused: %v", w, conn.SessionID(), r.describe(in), err)
		}
		switch {
		case err == nil:
			z.cnt.ok.Add(1)
			if !out.BadVersion {
				known[key] = out.Version
			}
			r.record(porcupine.Operation{ClientId: lane, Input: in, Call: call, Output: out, Return: ret})
		case in.Op == opSyncRead:
			z.cnt.fail.Add(1) // a failed read has no effect
		case zkDefinite(err):
			z.cnt.fail.Add(1)
			r.e.logf("zk-registers: %s: definite error %v", r.describe(in), err)
		default:
			z.cnt.indet.Add(1)
			r.record(porcupine.Operation{ClientId: lane, Input: in, Call: call, Output: regOutput{Unknown: true}})
			lane = r.lane()
		}
		if errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrNoServer) {
			drop()
		}
		sleep(ctx, time.Duration(5+rng.IntN(25))*time.Millisecond)
	}
}
