package bench

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
)

// TestResultJSON pins the JSON form of a result, the lines of coordctl
// bench -o json that scripts and test/cluster/compare parse: the field
// names, their order, and which are left out when empty.
func TestResultJSON(t *testing.T) {
	names := func(v any) []string {
		t.Helper()
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, m := range regexp.MustCompile(`"([a-z0-9_]+)":`).FindAllStringSubmatch(string(out), -1) {
			keys = append(keys, m[1])
		}
		return keys
	}
	minimal := []string{"workload", "clients", "protocol", "duration_s", "ops", "errors", "ops_per_s", "latency",
		"mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms", "value_size", "shared_conns"}
	if got := names(Result{}); !reflect.DeepEqual(got, minimal) {
		t.Errorf("empty result's fields %v, want %v", got, minimal)
	}
	n := 1
	full := Result{HandoffsPerS: 1, Keys: 1, TreeNodes: 1, RecursiveWatches: &n, WatchSessions: 1,
		SessionsPerServer: map[string]int{"s": 1}, Servers: []ServerUsage{{RssStartMB: 1, Role: "leader"}},
		HeldSessions: 1, KBPerSession: 1, LeaderCores: 1, FirstError: "e"}
	want := []string{"workload", "clients", "protocol", "duration_s", "ops", "errors", "ops_per_s", "handoffs_per_s",
		"latency", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms", "value_size", "keys", "shared_conns",
		"tree_nodes", "recursive_watches", "watch_sessions", "sessions_per_server", "s",
		"servers", "id", "address", "role", "rss_mb", "cpu_s", "rss_start_mb",
		"held_sessions", "kb_per_session", "leader_cores", "first_error"}
	if got := names(full); !reflect.DeepEqual(got, want) {
		t.Errorf("full result's fields %v, want %v", got, want)
	}
}
