package metrics

import (
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/coordd/coordd/rpc/engine"
)

// Options configure a Metrics.
type Options struct {
	// Version is the server's build version (coordd_build_info).
	Version string
	// State reads the server's state; a scrape calls it once. Nil reports
	// a zero State.
	State func() State
}

// Metrics is one server's registry, and the counters the server's events
// feed. Its recording methods are safe for concurrent use and never block.
// Each server has its own (tests run several in one process), so nothing
// is registered with Prometheus's global registry.
type Metrics struct {
	reg *prometheus.Registry

	// received and sent are read by both /metrics and mntr.
	received, sent atomic.Uint64
	// latMin and latMax are the least and greatest request latency, in
	// nanoseconds, for mntr (a histogram keeps neither); latMin holds the
	// value plus one, so that 0 means none yet.
	latMin, latMax atomic.Int64
	requests       []prometheus.Histogram // by engine.Op

	expirations, leaderChanges, proposals, forwarded, restores prometheus.Counter
	lockDelays                                                 prometheus.Counter
	lockDelaysEnded                                            [2]prometheus.Counter // by lockDelayEnds

	logAppend, logEntries, logFsync prometheus.Histogram
	snapshotDuration                prometheus.Histogram
	snapshotSize                    prometheus.Gauge
	readIndex                       [2]prometheus.Histogram // by readIndexRoles
	readIndexFailures               [2]prometheus.Counter
	elections                       map[string]prometheus.Counter // by cause
	applyEntries, applyDuration     prometheus.Histogram
	diskFull                        prometheus.Gauge
	diskFullErrors                  []prometheus.Counter // by DiskWrite
	slowLogAppends                  prometheus.Counter
}

var _ engine.Meter = (*Metrics)(nil)

