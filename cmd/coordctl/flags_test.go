package main

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"testing"
	"time"
)

// TestParseFlags checks that a flag error names the flag as it was typed
// and says what its value should be, and that parsing otherwise matches
// the flag package's.
func TestParseFlags(t *testing.T) {
	cases := []struct {
		args []string
		err  string // "" for success
		rest []string
	}{
		{args: []string{"--bogus", "get"}, err: "unknown flag --bogus"},
		{args: []string{"-bogus=1"}, err: "unknown flag -bogus"},
		{args: []string{"--timeout"}, err: "flag --timeout needs a value"},
		{args: []string{"--timeout", "soon"}, err: `invalid value "soon" for --timeout: want a duration such as 500ms, 10s or 2m`},
		{args: []string{"-n=x"}, err: `invalid value "x" for -n: want an integer`},
		{args: []string{"--w=maybe"}, err: `invalid value "maybe" for --w: want true or false`},
		{args: []string{"--auth", "alice-secret"}, err: "--auth: want SCHEME:CREDENTIALS, such as digest:user:password"},
		{args: []string{"---x"}, err: "bad flag syntax: ---x"},
		{args: []string{"-w", "--timeout=1s", "-n", "-3", "/a", "-w"}, rest: []string{"/a", "-w"}},
		{args: []string{"-w", "--", "-n", "1"}, rest: []string{"-n", "1"}},
		{args: []string{"-", "x"}, rest: []string{"-", "x"}},
		{args: nil, rest: []string{}},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Bool("w", false, "")
		fs.Duration("timeout", time.Second, "")
		fs.Int("n", 0, "")
		var auth authList
		fs.Var(&auth, "auth", "")
		err := parseFlags(fs, tc.args)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("parseFlags(%q) = %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseFlags(%q) = %v", tc.args, err)
			continue
		}
		if rest := fs.Args(); !reflect.DeepEqual(rest, tc.rest) {
			t.Errorf("parseFlags(%q) left %q, want %q", tc.args, rest, tc.rest)
		}
	}
	for _, h := range []string{"-h", "--help"} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		if err := parseFlags(fs, []string{h}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("parseFlags(%s) = %v, want flag.ErrHelp", h, err)
		}
	}
}
