package session

import (
	"testing"
	"time"
)

const benchSessions = 100_000

func benchTracker() *Tracker {
	tr := NewTracker()
	for id := int64(1); id <= benchSessions; id++ {
		// Spread deadlines over 10s..20s.
		tr.Add(id, 10*time.Second+time.Duration(id%10_000)*time.Millisecond, t0)
	}
	return tr
}

// BenchmarkTrackerTouch touches sessions of a 100k tracker in turn, time advancing.
func BenchmarkTrackerTouch(b *testing.B) {
	tr := benchTracker()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.Touch(int64(i%benchSessions)+1, t0.Add(time.Duration(i)*time.Microsecond))
	}
}

// BenchmarkTrackerExpiredNone polls a 100k tracker in which nothing is due.
func BenchmarkTrackerExpiredNone(b *testing.B) {
	tr := benchTracker()
	now := t0.Add(5 * time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := tr.Expired(now, 0); got != nil {
			b.Fatal(got)
		}
	}
}

// BenchmarkTrackerExpiredBatch offers a batch of 100 due sessions per call from a 100k
// tracker in which every session is overdue (a leader that lost all its clients).
func BenchmarkTrackerExpiredBatch(b *testing.B) {
	tr := benchTracker()
	now := t0.Add(time.Hour)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(tr.Expired(now, 100)) == 0 {
			b.StopTimer()
			now = now.Add(time.Hour) // everything offered: make it all due again
			b.StartTimer()
		}
	}
}

// BenchmarkRegistryRecordAfterClone measures Record+Ack on a 100k-session registry
// that is cloned (snapshotted) every 10k operations, so copy-on-write is exercised.
func BenchmarkRegistryRecordAfterClone(b *testing.B) {
	r := NewRegistry()
	for id := int64(1); id <= benchSessions; id++ {
		_ = r.Open(Info{ID: id, TimeoutMs: 10_000, Password: pw(1)})
	}
	reply := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%10_000 == 0 {
			_ = r.Clone()
		}
		id := int64(i%benchSessions) + 1
		xid := int64(i/benchSessions) + 1
		r.Record(id, xid, 0, reply)
		r.Ack(id, xid)
	}
}
