package main

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// wideLines returns the lines of s wider than width.
func wideLines(s string, width int) []string {
	var wide []string
	for _, l := range strings.Split(s, "\n") {
		if utf8.RuneCountInString(l) > width {
			wide = append(wide, l)
		}
	}
	return wide
}

// TestHelpWidth: no line of any help is wider than the width it is
// written for, from the narrowest to the default.
func TestHelpWidth(t *testing.T) {
	for _, width := range []int{minWidth, 52, 64, defaultWidth, 120} {
		var b strings.Builder
		writeGlobalUsage(&b, width)
		writeShellUsage(&b, width)
		for _, v := range verbs {
			writeVerbUsage(&b, v, width)
		}
		if wide := wideLines(b.String(), width); len(wide) > 0 {
			t.Errorf("width %d: %d lines are wider, such as:\n%s", width, len(wide), strings.Join(wide[:min(len(wide), 5)], "\n"))
		}
		// Nothing is lost: every word of every summary is there.
		for _, v := range verbs {
			for _, word := range strings.Fields(v.summary) {
				if !strings.Contains(b.String(), word) {
					t.Errorf("width %d: %s's summary lost %q", width, v.name, word)
				}
			}
		}
	}
}

// TestHelpThroughCLI: coordctl help, and help in the shell, are at most
// 80 columns when stdout is no terminal; the shell's lists only what
// works in the shell.
func TestHelpThroughCLI(t *testing.T) {
	global := ok(t, "help")
	shell := ctlIn(t, "help\n", "shell")
	if shell.code != 0 {
		t.Fatalf("help in the shell: exit %d, stderr %q", shell.code, shell.stderr)
	}
	for name, out := range map[string]string{"help": global, "shell help": shell.stdout, "help lock": ok(t, "help", "lock"), "bench -h": ok(t, "bench", "-h")} {
		if wide := wideLines(out, defaultWidth); len(wide) > 0 {
			t.Errorf("%s: lines wider than %d:\n%s", name, defaultWidth, strings.Join(wide, "\n"))
		}
	}
	for _, want := range []string{"\n  deleteall  delete a node and all its descendants\n", "\n  shell ", "Global flags", "--servers"} {
		if !strings.Contains(global, want) {
			t.Errorf("coordctl help lacks %q:\n%s", want, global)
		}
	}
	for _, want := range []string{"\n  deleteall +delete a node and all its descendants\n", "\n  quit, exit ", "help VERB"} {
		if !regexp.MustCompile(want).MatchString(shell.stdout) {
			t.Errorf("the shell's help lacks %q:\n%s", want, shell.stdout)
		}
	}
	for _, unwanted := range []string{"\n  shell ", "Global flags", "--servers", "coordctl [global flags]"} {
		if strings.Contains(shell.stdout, unwanted) {
			t.Errorf("the shell's help shows %q, which does not work in the shell:\n%s", unwanted, shell.stdout)
		}
	}
}

// TestHelpAfterArguments: -h after a verb's first arguments (where those
// verbs take their flags too) shows the verb's usage, not an error.
func TestHelpAfterArguments(t *testing.T) {
	for _, args := range [][]string{{"member", "list", "-h"}, {"certs", "init", "-h"}, {"lock", "/x", "-h"}, {"bench", "write", "--help"}} {
		r := ctl(t, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: "+args[0]+" ") || r.stderr != "" {
			t.Errorf("coordctl %q: exit %d, stdout %.40q, stderr %q; want the verb's usage", args, r.code, r.stdout, r.stderr)
		}
	}
}
