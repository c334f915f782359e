package bench

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/coordd/coordd/rpc/apipb"
)

// Bench is one invocation: the protocol its sessions speak, the admin
// session that sets up and cleans up, and the runs. Open it, Run the
// specs, Close it.
type Bench struct {
	ctx   context.Context // ends every run (an interrupt)
	cfg   Config
	proto protocol
	admin session // setup, cleanup and the watch workload's writer
	value []byte  // the value every write writes
	// noStatus is set when Config.Status is nil, or when a ZooKeeper-
	// protocol bench finds that the servers do not answer it (they are not
	// coordd's): the results carry no usage.
	noStatus bool
}

// Open checks cfg, connects the admin session and creates cfg.Root. The
// end of ctx (an interrupt) ends the run under way and the runs after it;
// Close still cleans up.
func Open(ctx context.Context, cfg Config) (*Bench, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	b := &Bench{ctx: ctx, cfg: cfg, noStatus: cfg.Status == nil}
	b.value = make([]byte, cfg.ValueSize)
	for i := range b.value {
		b.value[i] = byte('a' + rand.IntN(26))
	}
	if cfg.Protocol == ProtocolZK {
		b.proto = newZK(&b.cfg)
	} else {
		b.proto = newGRPC(&b.cfg)
	}
	admin, err := b.proto.admin(ctx, cfg.Servers)
	if err != nil {
		b.proto.close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	b.admin = admin
	if err := b.ensure(cfg.Root); err != nil {
		b.closeAdmin()
		return nil, fmt.Errorf("bench: %w", err)
	}
	// Whether the servers are coordd's, which report their usage.
	if cfg.Protocol == ProtocolZK && b.status() == nil {
		b.noStatus = true
	}
	return b, nil
}

// Run runs the specs (as Plan makes them) in order and returns the
// results of those that ran; emit, if set, is given each result as its run
// ends. A run that cannot set up is logged and the next one runs; an
// interrupt (ctx) ends the runs. The error counts the failed operations
// and runs, with the first.
func (b *Bench) Run(specs []Spec, emit func(Result) error) ([]Result, error) {
	for _, s := range specs {
		if lookup(s.Workload) == nil {
			return nil, fmt.Errorf("bench: unknown workload %q", s.Workload)
		}
	}
	var results []Result
	var failed int64
	var firstErr string
	for _, s := range specs {
		if b.ctx.Err() != nil {
			break
		}
		rs, err := lookup(s.Workload).run(b, s)
		if err != nil {
			if b.ctx.Err() != nil {
				break
			}
			failed++
			msg := fmt.Sprintf("%s/%d: %s", s.Workload, s.Clients, b.cfg.errText(err))
			if firstErr == "" {
				firstErr = msg
			}
			fmt.Fprintf(b.cfg.Log, "coordctl: bench %s\n", msg)
			continue
		}
		for _, r := range rs {
			r.Protocol = b.cfg.Protocol
			results = append(results, r)
			if r.Errors > 0 {
				failed += r.Errors
				if firstErr == "" {
					firstErr = fmt.Sprintf("%s/%d: %s", s.Workload, s.Clients, r.FirstError)
				}
			}
			if emit != nil {
				if err := emit(r); err != nil {
					return results, err
				}
			}
		}
	}
	if err := b.ctx.Err(); err != nil {
		return results, err
	}
	if failed > 0 {
		return results, fmt.Errorf("bench: %d failed operations or runs; first: %s", failed, firstErr)
	}
	return results, nil
}

// Close deletes cfg.Root and everything below it, unless cfg.Keep (a
// failure is logged), and closes the admin session.
func (b *Bench) Close() {
	if !b.cfg.Keep {
		if err := b.deleteTree(b.cfg.Root); err != nil && !noNode(err) {
			fmt.Fprintf(b.cfg.Log, "coordctl: bench: cleaning up %s: %s\n", b.cfg.Root, b.cfg.errText(err))
		}
	}
	b.closeAdmin()
}

func (b *Bench) closeAdmin() {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	b.admin.close(ctx)
	b.proto.close()
}

// status asks the cluster for every member's usage; nil if it cannot.
func (b *Bench) status() *apipb.StatusResponse {
	if b.noStatus {
		return nil
	}
	resp, err := b.cfg.Status()
	if err != nil {
		return nil
	}
	return resp
}
