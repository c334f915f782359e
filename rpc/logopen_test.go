//go:build linux

package rpc

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

// BenchmarkRaftStoreOpen times opening a Raft log store as a server opens
// it (openRaftStore, with every check it makes of the data it reads), on
// a log of 100 000 entries of 150 bytes (17 MB, all in the WAL's tail
// segment) or of 1 KiB (104 MB: sealed segments and a tail), written in
// batches of 100. "warm": the files are in the page cache, as after a
// restart; "cold": they are dropped from it first (posix_fadvise), as
// after a reboot. cpu-ms/op is the process's CPU time per open, which a
// busy machine does not inflate as it does the wall time. rpc/DESIGN.md ("Nothing read back unverified") has the
// figures.
func BenchmarkRaftStoreOpen(b *testing.B) {
	for _, kind := range []string{RaftLogWAL, RaftLogBolt} {
		for _, size := range []int{150, 1024} {
			dir := b.TempDir()
			s, err := openRaftStore(dir, kind, hclog.NewNullLogger())
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, size)
			const entries, batch = 100_000, 100
			for i := 1; i <= entries; i += batch {
				logs := make([]*raft.Log, batch)
				for j := range logs {
					copy(data, fmt.Sprintf("entry %d", i+j))
					logs[j] = &raft.Log{Index: uint64(i + j), Term: 1, Type: raft.LogCommand, Data: data}
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
			s.Close()
			for _, cache := range []string{"warm", "cold"} {
				b.Run(fmt.Sprintf("%s/%dB/%s", kind, size, cache), func(b *testing.B) {
					var cpu time.Duration
					for b.Loop() {
						if cache == "cold" {
							b.StopTimer()
							dropCache(b, dir)
							b.StartTimer()
						}
						before := cpuTime(b)
						s, err := openRaftStore(dir, kind, hclog.NewNullLogger())
						if err != nil {
							b.Fatal(err)
						}
						cpu += cpuTime(b) - before
						if last, err := s.LastIndex(); err != nil || last != entries {
							b.Fatalf("last index %d, %v", last, err)
						}
						s.Close()
					}
					// The machine is shared: the CPU an open took says more
					// than its wall time.
					b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
				})
			}
		}
	}
}

// cpuTime returns the CPU time the process has used (user and system).
func cpuTime(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// dropCache drops every file under dir from the page cache.
func dropCache(tb testing.TB, dir string) {
	tb.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		tb.Fatal(err)
	}
}
