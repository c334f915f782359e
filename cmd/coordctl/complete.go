package main

import (
	"context"
	"flag"
	"io"
	"slices"
	"strings"
	"time"
)

// Tab completion in the shell: the verb, its sub-command, its flags (and
// -o's formats), and the paths of nodes, listed from the server through
// the shell's session, as zkCli completes them.

// completeTimeout bounds the listing a completion waits for: the prompt
// waits with it.
const completeTimeout = 2 * time.Second

// nodePathVerbs are the verbs whose arguments starting with "/" are
// znode paths of the cluster; the first six take one first of all (an
// empty word completes to "/").
var (
	nodePathVerbs = []string{"create", "get", "set", "delete", "deleteall", "ls", "stat", "sync", "getacl", "setacl", "watch", "lock", "elect", "locks"}
	pathFirst     = []string{"create", "get", "set", "delete", "deleteall", "ls", "stat", "sync", "getacl", "setacl", "watch"}
)

// subCommands are the words a verb takes first.
var subCommands = map[string][]string{
	"member":   {"list", "add", "remove", "promote"},
	"leader":   {"transfer"},
	"certs":    {"init", "issue"},
	"snapshot": {"save", "status"},
}

// completer completes a shell line (readline.AutoCompleter). children lists
// a node's children; the shell's lists them through its session.
type completer struct {
	children func(ctx context.Context, path string) ([]string, error)
}

// shellCompleter completes with the children the shell's session lists.
func (c *cli) shellCompleter() *completer {
	return &completer{children: func(ctx context.Context, path string) ([]string, error) {
		children, _, err := c.sess.cl.Children(ctx, path)
		return children, err
	}}
}

// Do returns the candidates for the word before pos in line: what each
// would add to it, and how many runes of it they share (the word itself, or
// for a path the part after its last "/").
func (cp *completer) Do(line []rune, pos int) ([][]rune, int) {
	prior, word, ok := currentWord(string(line[:pos]))
	if !ok {
		return nil, 0 // inside quotes: nothing sensible to add
	}
	var cands []string
	shared := word
	switch {
	case len(prior) == 0:
		cands = withSpace(verbNames(true))
	case prior[0] == "help" && len(prior) == 1:
		cands = withSpace(verbNames(false))
	case lookupVerb(prior[0]) == nil:
		return nil, 0
	case prior[len(prior)-1] == "-o" || prior[len(prior)-1] == "--o":
		cands = withSpace([]string{"json", "text"})
	case strings.HasPrefix(word, "-"):
		cands = withSpace(verbFlags(lookupVerb(prior[0])))
	case strings.HasPrefix(word, "/") && slices.Contains(nodePathVerbs, prior[0]):
		return cp.paths(word)
	default:
		v := lookupVerb(prior[0])
		n, afterFlag := positionals(v, prior[1:])
		switch {
		case afterFlag:
			return nil, 0
		case n == 0 && subCommands[v.name] != nil:
			cands = withSpace(subCommands[v.name])
		case n == 0 && word == "" && slices.Contains(pathFirst, v.name):
			cands = []string{"/"}
		}
	}
	return suffixes(cands, shared), runeLen(shared)
}

// paths completes word, a node path: the children of its parent whose
// names start with what follows its last "/".
func (cp *completer) paths(word string) ([][]rune, int) {
	i := strings.LastIndexByte(word, '/')
	parent, base := unescape(word[:i]), word[i+1:]
	if parent == "" {
		parent = "/"
	}
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	children, err := cp.children(ctx, parent)
	if err != nil {
		return nil, 0 // no such node, or the server is away: nothing to offer
	}
	slices.Sort(children)
	var cands []string
	for _, c := range children {
		cands = append(cands, escape(c))
	}
	return suffixes(cands, base), runeLen(base)
}

// suffixes returns what each candidate that starts with typed adds to it.
func suffixes(cands []string, typed string) [][]rune {
	var out [][]rune
	for _, c := range cands {
		if strings.HasPrefix(c, typed) {
			out = append(out, []rune(c[len(typed):]))
		}
	}
	return out
}

// verbNames are the verbs' names, in help's order; with shell, the words
// that end the shell too, and without the verb shell.
func verbNames(shell bool) []string {
	var names []string
	for _, v := range verbs {
		if v != shellVerb {
			names = append(names, v.name)
		}
	}
	if shell {
		names = append(names, "quit", "exit")
	}
	return names
}

// verbFlags are v's flags, spelt as its help spells them, sorted.
func verbFlags(v *verb) []string {
	format := "text"
	fs, _ := newVerbFlags(v, &format)
	var out []string
	fs.VisitAll(func(f *flag.Flag) { out = append(out, flagSpelling(v, f.Name)) })
	slices.Sort(out)
	return out
}

// positionals counts the positional arguments among args (a verb's words
// before the one completed), skipping flags and their values;
// afterFlag says that the word completed is a flag's value.
func positionals(v *verb, args []string) (n int, afterFlag bool) {
	format := "text"
	fs, _ := newVerbFlags(v, &format)
	fs.SetOutput(io.Discard)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return n + len(args) - i - 1, false
		}
		if len(a) < 2 || a[0] != '-' {
			n++
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if f := fs.Lookup(name); f != nil && !hasValue && !isBoolFlag(f) {
			if i == len(args)-1 {
				return n, true
			}
			i++
		}
	}
	return n, false
}

func withSpace(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = w + " "
	}
	return out
}

func runeLen(s string) int { return len([]rune(s)) }

// currentWord splits the text before the cursor into the words before the
// one being typed (as splitLine reads them) and that word as typed; ok is
// false inside an open quote.
func currentWord(text string) (prior []string, word string, ok bool) {
	start := 0
	inSingle, inDouble := false, false
	for i := 0; i < len(text); i++ {
		switch ch := text[i]; {
		case inSingle:
			inSingle = ch != '\''
		case inDouble:
			if ch == '\\' {
				i++
			} else {
				inDouble = ch != '"'
			}
		case ch == '\\':
			i++
		case ch == '\'':
			inSingle = true
		case ch == '"':
			inDouble = true
		case ch == ' ' || ch == '\t':
			start = i + 1
		}
	}
	if inSingle || inDouble {
		return nil, "", false
	}
	word = text[min(start, len(text)):]
	if strings.ContainsAny(word, `'"`) {
		return nil, "", false
	}
	prior, err := splitLine(text[:start])
	if err != nil {
		return nil, "", false
	}
	return prior, word, true
}

// escape writes a node name as the shell reads it back: blanks, quotes
// and backslashes behind a backslash.
func escape(name string) string {
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(" \t'\"\\", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// unescape undoes escape (and any other backslash escape).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