// New returns a registry with every coordd metric, Go's runtime metrics
// (go_*) and the process's (process_*).
func New(opts Options) *Metrics {
	if opts.State == nil {
		opts.State = func() State { return State{} }
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	m := &Metrics{reg: prometheus.NewRegistry()}
	reg := m.reg
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newStateCollector(opts.State),
	)
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: nameBuildInfo, Help: "Always 1; the labels say which coordd this is.",
	}, []string{"version", "goversion"})
	build.WithLabelValues(opts.Version, runtime.Version()).Set(1)
	reg.MustRegister(build)

	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: namePacketsReceived, Help: "Requests received from clients over either protocol, connects included (mntr's zk_packets_received).",
		}, func() float64 { return float64(m.received.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: namePacketsSent, Help: "Messages sent to clients over either protocol: replies, watch events, connects' answers (mntr's zk_packets_sent).",
		}, func() float64 { return float64(m.sent.Load()) }),
	)
	requests := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: nameRequestDuration, Buckets: latencyBuckets,
		Help: "Time from a request's arrival to its reply being queued, by operation and its type (read, write, sync, session); mntr's zk_avg_latency is their mean.",
	}, []string{"op", "type"})
	for _, op := range engineOps() {
		// Every series exists from the start, at 0: a dashboard need not
		// wait for the first request of an op.
		m.requests = append(m.requests, requests.WithLabelValues(op.String(), opType(op)).(prometheus.Histogram))
	}
	reg.MustRegister(requests)

	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
		reg.MustRegister(h)
		return h
	}
	m.expirations = counter(nameSessionExpirations, "Sessions expired (every server counts each expiry it applies, so the figure is the cluster's).")
	m.lockDelays = counter(nameLockDelays, "Ephemerals of expired sessions kept for a lock-delay instead of deleted with their session (every server counts each it applies, so the figure is the cluster's).")
	lockDelaysEnded := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: nameLockDelaysEnded, Help: "Lock-delays that ended: the node released once its delay had passed (how=released), or deleted by a client before (how=deleted).",
	}, []string{"how"})
	for i, how := range lockDelayEnds {
		m.lockDelaysEnded[i] = lockDelaysEnded.WithLabelValues(how)
	}
	reg.MustRegister(lockDelaysEnded)
	m.leaderChanges = counter(nameRaftLeaderChanges, "Times this server saw a new Raft leader (re-elections of the same server included).")
	elections := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: nameRaftElections, Help: "Elections this server called, by cause: its leader silent for the heartbeat timeout, its leader gone (the leader's connections closed and it refused a new one), or a leadership transfer to it.",
	}, []string{"cause"})
	m.elections = map[string]prometheus.Counter{}
	for _, c := range electionCauses {
		m.elections[c] = elections.WithLabelValues(c)
	}
	reg.MustRegister(elections)
	m.proposals = counter(nameRaftProposals, "Commands this server submitted for the Raft log: writes, session opens, closes and moves.")
	m.forwarded = counter(nameRaftForwarded, "Commands this server sent to the leader to be proposed (as a follower), those sent again after a leader change included.")
	m.restores = counter(nameSnapshotRestores, "Times this server's state machine was replaced by a snapshot (at start, or sent by the leader).")
	m.logAppend = histogram(nameLogAppendDuration, "Time of one durable append to this server's Raft log (StoreLogs: encoding, then raft-wal's write and fsync of the batch, or raft-boltdb's bbolt commit and its two fdatasyncs).", diskBuckets)
	m.logEntries = histogram(nameLogAppendEntries, "Entries per append to this server's Raft log (group commit: the writes that share one fsync).", batchBuckets)
	m.logFsync = histogram(nameLogFsyncDuration, "Time an append to the Raft log spent writing to disk and syncing (raft-wal: the batch's write and fsync; raft-boltdb: bbolt's write time, the pages, fdatasync, the meta page, fdatasync).", diskBuckets)
	m.snapshotDuration = histogram(nameSnapshotDuration, "Time to write one snapshot to disk, taken here or received from the leader.", snapshotBuckets)
	m.snapshotSize = prometheus.NewGauge(prometheus.GaugeOpts{Name: nameSnapshotSize, Help: "Size of the last snapshot this server wrote."})
	reg.MustRegister(m.snapshotSize)
	readIndex := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: nameReadIndexDuration, Buckets: latencyBuckets,
		Help: "Time of a read-index round (sync, readiness): as the leader, its commit index confirmed by a majority; as a follower, the call to the leader. The count is the rounds; concurrent syncs share one.",
	}, []string{"role"})
	readIndexFailures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: nameReadIndexFailures, Help: "Read-index rounds that failed (no leader, no majority, a timeout).",
	}, []string{"role"})
	for i, role := range readIndexRoles {
		m.readIndex[i] = readIndex.WithLabelValues(role).(prometheus.Histogram)
		m.readIndexFailures[i] = readIndexFailures.WithLabelValues(role)
	}
	reg.MustRegister(readIndex, readIndexFailures)
	m.applyEntries = histogram(nameApplyBatchEntries, "Committed entries the state machine applied in one batch.", batchBuckets)
	m.applyDuration = histogram(nameApplyBatchDuration, "Time the state machine took to apply one batch of entries (with its write lock held: reads wait meanwhile).", latencyBuckets)
	m.diskFull = prometheus.NewGauge(prometheus.GaugeOpts{Name: nameDiskFull, Help: "1 while the last write of this server's Raft log, stable store or snapshots failed for want of disk space (ENOSPC, or a quota's EDQUOT); 0 again once such a write succeeds."})
	reg.MustRegister(m.diskFull)
	diskFullErrors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: nameDiskFullErrors, Help: "Writes to this server's data dir that failed for want of disk space, by what was written: the Raft log (an append), the stable store (term and vote), a snapshot.",
	}, []string{"write"})
	for _, w := range diskWrites {
		m.diskFullErrors = append(m.diskFullErrors, diskFullErrors.WithLabelValues(w))
	}
	reg.MustRegister(diskFullErrors)
	m.slowLogAppends = counter(nameSlowLogAppends, "Appends to this server's Raft log that took longer than the election timeout (a slow or failing disk); a leader hands its leadership to another server after one.")
	return m
}

// Registry returns the registry, for the server's other collectors and for
// tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus's exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Received counts a request from a client (engine.Meter).
func (m *Metrics) Received() { m.received.Add(1) }

// Sent counts n messages to clients (engine.Meter).
func (m *Metrics) Sent(n int) { m.sent.Add(uint64(n)) }

// Answered records a request's latency (engine.Meter).
func (m *Metrics) Answered(op engine.Op, d time.Duration) {
	if int(op) < len(m.requests) {
		m.requests[op].Observe(d.Seconds())
	}
	ns := d.Nanoseconds()
	for {
		old := m.latMin.Load()
		if old != 0 && old-1 <= ns || m.latMin.CompareAndSwap(old, ns+1) {
			break
		}
	}
	for {
		old := m.latMax.Load()
		if old >= ns || m.latMax.CompareAndSwap(old, ns) {
			break
		}
	}
}

// SessionExpired counts an applied expiry.
func (m *Metrics) SessionExpired() { m.expirations.Inc() }

// LockDelays counts the lock-delays an applied entry started (ephemerals
// of an expired session it kept) and ended (released when due, or deleted
// before).
func (m *Metrics) LockDelays(started, released, deleted int) {
	m.lockDelays.Add(float64(started))
	m.lockDelaysEnded[0].Add(float64(released))
	m.lockDelaysEnded[1].Add(float64(deleted))
}

// LeaderChanged counts a new leader seen.
func (m *Metrics) LeaderChanged() { m.leaderChanges.Inc() }

