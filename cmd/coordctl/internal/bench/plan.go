package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Spec is one run: a workload and its number of clients (what the
// workload's help says they are: sessions, watchers; 0 for idle).
type Spec struct {
	Workload string
	Clients  int
}

// ParseCounts parses a comma-separated list of client counts ("1,64").
func ParseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Plan expands the verb's positional arguments into the runs, in order:
// each argument is WORKLOAD[,WORKLOAD...][:COUNT[,COUNT...]], its counts
// (or else counts) crossed with its workloads, each workload choosing its
// clients as its countRule says.
func (c *Config) Plan(args []string, counts []int) ([]Spec, error) {
	var specs []Spec
	for _, a := range args {
		names, cs, hasCounts := strings.Cut(a, ":")
		argCounts := counts
		if hasCounts {
			var err error
			if argCounts, err = ParseCounts(cs); err != nil {
				return nil, fmt.Errorf("%s: %v", a, err)
			}
		}
		for _, name := range strings.Split(names, ",") {
			w := lookup(strings.TrimSpace(name))
			if w == nil {
				return nil, fmt.Errorf("unknown workload %q (want one of %s)", strings.TrimSpace(name), strings.Join(Workloads(), ", "))
			}
			if c.Protocol == ProtocolZK && w.grpcOnly != "" {
				return nil, fmt.Errorf("%s needs --protocol grpc: %s", w.name, w.grpcOnly)
			}
			switch {
			case w.counts == noClients:
				specs = append(specs, Spec{w.name, 0})
			case w.counts == watcherCount && !hasCounts:
				specs = append(specs, Spec{w.name, c.Watchers})
			default:
				for _, n := range argCounts {
					specs = append(specs, Spec{w.name, n})
				}
			}
		}
	}
	return specs, nil
}
