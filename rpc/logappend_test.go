//go:build linux

package rpc

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// BenchmarkLogAppend times one log append of a 150-byte entry, made durable,
// in each Raft log store, opened as the server opens it (raftboltdb: bbolt;
// raftwal: hashicorp/raft-wal) and, for comparison, as a bare write-ahead
// log appends: a pwrite after the last record of a file preallocated with
// zeros, then fdatasync. "x3" runs three
// appenders at once, each on its own file, as three servers on one machine
// share its disk. The metric is the latency of one append (µs/append; ns/op
// is the wall time over all appenders' appends); rpc/DESIGN.md ("Where a
// write's time goes") has the figures of issue #8.
func BenchmarkLogAppend(b *testing.B) {
	for _, store := range []string{"raftboltdb", "raftwal", "wal-append"} {
		for _, k := range []int{1, 3} {
			b.Run(fmt.Sprintf("%s/x%d", store, k), func(b *testing.B) {
				appenders := make([]func(i int) error, k)
				for j := range appenders {
					dir := b.TempDir()
					var err error
					switch store {
					case "raftboltdb":
						appenders[j], err = storeAppender(b, dir, RaftLogBolt)
					case "raftwal":
						appenders[j], err = storeAppender(b, dir, RaftLogWAL)
					default:
						appenders[j], err = walAppender(b, dir)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				per := b.N/k + 1
				var wg sync.WaitGroup
				errs := make(chan error, k)
				b.ResetTimer()
				start := time.Now()
				for _, app := range appenders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range per {
							if err := app(i); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(elapsed.Microseconds())/float64(per), "µs/append")
			})
		}
	}
}

func storeAppender(b *testing.B, dir, kind string) (func(i int) error, error) {
	s, err := openRaftStore(dir, kind, hclog.NewNullLogger())
	if err != nil {
		return nil, err
	}
	b.Cleanup(func() { s.Close() })
	data := make([]byte, 150)
	return func(i int) error {
		return s.StoreLog(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data})
	}, nil
}

func walAppender(b *testing.B, dir string) (func(i int) error, error) {
	f, err := os.Create(filepath.Join(dir, "wal"))
	if err != nil {
		return nil, err
	}
	b.Cleanup(func() { f.Close() })
	// Preallocate with zeros written, as a WAL does, so that an append
	// allocates no blocks and fdatasync writes no metadata.
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < 16<<20; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros, off); err != nil {
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	rec := make([]byte, 150)
	return func(i int) error {
		off := int64(i%(16<<20/len(rec))) * int64(len(rec))
		if _, err := f.WriteAt(rec, off); err != nil {
			return err
		}
		return syscall.Fdatasync(int(f.Fd()))
	}, nil
}
