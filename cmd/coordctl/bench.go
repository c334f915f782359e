package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coordd/coordd/cmd/coordctl/internal/bench"
	"github.com/coordd/coordd/rpc/apipb"
)

// The bench verb: its flags become a bench.Config, the engine
// (cmd/coordctl/internal/bench) runs the workloads, and the verb prints
// the results: a table at the end, or one JSON object per run as it ends.

var benchVerb = &verb{
	name:     "bench",
	synopsis: "bench WORKLOAD[,WORKLOAD...][:CLIENTS[,CLIENTS...]] ... [flags]",
	summary:  "measure the throughput and latency of workloads against the cluster",
	detail: `
Runs each workload with each client count (the cross product: bench
write,read --clients 1,64 makes four runs), one result per run: a table at
the end, or one JSON object per run as it ends with -o json. An argument may
name its own client counts after a colon (write:1,64 read:16,64 read-sync:64),
which then replace --clients for that argument. Flags may follow the
workloads.

Workloads (each client is its own session; the sessions of a run are spread
evenly over --servers):
` + bench.Help() + `
With --protocol zk the sessions speak ZooKeeper's client protocol through
go-zookeeper (github.com/go-zookeeper/zk) instead of coordd's gRPC API, each
with a TCP connection of its own to one server, and lock is go-zookeeper's
own recipe (zk.NewLock); read-sync is then two round trips (go-zookeeper's
Sync waits for its answer before the read is sent). That mode also measures
a ZooKeeper ensemble (without the servers' memory and CPU, which only coordd
reports).

Ops done during the warm-up are not counted. Latencies are recorded in a
log-linear histogram (relative error under 0.8%). When the servers report
it, each result carries each server's resident memory at the end of the run
(rss_mb) and the CPU seconds it used during the measured part (cpu_s).

The nodes live under --path, which is deleted at the end unless --keep.
The exit status is 1 if any operation failed.`,
	define: func(fs *flag.FlagSet) func(x *cmd, args []string) error {
		f := defineBenchFlags(fs)
		return func(x *cmd, args []string) error {
			pos, err := parseBenchArgs(x, fs, args)
			if err != nil {
				return err
			}
			cfg, specs, err := f.config(x, fs, pos)
			if err != nil {
				return err
			}
			if f.cpuProfile != "" {
				stop, err := startCPUProfile(f.cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			return runBench(x, cfg, specs)
		}
	},
}

// benchFlags are the bench verb's flags that are not a field of
// bench.Config as they are.
type benchFlags struct {
	cfg        bench.Config
	clients    string
	cpuProfile string
}

func defineBenchFlags(fs *flag.FlagSet) *benchFlags {
	f := &benchFlags{}
	c := &f.cfg
	fs.StringVar(&f.clients, "clients", "1", "comma-separated client counts")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured `time` of each run")
	fs.DurationVar(&c.Warmup, "warmup", 0, "warm-up `time` before measuring (default 10% of --duration, at most 1s)")
	fs.IntVar(&c.ValueSize, "value-size", 100, "size in `bytes` of the values written")
	fs.IntVar(&c.Keys, "keys", 1000, "number of keys read (write uses at least one per client)")
	fs.IntVar(&c.Watchers, "watchers", 1000, "number of watching sessions of the watch and watch-recursive workloads")
	fs.IntVar(&c.TreeNodes, "tree", 100000, "nodes of the watch-recursive workload's tree")
	fs.IntVar(&c.RecursiveWatches, "recursive-watches", 10000, "recursive watches of the watch-recursive workload")
	fs.IntVar(&c.Writers, "writers", 32, "writing sessions of the watch-recursive workload")
	fs.StringVar(&c.Root, "path", "/coordctl-bench", "node under which the benchmark works")
	fs.BoolVar(&c.Keep, "keep", false, "leave the benchmark's nodes in place")
	fs.BoolVar(&c.ShareConns, "share-conns", true, "the sessions share one connection per server (client.Pool, as etcd's benchmark shares its --conns); false gives each session a connection of its own, as separate client processes have and as every ZooKeeper session has (use it to compare with ZooKeeper)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of this client process to `file` (to see the client's share)")
	fs.StringVar(&c.Protocol, "protocol", bench.ProtocolGRPC, "the client protocol of the measured sessions: grpc (coordd's Go client) or zk (ZooKeeper's, through go-zookeeper; each session has a connection of its own)")
	return f
}

// parseBenchArgs parses the flags, which may follow the workloads (the
// flags that remain after each positional argument), and returns the
// positional arguments.
func parseBenchArgs(x *cmd, fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := parseFlags(fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printVerbUsage(x.stdout, x.verb)
				return nil, errHelp
			}
			return nil, x.usage("%v", err)
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	// -o may have followed a workload.
	if f := fs.Lookup("o"); f != nil {
		if err := checkFormat(x.verb.name, f.Value.String()); err != nil {
			return nil, err
		}
		x.out.json = f.Value.String() == "json"
	}
	if len(pos) == 0 {
		return nil, x.usage("missing workload")
	}
	return pos, nil
}

// config completes the engine's configuration with the invocation's
// settings and plans the runs; its errors are usage errors.
func (f *benchFlags) config(x *cmd, fs *flag.FlagSet, pos []string) (bench.Config, []bench.Spec, error) {
	cfg := f.cfg
	counts, err := bench.ParseCounts(f.clients)
	if err != nil {
		return cfg, nil, x.usage("--clients: %v", err)
	}
	cfg.AutoWarmup = true
	shareSet := false
	fs.Visit(func(fl *flag.Flag) {
		cfg.AutoWarmup = cfg.AutoWarmup && fl.Name != "warmup"
		shareSet = shareSet || fl.Name == "share-conns"
	})
	if cfg.Protocol == bench.ProtocolZK {
		if shareSet && cfg.ShareConns {
			return cfg, nil, x.usage("--share-conns: a ZooKeeper session has a connection of its own (--protocol zk)")
		}
		cfg.ShareConns = false
	}
	cfg.Servers, cfg.Timeout, cfg.SessionTimeout, cfg.TLS = x.servers, x.timeout, x.sessionTimeout, x.tls
	cfg.Log, cfg.Terminal, cfg.ErrText = x.stderr, isTerminal(x.stderr), errText
	cfg.Status = func() (*apipb.StatusResponse, error) {
		var resp *apipb.StatusResponse
		err := x.unary(func(ctx context.Context, c apipb.CoordClient) (err error) {
			resp, err = c.Status(ctx, &apipb.StatusRequest{})
			return err
		})
		return resp, err
	}
	if err := cfg.Check(); err != nil {
		return cfg, nil, x.usage("%v", err)
	}
	specs, err := cfg.Plan(pos, counts)
	if err != nil {
		return cfg, nil, x.usage("%v", err)
	}
	return cfg, specs, nil
}

// startCPUProfile profiles this process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// runBench runs the specs and prints their results: with -o json each as
// its run ends, else one table before the benchmark's nodes are deleted.
func runBench(x *cmd, cfg bench.Config, specs []bench.Spec) error {
	b, err := bench.Open(x.ctx, cfg)
	if err != nil {
		return err
	}
	var emit func(bench.Result) error
	if x.out.json {
		emit = func(r bench.Result) error { return x.out.emit(r, nil) }
	}
	results, err := b.Run(specs, emit)
	if !x.out.json && len(results) > 0 {
		writeBenchTable(x.stdout, results)
		writeHoldLines(x.stdout, results)
	}
	b.Close()
	return err
}

// writeBenchTable prints the results as one table; the server columns list
// each server's value in member id order, separated by slashes.
func writeBenchTable(w io.Writer, rs []bench.Result) {
	var ids []string
	seen := map[string]bool{}
	for _, r := range rs {
		for _, s := range r.Servers {
			if !seen[s.ID] {
				seen[s.ID] = true
				ids = append(ids, s.ID)
			}
		}
	}
	sort.Strings(ids)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := "WORKLOAD\tCLIENTS\tOPS\tERRORS\tOPS/S\tP50 ms\tP95 ms\tP99 ms\tMAX ms\t"
	if len(ids) > 0 {
		hdr += fmt.Sprintf("RSS MB (%s)\tCPU s (%s)\t", strings.Join(ids, "/"), strings.Join(ids, "/"))
	}
	fmt.Fprintln(tw, hdr)
	for _, r := range rs {
		fmt.Fprintln(tw, benchRow(r, ids))
	}
	tw.Flush()
}

// benchRow is the table's row of r; ids are the servers' columns.
func benchRow(r bench.Result, ids []string) string {
	name := r.Workload
	if r.RecursiveWatches != nil {
		name += fmt.Sprintf(" %d watches", *r.RecursiveWatches)
	}
	if r.Latency != "op" {
		name += " (" + r.Latency + ")"
	}
	line := fmt.Sprintf("%s\t%d\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t", name, r.Clients, r.Ops, r.Errors, r.OpsPerS, r.P50Ms, r.P95Ms, r.P99Ms, r.MaxMs)
	if len(ids) == 0 {
		return line
	}
	rss := make([]string, len(ids))
	cpu := make([]string, len(ids))
	for i, id := range ids {
		rss[i], cpu[i] = "-", "-"
		for _, s := range r.Servers {
			if s.ID == id {
				rss[i] = strconv.FormatFloat(s.RssMB, 'f', 0, 64)
				cpu[i] = strconv.FormatFloat(s.CPUS, 'f', 1, 64)
			}
		}
	}
	return line + strings.Join(rss, "/") + "\t" + strings.Join(cpu, "/") + "\t"
}

// writeHoldLines prints, after the table, what each session-hold run
// measured per session.
func writeHoldLines(w io.Writer, rs []bench.Result) {
	for _, r := range rs {
		if r.Workload != "session-hold" {
			continue
		}
		fmt.Fprintf(w, "session-hold %d (%s): %d healthy, %d failed", r.HeldSessions, r.Protocol, r.Ops, r.Errors)
		if r.KBPerSession != 0 {
			fmt.Fprintf(w, "; %.1f KB of resident memory per session (all servers)", r.KBPerSession)
		}
		if r.LeaderCores != 0 {
			fmt.Fprintf(w, "; leader %.3f cores", r.LeaderCores)
		}
		fmt.Fprintln(w)
	}
}

// isTerminal reports whether w is a terminal (then the progress line is
// rewritten in place).
func isTerminal(w io.Writer) bool {
	if sw, ok := w.(*syncWriter); ok {
		w = sw.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
