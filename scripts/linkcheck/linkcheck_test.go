package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSlug: headings of this repository and the corner cases of GitHub's
// anchors (punctuation dropped, each space a '-', no collapsing).
func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Security: TLS", "security-tls"},
		{"Access control (ACLs) and authentication", "access-control-acls-and-authentication"},
		{"SASL authentication (ZooKeeper's clients)", "sasl-authentication-zookeepers-clients"},
		{"Deliberate differences from ZooKeeper 3.8", "deliberate-differences-from-zookeeper-38"},
		{"Growing and shrinking", "growing-and-shrinking"},
		{"3 -> 5", "3---5"},
		{"coordctl in scripts", "coordctl-in-scripts"},
		{"raft_log and --raft-log", "raft_log-and---raft-log"},
		{"Über, µs/op", "über-µsop"},
	} {
		if got := Slug(c.heading); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// TestAnchorsRepeat: a repeated heading gets -1, -2, as on GitHub.
func TestAnchorsRepeat(t *testing.T) {
	var a Anchors
	var got []string
	for _, h := range []string{"Refusals", "Refusals", "Refusals-1", "Refusals"} {
		got = append(got, a.Add(h))
	}
	want := []string{"refusals", "refusals-1", "refusals-1-1", "refusals-2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("anchors %q, want %q", got, want)
	}
}

// writeTree writes files (path -> content) under a new temporary root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestCheck: each kind of link, good and broken, in a small tree; a
// broken one is reported with its file and line, a good one is not.
func TestCheck(t *testing.T) {
	base := map[string]string{
		"docs/security.md":         "# Security\n\n## Security: TLS\n\n### `--cert-file` and *keys*\n\n## Refusals\n\n## Refusals\n",
		"docs/console/cluster.png": "png",
		"rpc/DESIGN.md":            "# rpc\n",
	}
	for _, c := range []struct {
		name   string
		readme string
		want   []string
	}{
		{"a page", "[s](docs/security.md)\n", nil},
		{"an anchor", "[s](docs/security.md#security-tls)\n", nil},
		{"an anchor of a code span", "[s](docs/security.md#--cert-file-and-keys)\n", nil},
		{"a repeated heading", "[s](docs/security.md#refusals-1)\n", nil},
		{"an image", "![c](docs/console/cluster.png)\n", nil},
		{"a directory", "[d](docs/console/)\n", nil},
		{"from the root", "[r](/rpc/DESIGN.md)\n", nil},
		{"this file's anchor", "# coordd\n\nsee [below](#run-it)\n\n## Run it\n", nil},
		{"external", "[x](https://example.com/nowhere.md#x) <https://example.com/y> [m](mailto:a@b)\n", nil},
		{"in a table", "| a | b |\n|---|---|\n| [s](docs/security.md) | x |\n", nil},
		{"in code", "```\n[x](nowhere.md)\n```\n\n`[y](nowhere.md)`\n\n    [z](nowhere.md)\n", nil},
		{"percent-escaped", "[s](docs/security.md#security-tls)\n[t](docs%2Fsecurity.md)\n", nil},
		{"a missing page", "# coordd\n\ntext\n[s](docs/secrity.md)\n", []string{"README.md:4: docs/secrity.md: no such file"}},
		{"a missing image", "![c](docs/console/clusters.png)\n", []string{"README.md:1: docs/console/clusters.png: no such file"}},
		{"a missing anchor", "[s](docs/security.md#tls)\n", []string{"README.md:1: docs/security.md#tls: no heading in docs/security.md has the anchor #tls"}},
		{"a missing repeat", "[s](docs/security.md#refusals-2)\n", []string{"README.md:1: docs/security.md#refusals-2: no heading in docs/security.md has the anchor #refusals-2"}},
		{"a missing own anchor", "# coordd\n\n[s](#run)\n", []string{"README.md:3: #run: no heading in README.md has the anchor #run"}},
		{"upper case", "[s](docs/security.md#Security-TLS)\n", []string{"README.md:1: docs/security.md#Security-TLS: no heading in docs/security.md has the anchor #Security-TLS"}},
		{"an anchor in a picture", "[c](docs/console/cluster.png#x)\n", []string{"README.md:1: docs/console/cluster.png#x: an anchor in a file that is not Markdown"}},
		{"outside", "[o](../outside.md)\n", []string{"README.md:1: ../outside.md: outside the repository"}},
		{"a reference link", "[s][sec]\n\n[sec]: docs/security.md#nope\n", []string{"README.md:1: docs/security.md#nope: no heading in docs/security.md has the anchor #nope"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"README.md": c.readme}
			for k, v := range base {
				files[k] = v
			}
			got, err := Check(writeTree(t, files))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestCheckSkips: Markdown in hidden directories, testdata, bin and dist
// is not ours to check (a build's output, a test's fixtures).
func TestCheckSkips(t *testing.T) {
	root := writeTree(t, map[string]string{
		"README.md":          "[ok](docs/a.md)\n",
		"docs/a.md":          "# a\n",
		".git/x.md":          "[x](nowhere.md)\n",
		"rpc/testdata/x.md":  "[x](nowhere.md)\n",
		"dist/c/README.md":   "[x](nowhere.md)\n",
		"docs/sub/nested.md": "[up](../a.md#a)\n",
	})
	got, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("got %q, want nothing", got)
	}
}

// TestRepositoryLinks: every link of this repository's Markdown files
// (README.md, DESIGN.md, docs/...) leads to a file and heading that exist.
func TestRepositoryLinks(t *testing.T) {
	problems, err := Check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
