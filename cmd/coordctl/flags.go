package main

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// parseFlags parses args into fs as fs.Parse does (flags stop at the first
// non-flag argument, "-" or "--"; -h and -help give flag.ErrHelp when not
// defined), and leaves the rest in fs.Args(). Its errors name a flag as the
// user typed it ("--bogus", not flag's "-bogus") and say what a value should
// be, without Go's package prefixes ("time: invalid duration").
func parseFlags(fs *flag.FlagSet, args []string) error {
	for len(args) > 0 {
		arg := args[0]
		if len(arg) < 2 || arg[0] != '-' {
			break
		}
		if arg == "--" {
			break // left for fs.Parse, which drops it
		}
		args = args[1:]
		dashes := "-"
		if arg[1] == '-' {
			dashes = "--"
		}
		name, value, hasValue := strings.Cut(arg[len(dashes):], "=")
		if name == "" || name[0] == '-' || name[0] == '=' {
			return fmt.Errorf("bad flag syntax: %s", arg)
		}
		typed := dashes + name
		f := fs.Lookup(name)
		if f == nil {
			if name == "h" || name == "help" {
				return flag.ErrHelp
			}
			return fmt.Errorf("unknown flag %s", typed)
		}
		if !hasValue && !isBoolFlag(f) {
			if len(args) == 0 {
				return fmt.Errorf("flag %s needs a value", typed)
			}
			value, args = args[0], args[1:]
		} else if !hasValue {
			value = "true"
		}
		if err := fs.Set(name, value); err != nil {
			return valueError(f, typed, value, err)
		}
	}
	// fs.Parse records the remaining arguments (after a "--", which it
	// drops); every flag before them is set already.
	return fs.Parse(append([]string{"--"}, trimTerminator(args)...))
}

// trimTerminator drops a leading "--", which ends the flags.
func trimTerminator(args []string) []string {
	if len(args) > 0 && args[0] == "--" {
		return args[1:]
	}
	return args
}

// isBoolFlag reports whether f takes no value (-w, -force).
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// valueError says why value does not suit f. The built-in kinds say what
// they want; a value of coordctl's own (--auth) gives its own reason, and
// its value is not repeated (it may hold a password).
func valueError(f *flag.Flag, typed, value string, err error) error {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return fmt.Errorf("%s: %v", typed, err)
	}
	return fmt.Errorf("invalid value %q for %s: want %s", value, typed, valueKind(g))
}

// valueKind says what a built-in flag's value should be.
func valueKind(g flag.Getter) string {
	switch g.Get().(type) {
	case bool:
		return "true or false"
	case time.Duration:
		return "a duration such as 500ms, 10s or 2m"
	case int, int64, uint, uint64:
		return "an integer"
	case float64:
		return "a number"
	}
	return "a value"
}
