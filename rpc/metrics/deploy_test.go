package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// The Grafana dashboard and the Prometheus rules in deploy/ name coordd's
// metrics by hand: these tests check every name and label they use against
// the registry, so that a renamed metric breaks here rather than in an
// operator's dashboard. make deploy-check runs them, beside promtool.

const (
	dashboardFile  = "../../deploy/grafana/coordd.json"
	alertsFile     = "../../deploy/prometheus/alerts.yml"
	alertTestsFile = "../../deploy/prometheus/alerts_test.yml"
)

// targetLabels are the labels Prometheus attaches to every scraped series.
var targetLabels = []string{"job", "instance"}

// knownSeries maps every series name the registry exposes to its label
// names: a histogram's _bucket (with le), _sum and _count, a summary's
// quantiles (with quantile), _sum and _count.
func knownSeries(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, mf := range families(t, New(Options{})) {
		labels := append(labelNames(mf), targetLabels...)
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"] = append(slices.Clone(labels), "le")
			out[name+"_sum"], out[name+"_count"] = labels, labels
		case dto.MetricType_SUMMARY:
			out[name] = append(slices.Clone(labels), "quantile")
			out[name+"_sum"], out[name+"_count"] = labels, labels
		default:
			out[name] = labels
		}
	}
	return out
}

var (
	// metricRef is a name of ours, of Go's or of the process's.
	metricRef = regexp.MustCompile(`\b(?:coordd|go|process)_[a-zA-Z0-9_]+`)
	// selector is a metric name with its label matchers.
	selector = regexp.MustCompile(`\b((?:coordd|go|process)_[a-zA-Z0-9_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// grouping is a by, without, on or ignoring clause, and group_left or
	// group_right with labels.
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	// legendLabel is a {{label}} of a legend or an annotation.
	legendLabel = regexp.MustCompile(`\{\{\s*\$?(?:labels\.)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
)

// checkExpr checks one PromQL expression (and the legend that labels its
// series, if any): every metric it names exists, and every label it uses
// is one that one of its metrics has.
func checkExpr(t *testing.T, known map[string][]string, where, expr, legend string) {
	t.Helper()
	var labels []string
	names := metricRef.FindAllString(expr, -1)
	for _, name := range names {
		ls, ok := known[name]
		if !ok {
			t.Errorf("%s: %s is not a metric coordd exports (in %q)", where, name, expr)
			continue
		}
		labels = append(labels, ls...)
	}
	if len(names) == 0 && !strings.Contains(expr, "up{") {
		t.Errorf("%s: %q names no metric", where, expr)
	}
	labels = append(labels, targetLabels...)
	use := func(label, how string) {
		if !slices.Contains(labels, label) {
			t.Errorf("%s: label %q (%s) belongs to none of %v (in %q)", where, label, how, names, expr)
		}
	}
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		ls, ok := known[m[1]]
		for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
			if ok && !slices.Contains(ls, lm[1]) {
				t.Errorf("%s: %s has no label %q (in %q)", where, m[1], lm[1], expr)
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				use(l, "grouping")
			}
		}
	}
	for _, m := range legendLabel.FindAllStringSubmatch(legend, -1) {
		use(m[1], "legend")
	}
}

// TestDashboardUsesKnownMetrics: every query of deploy/grafana/coordd.json
// names metrics and labels coordd exports, and the dashboard is JSON that
// Grafana can import (panels with targets, the variables it uses).
func TestDashboardUsesKnownMetrics(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("%s: title %q, uid %q, %d panels", dashboardFile, dash.Title, dash.UID, len(dash.Panels))
	}
	var vars []string
	for _, v := range dash.Templating.List {
		vars = append(vars, v.Name)
	}
	known := knownSeries(t)
	type target struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	}
	type panel struct {
		ID      int      `json:"id"`
		Type    string   `json:"type"`
		Title   string   `json:"title"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var walk func(p panel)
	exprs, ids := 0, map[int]bool{}
	walk = func(p panel) {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			checkExpr(t, known, "panel "+p.Title, tg.Expr, tg.LegendFormat)
			for _, m := range regexp.MustCompile(`\$\{?([a-zA-Z_]+)`).FindAllStringSubmatch(tg.Expr, -1) {
				if !slices.Contains(vars, m[1]) && !strings.HasPrefix(m[1], "__") {
					t.Errorf("panel %q uses $%s, which the dashboard does not define", p.Title, m[1])
				}
			}
		}
		for _, c := range p.Panels {
			walk(c)
		}
	}
	for _, raw := range dash.Panels {
		var p panel
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		walk(p)
	}
	if exprs < 20 {
		t.Errorf("only %d queries found in %s", exprs, dashboardFile)
	}
}

// yamlValues returns the one-line values of key in a YAML file, unquoted.
// The rules keep each expression on one line so that this is enough; a
// block scalar fails the test.
func yamlValues(t *testing.T, file, key string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "|" || v == ">" || strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">") || v == "" {
			t.Fatalf("%s: keep each %s on one line (%q)", file, key, line)
		}
		if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out = append(out, v)
	}
	return out
}

// TestAlertsUseKnownMetrics: every alert of deploy/prometheus/alerts.yml,
// and every series its unit tests feed it, names metrics and labels coordd
// exports; each alert docs/monitoring.md promises is there.
func TestAlertsUseKnownMetrics(t *testing.T) {
	known := knownSeries(t)
	exprs := yamlValues(t, alertsFile, "expr")
	if len(exprs) == 0 {
		t.Fatalf("no expr in %s", alertsFile)
	}
	summaries := strings.Join(yamlValues(t, alertsFile, "summary"), "\n") + strings.Join(yamlValues(t, alertsFile, "description"), "\n")
	for _, e := range exprs {
		checkExpr(t, known, alertsFile, e, "")
	}
	for _, m := range legendLabel.FindAllStringSubmatch(summaries, -1) {
		if !slices.Contains([]string{"job", "instance", "value"}, m[1]) {
			t.Errorf("%s: an annotation uses {{ $labels.%s }}, which the alerts do not keep", alertsFile, m[1])
		}
	}
	alerts := yamlValues(t, alertsFile, "- alert")
	for _, want := range []string{"CoorddServerDown", "CoorddNoLeader", "CoorddLeaderFlapping", "CoorddFollowerBehind", "CoorddFsyncSlow", "CoorddSessionsExpiring"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("%s has no alert %s (it has %v)", alertsFile, want, alerts)
		}
	}
	tested := yamlValues(t, alertTestsFile, "alertname")
	for _, a := range alerts {
		if !slices.Contains(tested, a) {
			t.Errorf("alert %s has no test in %s", a, alertTestsFile)
		}
	}
	for _, s := range yamlValues(t, alertTestsFile, "- series") {
		if strings.HasPrefix(s, "up{") {
			continue
		}
		checkExpr(t, known, alertTestsFile, s, "")
	}
}
