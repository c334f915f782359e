package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/lockrecipe"
)

// coordd's own protocol: sessions of package client over the gRPC API.

// watchBuffer is the channel buffer of the benchmark's watches: their
// readers keep up, and 10 000 persistent watches at the client's default
// buffer would take half a gigabyte of this process.
const watchBuffer = 64

// grpcProtocol opens coordd's client sessions.
type grpcProtocol struct {
	opts    []client.Option // every session's: timeout, TLS
	pool    *client.Pool    // connections the measured sessions share, or nil
	timeout time.Duration   // to open a session
}

func newGRPC(cfg *Config) *grpcProtocol {
	p := &grpcProtocol{opts: []client.Option{client.WithSessionTimeout(cfg.SessionTimeout)}, timeout: cfg.Timeout}
	if cfg.TLS != nil {
		p.opts = append(p.opts, client.WithTLS(cfg.TLS))
	}
	if cfg.ShareConns {
		p.pool = client.NewPool()
	}
	return p
}

func (p *grpcProtocol) open(ctx context.Context, servers []string) (session, error) {
	opts := append(append([]client.Option(nil), p.opts...), client.WithWatchBuffer(watchBuffer))
	if p.pool != nil {
		opts = append(opts, client.WithPool(p.pool))
	}
	return p.connect(ctx, servers, opts)
}

func (p *grpcProtocol) admin(ctx context.Context, servers []string) (session, error) {
	return p.connect(ctx, servers, p.opts)
}

// connect opens a session with opts on one of servers, within the timeout.
func (p *grpcProtocol) connect(ctx context.Context, servers []string, opts []client.Option) (session, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cl, err := client.Connect(ctx, servers, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %w", strings.Join(servers, ","), err)
	}
	return &grpcSession{cl: cl}, nil
}

func (p *grpcProtocol) close() {
	if p.pool != nil {
		p.pool.Close()
	}
}

// grpcSession is a session of coordd's client.
type grpcSession struct {
	cl *client.Client
}

func (s *grpcSession) server() string { return s.cl.Server() }

func (s *grpcSession) set(ctx context.Context, path string, data []byte) (int64, error) {
	st, err := s.cl.Set(ctx, path, data, -1)
	return st.Mzxid, err
}

func (s *grpcSession) get(ctx context.Context, path string) ([]byte, error) {
	data, _, err := s.cl.Get(ctx, path)
	return data, err
}

func (s *grpcSession) syncGet(ctx context.Context, path string) error {
	if _, _, err := s.cl.SyncGet(ctx, path); err != nil {
		return fmt.Errorf("sync+get %s: %w", path, err)
	}
	return nil
}

func (s *grpcSession) sync(ctx context.Context, path string) error { return s.cl.Sync(ctx, path) }

func (s *grpcSession) exists(ctx context.Context, path string) error {
	_, _, err := s.cl.Exists(ctx, path)
	return err
}

func (s *grpcSession) create(ctx context.Context, path string, data []byte, ephemeralSequential bool) (string, error) {
	mode := client.CreateMode{}
	if ephemeralSequential {
		mode = client.CreateMode{Kind: client.Ephemeral, Sequential: true}
	}
	return s.cl.Create(ctx, path, data, mode)
}

func (s *grpcSession) delete(ctx context.Context, path string) error {
	return s.cl.Delete(ctx, path, -1)
}

func (s *grpcSession) children(ctx context.Context, path string) ([]string, error) {
	kids, _, err := s.cl.Children(ctx, path)
	return kids, err
}

func (s *grpcSession) watchData(ctx context.Context, path string) (func(context.Context) error, error) {
	_, _, ch, err := s.cl.GetW(ctx, path)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		select {
		case ev := <-ch:
			if ev.Type != client.EventNodeDataChanged {
				return fmt.Errorf("watch on %s: unexpected %s event (%v)", path, ev.Type, ev.Err)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil
}

func (s *grpcSession) mutex(path string) mutex {
	return grpcMutex{lockrecipe.NewMutex(lockrecipe.NewSession(s.cl), path)}
}

// losses reads the state events the client has queued (its channel keeps
// the latest 64), without waiting.
func (s *grpcSession) losses() []sessionLoss {
	var out []sessionLoss
	ch := s.cl.States()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			switch ev.State {
			case client.StateExpired, client.StateSuspended, client.StateDisconnected:
				out = append(out, sessionLoss{ev.State.String(), ev.Err})
			}
		default:
			return out
		}
	}
}

func (s *grpcSession) close(ctx context.Context) error { return s.cl.Close(ctx) }

// grpcMutex is lockrecipe's Mutex.
type grpcMutex struct{ m *lockrecipe.Mutex }

func (m grpcMutex) lock(ctx context.Context) error {
	_, err := m.m.Lock(ctx)
	return err
}

func (m grpcMutex) unlock(ctx context.Context) error { return m.m.Unlock(ctx) }
