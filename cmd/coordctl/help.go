package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/chzyer/readline"
)

// Help: coordctl's usage, a verb's, and the shell's, each wrapped to the
// width of the terminal they are shown on (defaultWidth when that is not a
// terminal, or unknown).

const (
	// defaultWidth is the help's width when stdout is no terminal.
	defaultWidth = 80
	// minWidth is the narrowest help is wrapped to, however narrow the
	// terminal.
	minWidth = 40
	// minTextColumn is the narrowest a table's text column may be beside
	// its keys; below it, texts go under their keys.
	minTextColumn = 24
)

// terminalOf returns the terminal w writes to, or nil.
func terminalOf(w io.Writer) *os.File {
	if f, ok := w.(*os.File); ok && readline.IsTerminal(int(f.Fd())) {
		return f
	}
	return nil
}

// helpWidth is the width to wrap help written to w to: the terminal's, when
// w (through a syncWriter) is one, else defaultWidth.
func helpWidth(w io.Writer) int {
	var term *os.File
	if sw, ok := w.(*syncWriter); ok {
		term = sw.term
	} else {
		term = terminalOf(w)
	}
	if term == nil {
		return defaultWidth
	}
	width, _, err := readline.GetSize(int(term.Fd()))
	if err != nil || width <= 0 {
		return defaultWidth
	}
	return max(width, minWidth)
}

func printGlobalUsage(w io.Writer) { writeGlobalUsage(w, helpWidth(w)) }

func printShellUsage(w io.Writer) { writeShellUsage(w, helpWidth(w)) }

func printVerbUsage(w io.Writer, v *verb) { writeVerbUsage(w, v, helpWidth(w)) }

// writeGlobalUsage writes coordctl's usage, width columns wide.
func writeGlobalUsage(w io.Writer, width int) {
	var b strings.Builder
	b.WriteString(wrap("usage: coordctl [global flags] VERB [flags] [ARGS]", width, "", "         "))
	b.WriteString(wrap("coordctl [global flags] [shell]", width, "       ", "         "))
	b.WriteString("\n")
	b.WriteString(wrap("coordctl is the command-line client of coordd. Each call runs one verb on a session of its own; with no verb it opens an interactive shell on one session, in which every verb but shell works.", width, "", ""))
	b.WriteString("\nVerbs:\n")
	var rows [][2]string
	for _, v := range verbs {
		rows = append(rows, [2]string{v.name, v.summary})
	}
	b.WriteString(table(rows, width, 12))
	b.WriteString("\nGlobal flags (before the verb):\n")
	b.WriteString(table(globalFlags, width, 26))
	b.WriteString("\n")
	b.WriteString(wrap("Exit status: 0 on success, 1 when an operation failed, 2 on a usage error; status exits 3 when a member is unreachable or there is no leader; lock and elect exit with CMD's status (see 'coordctl help lock').", width, "", ""))
	b.WriteString(wrap("Run 'coordctl help VERB' for a verb's synopsis and flags.", width, "", ""))
	io.WriteString(w, b.String())
}

// globalFlags are the rows of the global flags' table.
var globalFlags = [][2]string{
	{"--servers host[:port],...", "servers to try (default $COORD_SERVERS, else " + defaultServers + "); the port is " + defaultPort + " when omitted ([IPv6] or [IPv6]:port)"},
	{"-o json|text", `output format (default text; verbs accept -o too); with json, errors too: {"error":{"code":"NoNode","message":"..."}}`},
	{"--timeout DURATION", "deadline of each command, connecting included (default 10s); when no server accepts a connection, a command fails at once"},
	{"--session-timeout DURATION", "session timeout to ask for (default 10s)"},
	{"--auth SCHEME:CREDENTIALS", "authenticate the session first, as addauth does (default $COORD_AUTH, comma-separated; e.g. digest:alice:secret); repeatable"},
	{"--cacert FILE", "speak TLS; verify the servers' certificates with the CA certificates in FILE (PEM; default $COORD_CACERT)"},
	{"--cert FILE, --key FILE", "present this client certificate and its key (PEM), for servers that require one (coordd --client-cert-auth); default $COORD_CERT, $COORD_KEY (without --cacert, the servers are verified with the system's CAs)"},
}

// writeShellUsage writes the shell's help: what works in the shell, width
// columns wide.
func writeShellUsage(w io.Writer, width int) {
	var b strings.Builder
	b.WriteString(wrap(`Every command runs on the shell's one session. Arguments may be quoted with "..." or '...'. Tab completes verbs, flags and paths; Ctrl-C interrupts the running command.`, width, "", ""))
	b.WriteString("\nCommands:\n")
	var rows [][2]string
	for _, v := range verbs {
		if v != shellVerb {
			rows = append(rows, [2]string{v.name, v.summary})
		}
	}
	rows = append(rows, [2]string{"quit, exit", "leave the shell, closing the session (deleting its ephemeral nodes)"})
	b.WriteString(table(rows, width, 12))
	b.WriteString("\n")
	b.WriteString(wrap("Run 'help VERB' for a verb's synopsis and flags.", width, "", ""))
	io.WriteString(w, b.String())
}

