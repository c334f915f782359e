// Copyright (c) HashiCorp, Inc.
// SPDX-License-Identifier: MPL-2.0

package raft

import (
	"fmt"
	"sync"
)

// LogCache wraps any LogStore implementation to provide an
// in-memory ring buffer. This is used to cache access to
// the recently written entries. For implementations that do not
// cache themselves, this can provide a substantial boost by
// avoiding disk I/O on recent entries.
type LogCache struct {
	store LogStore

	cache []*Log
	l     sync.RWMutex

	// coordd: maxBytes bounds the data the cached entries hold (0: no
	// bound); bytes is what they hold now.
	maxBytes int
	bytes    int
}

// SetMaxBytes bounds the data of the cached entries (coordd): past it the
// oldest are dropped, but never those of the batch being stored. 0 (the
// default) sets no bound, as upstream. Call it before the cache is used.
func (c *LogCache) SetMaxBytes(n int) {
	c.l.Lock()
	c.maxBytes = n
	c.l.Unlock()
}

// put caches l in its slot, replacing what was there (coordd: counting
// bytes). The caller holds c.l.
func (c *LogCache) put(l *Log) {
	i := l.Index % uint64(len(c.cache))
	if old := c.cache[i]; old != nil {
		c.bytes -= len(old.Data)
	}
	c.cache[i] = l
	c.bytes += len(l.Data)
}

// drop empties slot i (coordd). The caller holds c.l.
func (c *LogCache) drop(i uint64) {
	if old := c.cache[i]; old != nil {
		c.bytes -= len(old.Data)
		c.cache[i] = nil
	}
}

// trim drops the oldest cached entries below index keep while the cache
// holds more than maxBytes (coordd). The caller holds c.l.
func (c *LogCache) trim(keep uint64) {
	if c.maxBytes <= 0 || c.bytes <= c.maxBytes {
		return
	}
	n := uint64(len(c.cache))
	for idx := keep - min(n, keep); idx < keep && c.bytes > c.maxBytes; idx++ {
		if l := c.cache[idx%n]; l != nil && l.Index == idx {
			c.drop(idx % n)
		}
	}
}

// NewLogCache is used to create a new LogCache with the
// given capacity and backend store.
func NewLogCache(capacity int, store LogStore) (*LogCache, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("capacity must be positive")
	}
	c := &LogCache{
		store: store,
		cache: make([]*Log, capacity),
	}
	return c, nil
}

// IsMonotonic implements the MonotonicLogStore interface. This is a shim to
// expose the underlying store as monotonically indexed or not.
func (c *LogCache) IsMonotonic() bool {
	if store, ok := c.store.(MonotonicLogStore); ok {
		return store.IsMonotonic()
	}

	return false
}

func (c *LogCache) GetLog(idx uint64, log *Log) error {
	// Check the buffer for an entry
	c.l.RLock()
	cached := c.cache[idx%uint64(len(c.cache))]
	c.l.RUnlock()

	// Check if entry is valid
	if cached != nil && cached.Index == idx {
		*log = *cached
		return nil
	}

	// Forward request on cache miss
	return c.store.GetLog(idx, log)
}

func (c *LogCache) StoreLog(log *Log) error {
	return c.StoreLogs([]*Log{log})
}

func (c *LogCache) StoreLogs(logs []*Log) error {
	err := c.store.StoreLogs(logs)
	// Insert the logs into the ring buffer, but only on success
	if err != nil {
		return fmt.Errorf("unable to store logs within log store, err: %q", err)
	}
	c.l.Lock()
	for _, l := range logs {
		c.put(l)
	}
	if len(logs) > 0 {
		c.trim(logs[0].Index)
	}
	c.l.Unlock()
	return nil
}

// cachePending puts a leader's new entries in the cache before they are
// written, so that its replicators can send them meanwhile (coordd). It
// reports false, and does nothing, if they do not all fit.
func (c *LogCache) cachePending(logs []*Log) bool {
	if len(logs) > len(c.cache) {
		return false
	}
	c.l.Lock()
	for _, l := range logs {
		c.put(l)
	}
	if len(logs) > 0 {
		c.trim(logs[0].Index)
	}
	c.l.Unlock()
	return true
}

// forget removes entries that cachePending added when writing them failed
// (coordd).
func (c *LogCache) forget(logs []*Log) {
	c.l.Lock()
	for _, l := range logs {
		if i := l.Index % uint64(len(c.cache)); c.cache[i] == l {
			c.drop(i)
		}
	}
	c.l.Unlock()
}

func (c *LogCache) FirstIndex() (uint64, error) {
	return c.store.FirstIndex()
}

func (c *LogCache) LastIndex() (uint64, error) {
	return c.store.LastIndex()
}

func (c *LogCache) DeleteRange(min, max uint64) error {
	// Invalidate the deleted entries. coordd: only those, so that a
	// compaction cannot drop a leader's entries that cachePending put here
	// and that are not yet in the store.
	c.l.Lock()
	for i, l := range c.cache {
		if l != nil && l.Index >= min && l.Index <= max {
			c.drop(uint64(i))
		}
	}
	c.l.Unlock()

	return c.store.DeleteRange(min, max)
}
