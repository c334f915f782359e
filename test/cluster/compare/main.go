// Command compare measures coordd against ZooKeeper or etcd on one machine.
//
// It runs coordctl bench's workloads (write, read, read-sync, create-eph,
// lock, session) against the other system, with that system's Go client in
// this process, and the same workloads against a coordd cluster, alternating
// between the two in every round, and prints one table of the medians. The
// other side mirrors coordctl bench: the same keys, key assignment, value
// size, warm-up and percentiles; one session per client, spread over the
// servers. Every session has a connection of its own on both sides
// (coordctl bench --share-conns=false), as a ZooKeeper session must, unless
// --share-conns.
//
// --protocol says how coordd is driven. zk (against ZooKeeper): by the very
// code that drives ZooKeeper, go-zookeeper in this process, through coordd's
// ZooKeeper protocol: the same client library on both sides. grpc: by
// `coordctl bench -o json`, coordd's own Go client. both: each in turn, and
// the table shows both against the other system and against each other.
//
// Against ZooKeeper, given the servers' process ids (--other-pids,
// --coordd-pids), it also measures each server's resident memory idle and
// with --memory-znodes znodes of 100 bytes, and the catch-up of a follower
// that was stopped while --catchup-writes writes went by (memory.go).
//
// How each workload maps onto the other system is written beside it, in
// zk.go (go-zookeeper) and etcd.go (etcd's clientv3 and its concurrency
// package). scripts/compare.sh (make compare-zookeeper, make compare-etcd)
// starts both clusters and runs it. It is a separate module so that the
// coordd module depends on neither client.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

