// Command zkcompare measures coordd against ZooKeeper on one machine.
//
// It runs coordctl bench's workloads (write, read, read-sync, create-eph,
// lock, session) against a ZooKeeper ensemble, with the go-zookeeper client
// in this process, and the same workloads against a coordd cluster through
// `coordctl bench -o json`, alternating between the two in every round, and
// prints one table of the medians. The ZooKeeper side mirrors coordctl
// bench: the same keys, key assignment, value size, warm-up and percentiles;
// one session (and so one connection) per client, spread over the servers.
//
// scripts/compare-zookeeper.sh (make compare-zookeeper) starts both
// clusters and runs it. It is a separate module so that the coordd module
// does not depend on a ZooKeeper client.
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
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"
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
}

// spec is one workload at one client count.
type spec struct {
	workload string
	clients  int
}

func (s spec) String() string { return s.workload + ":" + strconv.Itoa(s.clients) }

type config struct {
	zkServers  []string
	coordd     string
	coordctl   string
	duration   time.Duration
	warmup     time.Duration
	zkWarmup   time.Duration
	rounds     int
	valueSize  int
	keys       int
	root       string
	jsonOutput bool
}

func main() {
	var c config
	zkServers := flag.String("zk", "127.0.0.1:2191,127.0.0.1:2192,127.0.0.1:2193", "the ZooKeeper servers")
	flag.StringVar(&c.coordd, "coordd", "127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283", "the coordd servers")
	flag.StringVar(&c.coordctl, "coordctl", "bin/coordctl", "the coordctl binary")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "measured time of each run")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "warm-up time before each run")
	flag.DurationVar(&c.zkWarmup, "zk-warmup", 5*time.Second, "an unmeasured first pass of every workload on ZooKeeper, so that the JVM has compiled its hot code (0: none)")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every workload on both")
	flag.IntVar(&c.valueSize, "value-size", 100, "size in bytes of the values written")
	flag.IntVar(&c.keys, "keys", 1000, "number of keys read (write uses at least one per client)")
	flag.StringVar(&c.root, "path", "/zkcompare", "node under which the ZooKeeper runs work")
	flag.BoolVar(&c.jsonOutput, "json", false, "also print every run as a JSON line")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: zkcompare [flags] workload:clients[,clients...] ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetOutput(io.Discard) // go-zookeeper logs every connection
	c.zkServers = strings.Split(*zkServers, ",")
	specs, err := parseSpecs(flag.Args())
	if err == nil && (c.rounds < 1 || c.duration <= 0) {
		err = errors.New("--rounds and --duration must be positive")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "zkcompare:", err)
		os.Exit(2)
	}
	if err := run(c, specs); err != nil {
		fmt.Fprintln(os.Stderr, "zkcompare:", err)
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

func run(c config, specs []spec) error {
	if c.zkWarmup > 0 {
		fmt.Fprintf(os.Stderr, "zkcompare: warming ZooKeeper's JVM: every workload once for %v, not measured\n", c.zkWarmup)
		w := c
		w.duration, w.warmup = c.zkWarmup, 0
		for _, s := range specs {
			if _, err := runZK(w, s); err != nil {
				return fmt.Errorf("zookeeper %s: %w", s, err)
			}
		}
	}
	zkRes := map[spec][]result{}
	coRes := map[spec][]result{}
	for r := 1; r <= c.rounds; r++ {
		for _, s := range specs {
			// Alternate which goes first, so that a drift of the machine's
			// speed within a round falls on both.
			order := []bool{r%2 == 1, r%2 == 0} // true: ZooKeeper
			for _, isZK := range order {
				var res result
				var err error
				name := "coordd"
				if isZK {
					name = "zookeeper"
					res, err = runZK(c, s)
				} else {
					res, err = runCoordd(c, s)
				}
				if err != nil {
					return fmt.Errorf("round %d, %s %s: %w", r, name, s, err)
				}
				if res.Errors > 0 {
					return fmt.Errorf("round %d, %s %s: %d operations failed", r, name, s, res.Errors)
				}
				fmt.Fprintf(os.Stderr, "round %d  %-10s %-14s %9.0f ops/s  p99 %6.1f ms\n", r, name, s, res.OpsPerS, res.P99)
				if c.jsonOutput {
					line, _ := json.Marshal(struct {
						System string `json:"system"`
						Round  int    `json:"round"`
						result
					}{name, r, res})
					fmt.Println(string(line))
				}
				if isZK {
					zkRes[s] = append(zkRes[s], res)
				} else {
					coRes[s] = append(coRes[s], res)
				}
			}
		}
	}
	fmt.Printf("\nmedians of %d rounds of %v each (ops/s; p99 in ms; lock: handoffs/s, p99 of acquire)\n\n", c.rounds, c.duration)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tclients\tZooKeeper\tp99\tcoordd\tp99\tcoordd/ZK\t")
	for _, s := range specs {
		z, o := median(zkRes[s]), median(coRes[s])
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.0f\t%.1f\t%.2f\t\n", s.workload, s.clients, z.OpsPerS, z.P99, o.OpsPerS, o.P99, o.OpsPerS/z.OpsPerS)
	}
	return tw.Flush()
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
		"--value-size", strconv.Itoa(c.valueSize), "--keys", strconv.Itoa(c.keys), "-o", "json")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var r result
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return result{}, fmt.Errorf("coordctl's output: %w", err)
	}
	return r, nil
}

