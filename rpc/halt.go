package rpc

// A server stops itself when its state machine meets a log entry it can
// neither apply nor skip (fsm.Options.Halt): a damaged entry, or one of a
// newer coordd. Serving or voting on would mean serving a state the other
// servers do not have. The state machine stops applying at once; the server
// then closes (clients move to other servers) and Halted says why.

// halt records why the server stops and has it closed. It is called from
// the FSM with its lock held, inside Raft's apply loop: it must not block,
// so the closing happens in a goroutine of its own (Close waits for Raft,
// and Raft for the apply loop).
func (n *Node) halt(err error) {
	n.haltOnce.Do(func() {
		n.haltErr = err
		close(n.halted)
		go func() {
			n.log.Error("stopping this server: its log cannot be applied", "err", err)
			// Not before NewNode has built everything Close stops (the
			// FSM applies from inside raft.NewRaft); a NewNode that
			// failed cleaned up after itself.
			select {
			case <-n.built:
				n.Close()
			case <-n.ctx.Done():
			}
		}()
	})
}

// Halted is closed when the server stopped itself because its log holds an
// entry it can neither apply nor skip; HaltErr then says which and why.
func (n *Node) Halted() <-chan struct{} { return n.halted }

// HaltErr returns why the server stopped itself (nil while it has not).
func (n *Node) HaltErr() error {
	select {
	case <-n.halted:
		return n.haltErr
	default:
		return nil
	}
}
