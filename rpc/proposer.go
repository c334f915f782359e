package rpc

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/rpc/peerpb"
)

// proposer gets this server's commands into the Raft log, in the order they
// were submitted: straight into Raft when this server leads, otherwise over
// one ordered Forward stream to the leader. A command is kept until the
// leader confirms it was committed; on a leader change or a broken stream
// every unconfirmed command is sent again, in order. That is safe because
// the FSM applies a client write at most once per (session, xid); the
// server learns the outcome from its own FSM, not from this path.
type proposer struct {
	n *Node

	mu      sync.Mutex
	pending []*proposal // not yet confirmed, in submission order
	nextSeq uint64
	wake    chan struct{}
	// leaderChanged receives Raft's LeaderObservations (run's observer;
	// one pending at most, the rest dropped): a leader change ends a wait
	// for one at once.
	leaderChanged chan raft.Observation
}

type proposal struct {
	seq  uint64
	data []byte // marshalled cmdpb.Command without time_ms
	cmd  *cmdpb.Command
}

func newProposer(n *Node) *proposer {
	return &proposer{n: n, wake: make(chan struct{}, 1), leaderChanged: make(chan raft.Observation, 1)}
}

// submit queues a command; it never blocks on the network.
func (p *proposer) submit(cmd *cmdpb.Command) {
	data, err := proto.Marshal(cmd)
	if err != nil {
		p.n.log.Error("cannot marshal command", "err", err)
		return
	}
	p.mu.Lock()
	p.nextSeq++
	p.pending = append(p.pending, &proposal{seq: p.nextSeq, data: data, cmd: cmd})
	p.mu.Unlock()
	p.n.metrics.Proposed()
	p.poke()
}

func (p *proposer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// confirm drops the proposals up to seq: the leader committed them
// (confirmations are cumulative; commands commit in submission order).
func (p *proposer) confirm(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.pending), func(i int) bool { return p.pending[i].seq > seq })
	clear(p.pending[:i])
	p.pending = p.pending[i:]
}

// snapshotFrom returns the pending proposals with seq > after.
func (p *proposer) snapshotFrom(after uint64) []*proposal {
	p.mu.Lock()
	defer p.mu.Unlock()
	// pending is in seq order: find the first one after `after`.
	i := sort.Search(len(p.pending), func(i int) bool { return p.pending[i].seq > after })
	return append([]*proposal(nil), p.pending[i:]...)
}

func (p *proposer) run() {
	obs := raft.NewObserver(p.leaderChanged, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	p.n.raft.RegisterObserver(obs)
	defer p.n.raft.DeregisterObserver(obs)
	for p.n.ctx.Err() == nil {
		addr, id := p.n.raft.LeaderWithID()
		switch {
		case id == "":
			p.waitLeaderChange(50 * time.Millisecond)
		case string(id) == p.n.cfg.ID:
			p.runLocal()
			if p.n.raft.State() == raft.Leader {
				// Raft refused a command while it still leads: a
				// leadership transfer is under way (Close hands over).
				p.waitLeaderChange(50 * time.Millisecond)
			}
		default:
			if err := p.runForward(string(addr)); err != nil && p.n.ctx.Err() == nil {
				p.n.log.Debug("forwarding to leader", "leader", id, "err", err)
				p.waitLeaderChange(50 * time.Millisecond)
			}
		}
	}
}

// waitLeaderChange waits until Raft reports a change of leader (one
// reported since the last wait counts), for at most d.
func (p *proposer) waitLeaderChange(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.leaderChanged:
	case <-p.n.ctx.Done():
	}
}

// stamp sets the leader's time on a command and marshals it.
//
// Submitted commands carry no time (time_ms is 0, so absent from the
// encoding); appending the field to the encoded bytes is the same as setting
// it, without decoding and re-encoding every command on the leader.
func stamp(data []byte) []byte {
	out := make([]byte, 0, len(data)+11)
	out = append(out, data...)
	out = protowire.AppendTag(out, timeMsField, protowire.VarintType)
	return protowire.AppendVarint(out, uint64(time.Now().UnixMilli()))
}

// timeMsField is cmdpb.Command's time_ms field number.
const timeMsField = 1

// applied is a proposal handed to Raft, with its future.
type applied struct {
	seq uint64
	f   raft.ApplyFuture
}

// runLocal proposes straight into Raft while this server is the leader.
func (p *proposer) runLocal() {
	futures := make(chan applied, 4096)
	failed := make(chan struct{}, 1)
	// The waiter is not joined: hashicorp/raft abandons futures still
	// queued when it shuts down, so one may never resolve. The waiter then
	// stays parked until the process exits instead of blocking shutdown.
	go func() {
		// Confirmations are cumulative, so after a failure nothing later is
		// confirmed: the failed command must stay pending to be sent again
		// (what follows it is sent again too; the FSM applies it once).
		broken := false
		for a := range futures {
			if broken {
				continue
			}
			if err := a.f.Error(); err != nil {
				broken = true
				select {
				case failed <- struct{}{}:
				default:
				}
				continue
			}
			p.confirm(a.seq)
		}
	}()
	var sent uint64
	defer close(futures)
	for {
		if p.n.raft.State() != raft.Leader || p.n.ctx.Err() != nil {
			return
		}
		for _, q := range p.snapshotFrom(sent) {
			data := stamp(q.data)
			select {
			case futures <- applied{seq: q.seq, f: p.n.raft.Apply(data, 0)}:
			case <-p.n.ctx.Done():
				return
			}
			sent = q.seq
		}
		select {
		case <-p.wake:
		case <-failed:
			// Leadership was lost or Raft shut down: retry from the start.
			return
		case <-time.After(100 * time.Millisecond):
		case <-p.n.ctx.Done():
			return
		}
	}
}

// runForward streams pending commands to the leader at addr until the
// stream breaks or the leader changes.
func (p *proposer) runForward(addr string) error {
	cc, err := p.n.peers.conn(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(p.n.ctx)
	defer cancel()
	stream, err := peerpb.NewPeerClient(cc).Forward(ctx)
	if err != nil {
		return err
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if resp.Error != "" {
				if resp.NotLeader {
					recvErr <- errNoLeader
				} else {
					recvErr <- errors.New(resp.Error)
				}
				return
			}
			p.confirm(resp.Seq)
		}
	}()
	var sent uint64
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for {
		for _, q := range p.snapshotFrom(sent) {
			if err := stream.Send(&peerpb.ForwardRequest{Seq: q.seq, Command: q.data}); err != nil {
				return err
			}
			p.n.metrics.Forwarded()
			sent = q.seq
		}
		select {
		case <-p.wake:
		case err := <-recvErr:
			return err
		case <-tk.C:
			if _, id := p.n.raft.LeaderWithID(); string(id) == p.n.cfg.ID || addrOf(p.n.raft) != addr {
				return nil
			}
		case <-p.leaderChanged:
			if _, id := p.n.raft.LeaderWithID(); string(id) == p.n.cfg.ID || addrOf(p.n.raft) != addr {
				return nil
			}
		case <-p.n.ctx.Done():
			return nil
		}
	}
}

func addrOf(r *raft.Raft) string {
	a, _ := r.LeaderWithID()
	return string(a)
}