var acl = zk.WorldACL(zk.PermAll)

// connect opens a session on one server and waits until it is established.
func connect(server string) (*zk.Conn, error) {
	conn, events, err := zk.Connect([]string{server}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case e := <-events:
			if e.State == zk.StateHasSession {
				go func() {
					for range events { // drain: the client blocks on a full channel
					}
				}()
				return conn, nil
			}
		case <-deadline.C:
			conn.Close()
			return nil, fmt.Errorf("%s: no session within 10s", server)
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// ensure creates path and its parents.
func ensure(conn *zk.Conn, path string) error {
	p := ""
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		p += "/" + part
		if _, err := conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// zkOp is one operation of worker i; it returns the latency to record.
type zkOp func(i int, rng *rand.Rand) (time.Duration, error)

// runZK runs one workload against ZooKeeper, as coordctl bench runs it
// against coordd.
func runZK(c config, s spec) (result, error) {
	value := make([]byte, c.valueSize)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	admin, err := connect(c.zkServers[0])
	if err != nil {
		return result{}, err
	}
	defer admin.Close()
	dir := c.root + "/" + s.workload
	if s.workload == "write" || s.workload == "read" || s.workload == "read-sync" {
		dir = c.root + "/kv"
	}
	if err := ensure(admin, dir); err != nil {
		return result{}, err
	}
	var keys []string
	if s.workload == "write" || s.workload == "read" || s.workload == "read-sync" {
		n := c.keys
		if s.workload == "write" {
			n = max(n, s.clients)
		}
		// Earlier runs made most of them: create only what is missing.
		have, _, err := admin.Children(dir)
		if err != nil {
			return result{}, fmt.Errorf("children of %s: %w", dir, err)
		}
		exists := make(map[string]bool, len(have))
		for _, name := range have {
			exists[name] = true
		}
		keys = make([]string, n)
		for i := range keys {
			name := fmt.Sprintf("k%07d", i)
			keys[i] = dir + "/" + name
			if exists[name] {
				continue
			}
			if _, err := admin.Create(keys[i], value, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return result{}, fmt.Errorf("create %s: %w", keys[i], err)
			}
		}
	}
	conns := make([]*zk.Conn, s.clients)
	defer func() {
		for _, conn := range conns {
			if conn != nil {
				conn.Close()
			}
		}
	}()
	if s.workload != "session" {
		for i := range conns {
			if conns[i], err = connect(c.zkServers[i%len(c.zkServers)]); err != nil {
				return result{}, err
			}
		}
	}
	// write: worker i sets keys i, i+clients, i+2*clients, ... in turn.
	next := make([]int, s.clients)
	timed := func(f func() error) (time.Duration, error) {
		t := time.Now()
		err := f()
		return time.Since(t), err
	}
	var op zkOp
	switch s.workload {
	case "write":
		op = func(i int, _ *rand.Rand) (time.Duration, error) {
			k := i + next[i]*s.clients
			if k >= len(keys) {
				next[i], k = 0, i
			}
			next[i]++
			return timed(func() error { _, err := conns[i].Set(keys[k], value, -1); return err })
		}
	case "read":
		op = func(i int, rng *rand.Rand) (time.Duration, error) {
			k := keys[rng.IntN(len(keys))]
			return timed(func() error { _, _, err := conns[i].Get(k); return err })
		}
	case "read-sync":
		// go-zookeeper has no asynchronous sync, so this is two round
		// trips, where coordctl's read-sync sends both at once (SyncGet).
		op = func(i int, rng *rand.Rand) (time.Duration, error) {
			k := keys[rng.IntN(len(keys))]
			return timed(func() error {
				if _, err := conns[i].Sync(k); err != nil {
					return err
				}
				_, _, err := conns[i].Get(k)
				return err
			})
		}
	case "create-eph":
		op = func(i int, _ *rand.Rand) (time.Duration, error) {
			return timed(func() error {
				p, err := conns[i].Create(dir+"/e-", value, zk.FlagEphemeral|zk.FlagSequence, acl)
				if err != nil {
					return err
				}
				return conns[i].Delete(p, -1)
			})
		}
	case "lock":
		// go-zookeeper's Lock is the recipe of ZooKeeper's documentation:
		// a protected ephemeral sequential node, each waiter watching its
		// predecessor. The latency is the acquire's, as in coordctl bench.
		op = func(i int, _ *rand.Rand) (time.Duration, error) {
			l := zk.NewLock(conns[i], dir, acl)
			lat, err := timed(l.Lock)
			if err != nil {
				return 0, err
			}
			return lat, l.Unlock()
		}
	case "session":
		op = func(i int, _ *rand.Rand) (time.Duration, error) {
			return timed(func() error {
				conn, err := connect(c.zkServers[i%len(c.zkServers)])
				if err != nil {
					return err
				}
				defer conn.Close()
				_, err = conn.Create(dir+"/s-", value, zk.FlagEphemeral|zk.FlagSequence, acl)
				return err
			})
		}
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
	wg.Wait()
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
	return result{Workload: s.workload, Clients: s.clients, Ops: len(all),
		OpsPerS: float64(len(all)) / c.duration.Seconds(), P50: pct(0.5), P99: pct(0.99)}, nil
}
