package bench

import (
	"context"
	"fmt"
	"sync"
)

// The benchmark's nodes: creating them before a run, making every session
// see them, deleting them at the end.

// ensure creates path (persistent, empty) through the admin session
// unless it exists.
func (b *Bench) ensure(path string) error {
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
	defer cancel()
	if _, err := b.admin.create(ctx, path, nil, false); err != nil && !nodeExists(err) {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}

// createKeys creates the keys that do not exist yet, with the bench value,
// through the workers' sessions, many at a time.
func (b *Bench) createKeys(workers []*worker, keys []string) error {
	var first firstError
	b.many(len(keys), 64, func(i int) {
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
		defer cancel()
		if _, err := workers[i%len(workers)].sess.create(ctx, keys[i], b.value, false); err != nil && !nodeExists(err) {
			first.set(fmt.Errorf("creating %s: %w", keys[i], err))
		}
	})
	return first.get()
}

// syncAll makes every worker's server catch up with the leader (sync), so
// that what other sessions created is there for it to read.
func (b *Bench) syncAll(workers []*worker, path string) error {
	var first firstError
	b.many(len(workers), len(workers), func(i int) {
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.Timeout)
		defer cancel()
		if err := workers[i].sess.sync(ctx, path); err != nil {
			first.set(fmt.Errorf("sync %s: %w", path, err))
		}
	})
	return first.get()
}

// deleteTree deletes path and everything below it through the admin
// session, many deletes at a time, within twice the timeout.
func (b *Bench) deleteTree(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*b.cfg.Timeout)
	defer cancel()
	return b.deleteBelow(ctx, path)
}

func (b *Bench) deleteBelow(ctx context.Context, path string) error {
	kids, err := b.admin.children(ctx, path)
	if err != nil {
		return err
	}
	var first firstError
	b.many(len(kids), 32, func(i int) {
		if err := b.deleteBelow(ctx, path+"/"+kids[i]); err != nil && !noNode(err) {
			first.set(err)
		}
	})
	if err := first.get(); err != nil {
		return err
	}
	return b.admin.delete(ctx, path)
}

// firstError keeps the first of the errors set from many goroutines.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