// result is one run: the fields both sides report.
type result struct {
	Workload string  `json:"workload"`
	Clients  int     `json:"clients"`
	Ops      int     `json:"ops"`
	Errors   int64   `json:"errors"`
	OpsPerS  float64 `json:"ops_per_s"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	// ClientCores is the CPU the client process used over the run (user
	// and system time over wall time, warm-up included): the client shares
	// the machine's cores with the servers, so a costlier client leaves
	// them less.
	ClientCores float64 `json:"client_cores"`
	// ServerCPUPerOp is the CPU the servers used in the measured part,
	// summed over them (user and system time, every thread), per op, in
	// microseconds; 0 when their process ids are not known. The client's
	// share of the machine does not enter it, so it compares what an op
	// costs the servers of either system.
	ServerCPUPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux
// since forever on every architecture Go supports).
const clockTick = 10 * time.Millisecond

// procCPU is the user plus system time the processes used, every thread of
// each; a process that is gone counts 0.
func procCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name (field 2) is in parentheses and may hold spaces;
		// utime and stime are fields 14 and 15, the 12th and 13th after it.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 == nil && err2 == nil {
			sum += time.Duration(u+st) * clockTick
		}
	}
	return sum
}

// cpuTime is the user plus system time of this process (who is
// syscall.RUSAGE_SELF) or of its waited-for children (RUSAGE_CHILDREN).
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spec is one workload at one client count.
type spec struct {
	workload string
	clients  int
}

func (s spec) String() string { return s.workload + ":" + strconv.Itoa(s.clients) }

type config struct {
	system     string   // "zookeeper" or "etcd"
	servers    []string // the other system's client addresses
	coordd     string
	coordctl   string
	duration   time.Duration
	warmup     time.Duration
	preWarmup  time.Duration
	rounds     int
	valueSize  int
	keys       int
	root       string
	jsonOutput bool
	// shareConns makes coordd's sessions share one connection per server
	// (coordctl bench --share-conns), and etcd's clients too. Off, every
	// session has a connection of its own on both sides, as ZooKeeper's
	// sessions always do.
	shareConns bool
	// protocol is how coordd is driven: "zk", "grpc" or "both".
	protocol string
	// otherPids and coorddPids are the servers' process ids, in the order
	// of their client addresses (none: no memory or catch-up figures).
	otherPids, coorddPids []int
	memZnodes             int    // znodes of the memory figure (0: none)
	catchupWrites         int    // writes of the catch-up figure (0: none)
	pidFile               string // where restarted servers' pids are written
	// The failover runs (failover.go): the scenarios, how many rounds of
	// them, writers (and as many readers) and each run's length.
	failover         []string
	failoverRounds   int
	failoverClients  int
	failoverDuration time.Duration
	failoverTrace    bool
}

// side is one column of the table: the other system, or coordd driven one
// way.
type side struct {
	name  string
	other bool   // the other system
	proto string // coordd's: "zk" (go-zookeeper here) or "grpc" (coordctl bench)
}

// system is the other side of the comparison.
type system interface {
	// name is the system's name in the table.
	name() string
	// prepare connects s.clients clients and returns the workload's
	// operation for worker i, and a function that closes what prepare
	// opened.
	prepare(c config, s spec, value []byte) (op, func(), error)
}

// op is one operation of worker i; it returns the latency to record.
type op func(i int, rng *rand.Rand) (time.Duration, error)

func main() {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "scale") {
		var err error
		switch os.Args[1] {
		case "scale":
			err = scaleMain(os.Args[2:])
		case "scale-table":
			err = scaleTableMain(os.Args[2:], os.Stdout)
		case "scale-hold":
			err = holdMain(os.Args[2:])
		case "scale-stallmon":
			err = stallMonMain()
		default:
			err = fmt.Errorf("unknown command %q", os.Args[1])
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	flag.StringVar(&c.system, "system", "zookeeper", "the system to compare with: zookeeper or etcd")
	servers := flag.String("servers", "", "the other system's client addresses (default: those scripts/compare.sh starts)")
	flag.StringVar(&c.coordd, "coordd", "127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283", "the coordd servers")
	flag.StringVar(&c.coordctl, "coordctl", "bin/coordctl", "the coordctl binary")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "measured time of each run")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "warm-up time before each run")
	flag.DurationVar(&c.preWarmup, "pre-warmup", 5*time.Second, "an unmeasured first pass of every workload on the other system (ZooKeeper's JVM compiles its hot code meanwhile; 0: none)")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every workload on both")
	flag.IntVar(&c.valueSize, "value-size", 100, "size in bytes of the values written")
	flag.IntVar(&c.keys, "keys", 1000, "number of keys read (write uses at least one per client)")
	flag.StringVar(&c.root, "path", "/compare", "node (ZooKeeper) or key prefix (etcd) under which the other system's runs work")
	flag.BoolVar(&c.jsonOutput, "json", false, "also print every run as a JSON line")
	flag.BoolVar(&c.shareConns, "share-conns", false, "coordd's sessions (and etcd's clients) share one connection per server; ZooKeeper's cannot, so only with --system etcd")
	flag.StringVar(&c.protocol, "protocol", "zk", "how coordd is driven: zk (go-zookeeper, as ZooKeeper is; --system zookeeper only), grpc (coordctl bench, coordd's Go client) or both")
	otherPids := flag.String("other-pids", "", "the other system's server process ids, in the order of --servers (for the memory and catch-up figures)")
	coorddPids := flag.String("coordd-pids", "", "coordd's server process ids, in the order of --coordd")
	flag.IntVar(&c.memZnodes, "memory-znodes", 100_000, "znodes of 100 bytes loaded for the memory figure (0: no memory or catch-up figures)")
	flag.IntVar(&c.catchupWrites, "catchup-writes", 100_000, "setData calls made while a follower is stopped, for the catch-up figure (0: none)")
	flag.StringVar(&c.pidFile, "pid-file", "", "file to which the process id of every server this tool restarts is appended (it kills them when it ends)")
	failover := flag.String("failover", "", "failover scenarios to run after the workloads, against ZooKeeper: "+strings.Join(failoverScenarios, ",")+", or all (failover.go)")
	flag.IntVar(&c.failoverRounds, "failover-rounds", 1, "rounds of the failover scenarios; each runs every scenario on both")
	flag.IntVar(&c.failoverClients, "failover-clients", 64, "writers, and as many readers, of a failover run")
	flag.BoolVar(&c.failoverTrace, "failover-trace", false, "print each failover run's throughput, per 250 ms, around each fault")
	flag.DurationVar(&c.failoverDuration, "failover-duration", 30*time.Second, "length of a failover run; the fault strikes after a third of it")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: compare [flags] [workload:clients[,clients...] ...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetOutput(io.Discard) // go-zookeeper logs every connection
	var sys system
	var err error
	switch c.system {
	case "zookeeper":
		sys, c.servers = zookeeper{}, []string{"127.0.0.1:2191", "127.0.0.1:2192", "127.0.0.1:2193"}
	case "etcd":
		sys, c.servers = etcd{}, []string{"127.0.0.1:2391", "127.0.0.1:2392", "127.0.0.1:2393"}
	default:
		err = fmt.Errorf("unknown --system %q (zookeeper or etcd)", c.system)
	}
	if *servers != "" {
		c.servers = strings.Split(*servers, ",")
	}
	var specs []spec
	if err == nil {
		c.failover, err = parseFailover(*failover)
	}
	if err == nil && (len(flag.Args()) > 0 || len(c.failover) == 0) {
		specs, err = parseSpecs(flag.Args())
	}
	if err == nil && len(c.failover) > 0 {
		switch {
		case c.system != "zookeeper":
			err = errors.New("--failover: against ZooKeeper only (its clients drive both sides)")
		case c.failoverRounds < 1 || c.failoverClients < 1 || c.failoverDuration < 15*time.Second:
			err = errors.New("--failover-rounds and --failover-clients must be positive, --failover-duration at least 15s (5 s of the rate before the fault are its baseline)")
		}
	}
	if err == nil && c.shareConns && c.system == "zookeeper" {
		err = errors.New("--share-conns: a ZooKeeper session has a connection of its own, so the comparison would not be like for like")
	}
	if err == nil {
		switch {
		case c.protocol != "zk" && c.protocol != "grpc" && c.protocol != "both":
			err = fmt.Errorf("--protocol %q: want zk, grpc or both", c.protocol)
		case c.protocol != "grpc" && c.system != "zookeeper":
			err = fmt.Errorf("--protocol %s: only ZooKeeper speaks ZooKeeper's protocol; use --protocol grpc with --system %s", c.protocol, c.system)
		}
	}
	if err == nil {
		c.otherPids, err = parsePids(*otherPids)
	}
	if err == nil {
		c.coorddPids, err = parsePids(*coorddPids)
	}
	if err == nil && (c.rounds < 1 || c.duration <= 0) {
		err = errors.New("--rounds and --duration must be positive")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	if err := run(c, sys, specs); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func parseSpecs(args []string) ([]spec, error) {
	if len(args) == 0 {
		return nil, errors.New("no workload given")
	}
	known := map[string]bool{"write": true, "read": true, "read-sync": true, "create-eph": true, "lock": true, "session": true}
	var out []spec
	for _, a := range args {
		w, counts, ok := strings.Cut(a, ":")
		if !known[w] {
			return nil, fmt.Errorf("unknown workload %q", w)
		}
		if !ok {
			counts = "1"
		}
		for _, n := range strings.Split(counts, ",") {
			k, err := strconv.Atoi(n)
			if err != nil || k < 1 {
				return nil, fmt.Errorf("%s: bad client count %q", a, n)
			}
			out = append(out, spec{w, k})
		}
	}
	return out, nil
}

// parsePids parses a comma-separated list of process ids.
func parsePids(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad process id %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// sides are the table's columns: the other system, then coordd driven as
// --protocol says.
func sides(c config, other string) []side {
	out := []side{{name: other, other: true}}
	switch c.protocol {
	case "zk":
		out = append(out, side{name: "coordd", proto: "zk"})
	case "grpc":
		out = append(out, side{name: "coordd", proto: "grpc"})
	default:
		out = append(out, side{name: "coordd-zk", proto: "zk"}, side{name: "coordd-grpc", proto: "grpc"})
	}
	return out
}

// runSide runs one workload on one side.
func runSide(c config, sys system, sd side, s spec) (result, error) {
	switch {
	case sd.other:
		return runOther(c, sys, s)
	case sd.proto == "zk":
		cz := c
		cz.servers = strings.Split(c.coordd, ",")
		cz.otherPids = c.coorddPids // the servers driven, as runOther reads them
		return runOther(cz, zookeeper{}, s)
	}
	return runCoordd(c, s)
}

func run(c config, sys system, specs []spec) error {
	other := sys.name()
	usage := newUsage(c, other)
	usage.idle()
	defer usage.stopRestarted()
	if len(specs) > 0 {
		if err := runWorkloads(c, sys, specs, usage); err != nil {
			return err
		}
	}
	if len(c.failover) > 0 {
		return runFailover(c, usage, [2]string{other, "coordd"}, c.failover)
	}
	return nil
}

// runWorkloads runs the workloads on every side, rounds times, then the
// memory and catch-up figures, and prints the tables.
func runWorkloads(c config, sys system, specs []spec, usage *usageFigures) error {
	other := sys.name()
	cols := sides(c, other)
	if c.preWarmup > 0 {
		fmt.Fprintf(os.Stderr, "compare: warming up %s: every workload once for %v, not measured\n", other, c.preWarmup)
		w := c
		w.duration, w.warmup = c.preWarmup, 0
		for _, s := range specs {
			if _, err := runOther(w, sys, s); err != nil {
				return fmt.Errorf("%s %s: %w", other, s, err)
			}
		}
	}
	res := make([]map[spec][]result, len(cols))
	for i := range res {
		res[i] = map[spec][]result{}
	}
	for r := 1; r <= c.rounds; r++ {
		for _, s := range specs {
			// Rotate which goes first, so that a drift of the machine's
			// speed within a round falls on every side.
			for k := range cols {
				i := (k + r - 1) % len(cols)
				sd := cols[i]
				res1, err := runSide(c, sys, sd, s)
				if err != nil {
					return fmt.Errorf("round %d, %s %s: %w", r, sd.name, s, err)
				}
				if res1.Errors > 0 {
					return fmt.Errorf("round %d, %s %s: %d operations failed", r, sd.name, s, res1.Errors)
				}
				fmt.Fprintf(os.Stderr, "round %d  %-11s %-14s %9.0f ops/s  p99 %6.1f ms\n", r, sd.name, s, res1.OpsPerS, res1.P99)
				if c.jsonOutput {
					line, _ := json.Marshal(struct {
						System string `json:"system"`
						Round  int    `json:"round"`
						result
					}{sd.name, r, res1})
					fmt.Println(string(line))
				}
				res[i][s] = append(res[i][s], res1)
			}
		}
	}
	if err := usage.loaded(); err != nil {
		return err
	}
	fmt.Printf("\nmedians of %d rounds of %v each (ops/s; p99 in ms; lock: handoffs/s, p99 of acquire;\nclient cores: the CPU the benchmark's client process used, user and system, over the run;\nserver µs/op: the CPU all servers of a side used in the measured part, per op)\n", c.rounds, c.duration)
	switch c.protocol {
	case "zk":
		fmt.Println("coordd driven by go-zookeeper through its ZooKeeper protocol, as ZooKeeper is")
	case "grpc":
		fmt.Println("coordd driven by coordctl bench (its Go client, gRPC)")
	default:
		fmt.Println("coordd-zk: driven by go-zookeeper through its ZooKeeper protocol, as ZooKeeper is; coordd-grpc: by coordctl bench (its Go client)")
	}
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := "workload\tclients\t"
	for _, sd := range cols {
		hdr += sd.name + "\tp99\t"
		if !sd.other {
			hdr += sd.name + "/" + other + "\t"
		}
	}
	if len(cols) == 3 {
		hdr += "grpc/zk\t"
	}
	names := make([]string, len(cols))
	for i, sd := range cols {
		names[i] = sd.name
	}
	hdr += "client cores (" + strings.Join(names, "/") + ")\t"
	hdr += "server µs/op (" + strings.Join(names, "/") + ")\t"
	fmt.Fprintln(tw, hdr)
	for _, s := range specs {
		meds := make([]result, len(cols))
		for i := range cols {
			meds[i] = median(res[i][s])
		}
		line := fmt.Sprintf("%s\t%d\t", s.workload, s.clients)
		var cores, perOp []string
		for i, sd := range cols {
			line += fmt.Sprintf("%.0f\t%.1f\t", meds[i].OpsPerS, meds[i].P99)
			if !sd.other {
				line += fmt.Sprintf("%.2f\t", meds[i].OpsPerS/meds[0].OpsPerS)
			}
			cores = append(cores, fmt.Sprintf("%.2f", meds[i].ClientCores))
			perOp = append(perOp, cpuPerOp(res[i][s]))
		}
		if len(cols) == 3 {
			line += fmt.Sprintf("%.2f\t", meds[2].OpsPerS/meds[1].OpsPerS)
		}
		line += strings.Join(cores, " / ") + "\t"
		line += strings.Join(perOp, " / ") + "\t"
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	usage.print()
	return nil
}

// cpuPerOp is the median of the runs' server CPU per op, "-" when none
// was measured.
func cpuPerOp(rs []result) string {
	var v []float64
	for _, r := range rs {
		if r.ServerCPUPerOp > 0 {
			v = append(v, r.ServerCPUPerOp)
		}
	}
	if len(v) == 0 {
		return "-"
	}
	slices.Sort(v)
	return strconv.FormatFloat(v[len(v)/2], 'f', 0, 64)
}

// median is the run with the median throughput.
func median(rs []result) result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b result) int { return cmp.Compare(a.OpsPerS, b.OpsPerS) })
	return s[len(s)/2]
}

func runCoordd(c config, s spec) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.duration+c.warmup+5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.coordctl, "--servers", c.coordd, "bench", s.workload,
		"--clients", strconv.Itoa(s.clients), "--duration", c.duration.String(), "--warmup", c.warmup.String(),
		"--value-size", strconv.Itoa(c.valueSize), "--keys", strconv.Itoa(c.keys),
		"--share-conns="+strconv.FormatBool(c.shareConns), "-o", "json")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cpu0, t0 := cpuTime(syscall.RUSAGE_CHILDREN), time.Now()
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	cores := float64(cpuTime(syscall.RUSAGE_CHILDREN)-cpu0) / float64(time.Since(t0))
	r, err := parseBench(out.Bytes())
	if err != nil {
		return result{}, err
	}
	r.ClientCores = cores
	return r, nil
}

// parseBench reads the result of a run from coordctl bench -o json (its
// last line), with the servers' CPU per op from what it says of each
// server: the CPU seconds of the measured part.
func parseBench(out []byte) (result, error) {
	var r struct {
		result
		Servers []struct {
			CPUS float64 `json:"cpu_s"`
		} `json:"servers"`
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return result{}, fmt.Errorf("coordctl's output: %w", err)
	}
	var cpuS float64
	for _, sv := range r.Servers {
		cpuS += sv.CPUS
	}
	if r.Ops > 0 && len(r.Servers) > 0 {
		r.ServerCPUPerOp = cpuS * 1e6 / float64(r.Ops)
	}
	return r.result, nil
}

// keyCount is how many keys a workload reads or writes: --keys, and for
// write at least one per client (worker i writes keys i, i+clients, ...).
func keyCount(c config, s spec) int {
	if s.workload == "write" {
		return max(c.keys, s.clients)
	}
	return c.keys
}

// usesKeys says whether the workload works on the shared existing keys.
func usesKeys(s spec) bool {
	return s.workload == "write" || s.workload == "read" || s.workload == "read-sync"
}

// keyName is the name of key k under a workload's directory.
func keyName(k int) string { return fmt.Sprintf("k%07d", k) }

// writeKey returns worker i's next key for the write workload: keys i,
// i+clients, i+2*clients, ... in turn, as coordctl bench assigns them. next
// is the worker's own counter.
func writeKey(i, clients, nkeys int, next *int) int {
	k := i + *next*clients
	if k >= nkeys {
		*next, k = 0, i
	}
	*next++
	return k
}

// timed runs f and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	t := time.Now()
	err := f()
	return time.Since(t), err
}

// runOther runs one workload against the other system, as coordctl bench
// runs it against coordd.
func runOther(c config, sys system, s spec) (result, error) {
	value := make([]byte, c.valueSize)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	cpu0, t0 := cpuTime(syscall.RUSAGE_SELF), time.Now()
	op, closeAll, err := sys.prepare(c, s, value)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	warmEnd := start.Add(c.warmup)
	end := warmEnd.Add(c.duration)
	var failed atomic.Int64
	var firstErr atomic.Value
	lats := make([][]time.Duration, s.clients)
	var wg sync.WaitGroup
	for i := range s.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for time.Now().Before(end) {
				t := time.Now()
				lat, err := op(i, rng)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				if done := time.Now(); t.After(warmEnd) && done.Before(end) {
					lats[i] = append(lats[i], lat)
				}
			}
		}()
	}
	// The servers' CPU over the measured part: read when it starts and
	// when it ends (the workers run meanwhile).
	var serverCPU time.Duration
	if len(c.otherPids) > 0 {
		time.Sleep(time.Until(warmEnd))
		a := procCPU(c.otherPids)
		time.Sleep(time.Until(end))
		serverCPU = procCPU(c.otherPids) - a
	}
	wg.Wait()
	closeAll()
	cores := float64(cpuTime(syscall.RUSAGE_SELF)-cpu0) / float64(time.Since(t0))
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	if e := firstErr.Load(); e != nil {
		return result{}, fmt.Errorf("%d operations failed, the first with: %w", failed.Load(), e.(error))
	}
	r := result{Workload: s.workload, Clients: s.clients, Ops: len(all), ClientCores: cores,
		OpsPerS: float64(len(all)) / c.duration.Seconds(), P50: pct(0.5), P99: pct(0.99)}
	if len(all) > 0 && serverCPU > 0 {
		r.ServerCPUPerOp = float64(serverCPU.Microseconds()) / float64(len(all))
	}
	return r, nil
}
