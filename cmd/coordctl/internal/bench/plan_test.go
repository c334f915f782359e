package bench

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	c := &Config{Watchers: 7}
	specs, err := c.Plan([]string{"write,lock", "read:3,4", "watch", "watch:5", "watch-recursive", "watch-recursive:9", "idle", "idle:3"}, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{{"write", 1}, {"write", 2}, {"lock", 1}, {"lock", 2}, {"read", 3}, {"read", 4}, {"watch", 7}, {"watch", 5},
		{"watch-recursive", 7}, {"watch-recursive", 9}, {"idle", 0}, {"idle", 0}}
	if !reflect.DeepEqual(specs, want) {
		t.Errorf("plan %v, want %v", specs, want)
	}
}

func TestPlanRefuses(t *testing.T) {
	for _, tc := range []struct {
		protocol string
		args     []string
		want     string
	}{
		{ProtocolGRPC, []string{"nosuch"}, `unknown workload "nosuch" (want one of write, read, read-sync, create-eph, session, lock, watch, watch-recursive, session-hold, idle)`},
		{ProtocolGRPC, []string{"write:0"}, `write:0: "0" is not a positive count`},
		{ProtocolGRPC, []string{"read:1,x"}, `read:1,x: "x" is not a positive count`},
		{ProtocolZK, []string{"write", "watch-recursive:3"}, "watch-recursive needs --protocol grpc: go-zookeeper has no persistent watches"},
	} {
		c := &Config{Watchers: 1, Protocol: tc.protocol}
		specs, err := c.Plan(tc.args, []int{1})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s %q: %v (%v), want error %q", tc.protocol, tc.args, specs, err, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	valid := func() Config {
		return Config{Servers: []string{"a:1"}, Timeout: time.Second, Duration: 5 * time.Second, Keys: 1, Watchers: 1,
			TreeNodes: 1, RecursiveWatches: 1, Writers: 1, Root: "/b", AutoWarmup: true}
	}
	c := valid()
	if err := c.Check(); err != nil || c.Warmup != 500*time.Millisecond || c.Protocol != ProtocolGRPC || c.Log == nil {
		t.Errorf("warmup %v, protocol %q, log %v (%v); want 500ms, grpc and a log", c.Warmup, c.Protocol, c.Log, err)
	}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Duration = 0 }, "--duration must be positive"},
		{func(c *Config) { c.ValueSize = -1 }, "--value-size must not be negative"},
		{func(c *Config) { c.Keys = 0 }, "--keys must be at least 1"},
		{func(c *Config) { c.Watchers = 0 }, "--watchers must be at least 1"},
		{func(c *Config) { c.Writers = 0 }, "--tree, --recursive-watches and --writers must be at least 1"},
		{func(c *Config) { c.Root = "relative" }, `--path: "relative" is not a node path below the root`},
		{func(c *Config) { c.Root = "/" }, `--path: "/" is not a node path below the root`},
		{func(c *Config) { c.Root = "/a/" }, `--path: "/a/" is not a node path below the root`},
		{func(c *Config) { c.Protocol = "http" }, `--protocol: "http" is neither grpc nor zk`},
		{func(c *Config) { c.AutoWarmup, c.Warmup = false, -time.Second }, "--warmup must not be negative"},
	} {
		c := valid()
		tc.change(&c)
		if err := c.Check(); err == nil || err.Error() != tc.want {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
}

// TestHelp: each workload's paragraph of the verb's help starts with its
// name at the table's margin, its other lines in the text column, and
// Help lists them in the order of Workloads.
func TestHelp(t *testing.T) {
	var names []string
	for _, w := range workloads {
		names = append(names, w.name)
		if !strings.HasPrefix(w.help, "  "+w.name+" ") && !strings.HasPrefix(w.help, "  "+w.name+"\n") {
			t.Errorf("%s: help %q does not start with the name", w.name, w.help)
		}
		lines := strings.Split(strings.TrimSuffix(w.help, "\n"), "\n")
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, strings.Repeat(" ", 14)) || strings.HasPrefix(l, strings.Repeat(" ", 15)) {
				t.Errorf("%s: line %q is not in the text column", w.name, l)
			}
		}
		if !strings.HasSuffix(w.help, "\n") || w.run == nil {
			t.Errorf("%s: help must end a line, and run be set", w.name)
		}
		if !strings.Contains(Help(), w.help) {
			t.Errorf("%s: not in Help", w.name)
		}
	}
	if !reflect.DeepEqual(Workloads(), names) {
		t.Errorf("Workloads() = %v, want %v", Workloads(), names)
	}
}

// TestRunRefusesUnknownWorkload: specs not made by Plan are checked before
// anything runs.
func TestRunRefusesUnknownWorkload(t *testing.T) {
	b := &Bench{cfg: Config{Log: io.Discard}}
	rs, err := b.Run([]Spec{{"write", 1}, {"nosuch", 1}}, nil)
	if err == nil || rs != nil || err.Error() != `bench: unknown workload "nosuch"` {
		t.Errorf("%v, %v; want an unknown workload and no run", rs, err)
	}
}
