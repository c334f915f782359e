package rpc

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm/cmdpb"
)

// countingStore counts the reads that reach the store behind a LogCache.
type countingStore struct {
	raft.LogStore
	gets atomic.Int64
}

func (s *countingStore) GetLog(idx uint64, l *raft.Log) error {
	s.gets.Add(1)
	return s.LogStore.GetLog(idx, l)
}

// TestLogCacheByteBound: with SetMaxBytes (rpc/third_party/raft) the cache
// drops its oldest entries once their data passes the bound, but keeps a
// whole batch even when the batch alone is larger.
func TestLogCacheByteBound(t *testing.T) {
	store := &countingStore{LogStore: raft.NewInmemStore()}
	c, err := raft.NewLogCache(1024, store)
	if err != nil {
		t.Fatal(err)
	}
	c.SetMaxBytes(10 << 10)
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{'x'}, 1<<10)}
	}
	for i := uint64(1); i <= 100; i++ {
		if err := c.StoreLogs([]*raft.Log{entry(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(i uint64) bool {
		before := store.gets.Load()
		var l raft.Log
		if err := c.GetLog(i, &l); err != nil || l.Index != i {
			t.Fatalf("GetLog(%d): %v, index %d", i, err, l.Index)
		}
		return store.gets.Load() == before
	}
	if !cached(100) || !cached(91) {
		t.Fatal("the newest entries within the bound are not cached")
	}
	if cached(90) || cached(1) {
		t.Fatal("entries past the bound are still cached")
	}
	var batch []*raft.Log
	for i := uint64(101); i <= 150; i++ {
		batch = append(batch, entry(i))
	}
	if err := c.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	for i := uint64(101); i <= 150; i++ {
		if !cached(i) {
			t.Fatalf("entry %d of a 50 KB batch was dropped", i)
		}
	}
	if cached(100) {
		t.Fatal("an entry before the batch was kept past the bound")
	}
}

// TestLeaderLogCacheFreesFutures: the leader's log cache keeps copies of
// its entries, not pointers into the futures of Apply
// (rpc/third_party/raft), so a future and the FSM's response it carries are
// garbage once answered, not 1 024 entries later.
func TestLeaderLogCacheFreesFutures(t *testing.T) {
	n := singleNode(t)
	data, err := proto.Marshal(&cmdpb.Command{Cmd: &cmdpb.Command_Noop{Noop: &cmdpb.Noop{}}})
	if err != nil {
		t.Fatal(err)
	}
	freed := make(chan struct{})
	func() {
		f := n.raft.Apply(data, 0)
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		runtime.SetFinalizer(f, func(any) { close(freed) })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-freed:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the answered future is still reachable (from the log cache)")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