// writeVerbUsage writes v's usage: synopsis, summary, details and flags,
// width columns wide.
func writeVerbUsage(w io.Writer, v *verb, width int) {
	var b strings.Builder
	b.WriteString(wrap("usage: "+v.synopsis, width, "", "       "))
	b.WriteString("\n")
	b.WriteString(wrap(v.summary, width, "", ""))
	if v.detail != "" {
		b.WriteString("\n")
		b.WriteString(reflow(strings.TrimSpace(v.detail), width))
	}
	format := "text"
	fs, _ := newVerbFlags(v, &format)
	b.WriteString("\nFlags:\n")
	b.WriteString(table(flagRows(fs, v), width, 22))
	io.WriteString(w, b.String())
}

// flagRows are the rows of a verb's flags' table: each flag spelt as the
// synopsis spells it (-sync, --wait), with its value's name, its usage and
// its default.
func flagRows(fs *flag.FlagSet, v *verb) [][2]string {
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	var rows [][2]string
	for _, f := range flags {
		name, usage := flag.UnquoteUsage(f)
		key := flagSpelling(v, f.Name)
		if name != "" {
			key += " " + name
		}
		if def := defaultText(f); def != "" {
			usage = strings.TrimSpace(usage + " (default " + def + ")")
		}
		rows = append(rows, [2]string{key, usage})
	}
	return rows
}

// flagSpelling is how help writes a verb's flag: as its synopsis does, else
// with one dash for a letter and two for a word.
func flagSpelling(v *verb, name string) string {
	for _, f := range strings.FieldsFunc(v.synopsis, func(r rune) bool { return strings.ContainsRune(" []|", r) }) {
		if strings.TrimLeft(f, "-") == name && strings.HasPrefix(f, "-") {
			return f
		}
	}
	if utf8.RuneCountInString(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// defaultText is a flag's default as help shows it, "" for a zero value.
func defaultText(f *flag.Flag) string {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return ""
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if _, isString := g.Get().(string); isString {
			return fmt.Sprintf("%q", f.DefValue)
		}
	}
	return f.DefValue
}

// table writes rows of (key, text) as two columns: the keys indented by
// two spaces, the texts wrapped in a column that starts after the widest
// key no wider than keyMax (a wider key stands on a line of its own).
func table(rows [][2]string, width, keyMax int) string {
	keyWidth := 0
	for _, r := range rows {
		if n := utf8.RuneCountInString(r[0]); n <= keyMax {
			keyWidth = max(keyWidth, n)
		}
	}
	indent := strings.Repeat(" ", 2+keyWidth+2)
	if width-len(indent) < minTextColumn {
		// Too narrow for two columns: every text goes under its key.
		keyWidth, indent = 0, "      "
	}
	var b strings.Builder
	for _, r := range rows {
		key := "  " + r[0]
		if r[1] == "" {
			b.WriteString(key + "\n")
			continue
		}
		if utf8.RuneCountInString(r[0]) > keyWidth {
			b.WriteString(key + "\n")
			b.WriteString(wrap(r[1], width, indent, indent))
			continue
		}
		first := key + strings.Repeat(" ", len(indent)-utf8.RuneCountInString(key))
		b.WriteString(wrap(r[1], width, first, indent))
	}
	return b.String()
}

// reflow wraps a verb's details to width. A paragraph of plain lines is
// filled anew; a paragraph with indented lines (a table, an example) keeps
// its lines, each wrapped on its own when too long, its continuation lines
// under the line's second column.
func reflow(text string, width int) string {
	var b strings.Builder
	for i, para := range strings.Split(text, "\n\n") {
		if i > 0 {
			b.WriteString("\n")
		}
		lines := strings.Split(para, "\n")
		indented := false
		for _, l := range lines {
			indented = indented || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		}
		if !indented {
			b.WriteString(wrap(strings.Join(lines, " "), width, "", ""))
			continue
		}
		for _, l := range lines {
			b.WriteString(wrapLine(l, width))
		}
	}
	return b.String()
}

// wrapLine writes one line of an indented paragraph: as it is when it
// fits, else wrapped with its continuation lines under its second column
// (the text after the first run of two spaces: "  128+N   CMD was ..."),
// or under its own start plus two when it has no second column.
func wrapLine(l string, width int) string {
	if utf8.RuneCountInString(l) <= width {
		return l + "\n"
	}
	lead := len(l) - len(strings.TrimLeft(l, " "))
	if j := strings.Index(l[lead:], "  "); j >= 0 {
		rest := l[lead+j:]
		col := lead + j + len(rest) - len(strings.TrimLeft(rest, " "))
		if col <= width/2 {
			return wrap(l[col:], width, l[:col], strings.Repeat(" ", col))
		}
	}
	return wrap(l[lead:], width, l[:lead], strings.Repeat(" ", lead+2))
}

// wrap fills text into lines of at most width runes, the first starting
// with first and the others with rest (their indentation), each ending in
// a newline. Only a word longer than a whole line is broken.
func wrap(text string, width int, first, rest string) string {
	var b strings.Builder
	line, lineLen := first, utf8.RuneCountInString(first)
	empty := true // no word on the line yet
	room := max(width-utf8.RuneCountInString(rest), 1)
	var words []string
	for _, word := range strings.Fields(text) {
		for r := []rune(word); len(r) > 0; {
			n := min(len(r), room)
			words = append(words, string(r[:n]))
			r = r[n:]
		}
	}
	for _, word := range words {
		n := utf8.RuneCountInString(word)
		if !empty && lineLen+1+n > width {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line, lineLen, empty = rest, utf8.RuneCountInString(rest), true
		}
		if !empty {
			line += " "
			lineLen++
		}
		line += word
		lineLen += n
		empty = false
	}
	b.WriteString(strings.TrimRight(line, " ") + "\n")
	return b.String()
}
