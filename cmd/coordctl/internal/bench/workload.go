package bench

import "strings"

// workload is one of the verb's workloads. Each is a file of its own,
// declaring its workload and the function that runs it; adding one is
// that file and its line in workloads.
type workload struct {
	name string
	// help is its paragraph of the verb's help: the name at the margin,
	// the text from column 15 (see Help).
	help string
	// counts says what a run's client count is.
	counts countRule
	// grpcOnly, if set, says why the workload cannot run with --protocol
	// zk (Plan refuses it).
	grpcOnly string
	// run runs one spec and returns its results (most workloads have one).
	// It sets no Protocol: the engine does.
	run func(b *Bench, s Spec) ([]Result, error)
}

// countRule is how a workload's runs get their client counts.
type countRule int

const (
	// clientCounts: a run per count, from --clients or after the colon.
	clientCounts countRule = iota
	// watcherCount: one run with --watchers, unless counts follow a colon
	// (then a run per count).
	watcherCount
	// noClients: one run with no clients, whatever the counts.
	noClients
)

// workloads are every workload, in the order help lists them.
var workloads = []*workload{
	writeWorkload, readWorkload, readSyncWorkload, createEphWorkload, sessionWorkload, lockWorkload,
	watchWorkload, watchRecursiveWorkload, sessionHoldWorkload, idleWorkload,
}

// Workloads returns the workloads' names, in the order help lists them.
func Workloads() []string {
	out := make([]string, len(workloads))
	for i, w := range workloads {
		out[i] = w.name
	}
	return out
}

// Help returns the workloads' paragraphs for the verb's help, in order.
func Help() string {
	var b strings.Builder
	for _, w := range workloads {
		b.WriteString(w.help)
	}
	return b.String()
}

func lookup(name string) *workload {
	for _, w := range workloads {
		if w.name == name {
			return w
		}
	}
	return nil
}
