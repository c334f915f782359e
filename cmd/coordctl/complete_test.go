package main

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
)

// fakeTree lists children from a map, as the server would.
func fakeTree(tree map[string][]string) *completer {
	return &completer{children: func(_ context.Context, path string) ([]string, error) {
		c, ok := tree[path]
		if !ok {
			return nil, client.ErrNoNode
		}
		return c, nil
	}}
}

// complete runs the completer on line with the cursor at its end and
// returns the candidates in full (the shared part plus each one's rest).
func complete(cp *completer, line string) []string {
	cands, n := cp.Do([]rune(line), len([]rune(line)))
	r := []rune(line)
	shared := string(r[len(r)-n:])
	var out []string
	for _, c := range cands {
		out = append(out, shared+string(c))
	}
	return out
}

// TestCompleter: verbs first, then sub-commands, flags, -o's formats and
// node paths (the children of the typed parent), with names that need it
// escaped as the shell reads them.
func TestCompleter(t *testing.T) {
	cp := fakeTree(map[string][]string{
		"/":          {"app", "apple", "zookeeper", "x y"},
		"/app":       {"job-2", "job-1", "config"},
		"/app/job-1": {},
		"/x y":       {"in"},
	})
	cases := []struct {
		line string
		want []string
	}{
		{"", nil}, // every verb: checked below
		{"ge", []string{"get ", "getacl "}},
		{"del", []string{"delete ", "deleteall "}},
		{"qu", []string{"quit "}},
		{"sh", nil}, // the shell verb does not work in the shell
		{"help lo", []string{"lock ", "locks "}},
		{"get /ap", []string{"app", "apple"}},
		{"get /app", []string{"app", "apple"}},
		{"ls /app/", []string{"config", "job-1", "job-2"}},
		{"ls /app/j", []string{"job-1", "job-2"}},
		{"ls -s /app/job-", []string{"job-1", "job-2"}},
		{"get /app/job-1/", nil},
		{"get /nope/", nil},
		{"get /x", []string{`x\ y`}},
		{`get /x\ y/`, []string{"in"}},
		{"get ", []string{"/"}},
		{"set /app ", nil}, // the data, not a path
		{"set -v ", nil},   // -v's value
		{"set -v 1 ", []string{"/"}},
		{"get -", []string{"-o ", "-s ", "-sync ", "-w "}},
		{"get -s", []string{"-s ", "-sync "}},
		{"lock --w", []string{"--wait "}},
		{"get -o ", []string{"json ", "text "}},
		{"ls -o j", []string{"json "}},
		{"member ", []string{"list ", "add ", "remove ", "promote "}},
		{"member re", []string{"remove "}},
		{"locks /a", []string{"app", "apple"}},
		{"status /", nil},
		{"nosuchverb /", nil},
		{`get "/ap`, nil}, // inside quotes
	}
	for _, tc := range cases {
		got := complete(cp, tc.line)
		if tc.line == "" {
			if len(got) != len(verbs)-1+2 || !strings.Contains(strings.Join(got, ","), "deleteall ,") {
				t.Errorf("%q completes to %q, want every verb but shell, quit and exit", tc.line, got)
			}
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q completes to %q, want %q", tc.line, got, tc.want)
		}
	}
	// The cursor need not be at the end.
	line := []rune("get /ap x")
	if cands, n := cp.Do(line, 7); n != 2 || len(cands) != 2 || string(cands[1]) != "ple" {
		t.Errorf("completion before the end: %q, %d", cands, n)
	}
}

// TestCompleterThroughSession: the shell's completer lists the children
// through the shell's own session.
func TestCompleterThroughSession(t *testing.T) {
	fresh(t, "/cmpl")
	for _, p := range []string{"/cmpl", "/cmpl/app", "/cmpl/apple", "/cmpl/job"} {
		ok(t, "create", p)
	}
	c := newCLI(strings.NewReader(""), &lockedBuffer{}, &lockedBuffer{}, nil)
	c.servers, c.timeout, c.sessionTimeout = []string{server(t)}, 10*time.Second, 10*time.Second
	c.inShell = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.session(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.sess.close(time.Second)
	if got, want := complete(c.shellCompleter(), "get /cmpl/ap"), []string{"app", "apple"}; !reflect.DeepEqual(got, want) {
		t.Errorf("completed %q, want %q", got, want)
	}
	if got, want := complete(c.shellCompleter(), "ls /cm"), []string{"cmpl"}; !reflect.DeepEqual(got, want) {
		t.Errorf("completed %q, want %q", got, want)
	}
}