// ElectionCalled counts an election this server called, for cause:
// "heartbeat_timeout", "leader_gone" or "leadership_transfer" (another is
// ignored).
func (m *Metrics) ElectionCalled(cause string) {
	if c, ok := m.elections[cause]; ok {
		c.Inc()
	}
}

// Proposed counts a command submitted for the log.
func (m *Metrics) Proposed() { m.proposals.Inc() }

// Forwarded counts a command sent to the leader.
func (m *Metrics) Forwarded() { m.forwarded.Inc() }

// LogAppended records one append to the Raft log: its entries, its
// duration, and the part of it spent writing and syncing (negative:
// unknown).
func (m *Metrics) LogAppended(entries int, d, sync time.Duration) {
	m.logEntries.Observe(float64(entries))
	m.logAppend.Observe(d.Seconds())
	if sync >= 0 {
		m.logFsync.Observe(sync.Seconds())
	}
}

// SnapshotWritten records a snapshot written to disk.
func (m *Metrics) SnapshotWritten(size int64, d time.Duration) {
	m.snapshotSize.Set(float64(size))
	m.snapshotDuration.Observe(d.Seconds())
}

// DiskWrite says what a write to the data dir wrote.
type DiskWrite int

// What a write to the data dir writes.
const (
	DiskWriteLog      DiskWrite = iota // an append to the Raft log
	DiskWriteStable                    // the stable store: the term and the vote
	DiskWriteSnapshot                  // a snapshot
)

// DiskFullError counts a write of w that failed for want of disk space.
func (m *Metrics) DiskFullError(w DiskWrite) { m.diskFullErrors[w].Inc() }

// SetDiskFull says whether the data dir's disk is full: a write failed for
// want of space, and none has succeeded since.
func (m *Metrics) SetDiskFull(full bool) {
	v := 0.0
	if full {
		v = 1
	}
	m.diskFull.Set(v)
}

// SlowLogAppend counts an append to the Raft log that took longer than
// the election timeout.
func (m *Metrics) SlowLogAppend() { m.slowLogAppends.Inc() }

// SnapshotRestored counts a snapshot that replaced the state machine's
// state.
func (m *Metrics) SnapshotRestored() { m.restores.Inc() }

// ReadIndexRound records one read-index round, run as the leader or asked
// of it as a follower.
func (m *Metrics) ReadIndexRound(leader bool, d time.Duration, err error) {
	i := 1
	if leader {
		i = 0
	}
	m.readIndex[i].Observe(d.Seconds())
	if err != nil {
		m.readIndexFailures[i].Inc()
	}
}

// AppliedBatch records one batch the state machine applied.
func (m *Metrics) AppliedBatch(entries int, d time.Duration) {
	m.applyEntries.Observe(float64(entries))
	m.applyDuration.Observe(d.Seconds())
}

// RequestStats are the request figures of ZooKeeper's four-letter words,
// from the counters /metrics reports.
type RequestStats struct {
	// Received and Sent are coordd_packets_received_total and
	// coordd_packets_sent_total.
	Received, Sent uint64
	// AvgLatency is the mean of coordd_request_duration_seconds over every
	// operation; MinLatency and MaxLatency the extremes seen (0 before any
	// request).
	MinLatency, AvgLatency, MaxLatency time.Duration
}

// Requests returns the request figures.
func (m *Metrics) Requests() RequestStats {
	rs := RequestStats{Received: m.received.Load(), Sent: m.sent.Load()}
	var count uint64
	var sum float64
	for _, h := range m.requests {
		var d dto.Metric
		if err := h.Write(&d); err == nil && d.Histogram != nil {
			count += d.Histogram.GetSampleCount()
			sum += d.Histogram.GetSampleSum()
		}
	}
	if count > 0 {
		rs.AvgLatency = time.Duration(sum / float64(count) * float64(time.Second))
		if v := m.latMin.Load(); v > 0 {
			rs.MinLatency = time.Duration(v - 1)
		}
		rs.MaxLatency = time.Duration(m.latMax.Load())
	}
	return rs
}

// Traffic is the client requests a server answered since it started, by
// type, as coordd_request_duration_seconds counts them: reads (type read),
// writes (type write) and the sum of the writes' latencies. The public
// Status call reports them for each member (the web console's rates).
type Traffic struct {
	Reads, Writes uint64
	WriteSeconds  float64
}

// Traffic returns the requests answered so far.
func (m *Metrics) Traffic() Traffic {
	var t Traffic
	for op, h := range m.requests {
		var d dto.Metric
		if err := h.Write(&d); err != nil || d.Histogram == nil {
			continue
		}
		switch opType(engine.Op(op)) {
		case "read":
			t.Reads += d.Histogram.GetSampleCount()
		case "write":
			t.Writes += d.Histogram.GetSampleCount()
			t.WriteSeconds += d.Histogram.GetSampleSum()
		}
	}
	return t
}
