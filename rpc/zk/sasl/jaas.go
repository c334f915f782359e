package sasl

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file reads JAAS login configuration files, the format of Java's
// java.security.auth.login.config (sun.security.provider.ConfigFile),
// which ZooKeeper's server reads its SASL users from:
//
//	Server {
//	    org.apache.zookeeper.server.auth.DigestLoginModule required
//	    user_super="adminsecret"
//	    user_bob="bobsecret";
//	};
//
// A file is a list of sections (login contexts), each a name and, between
// braces, login modules: a class name, a control flag (required, requisite,
// sufficient, optional) and options KEY=VALUE, ended by a semicolon; a
// section ends with "};". Values are words or strings quoted with " or '
// (with Java's backslash escapes); // and /* */ are comments.

// ErrJAAS is the error a malformed JAAS file gives; its message says where.
var ErrJAAS = errors.New("sasl: malformed JAAS file")

// maxJAASSize bounds the file read: a list of users is a few kilobytes.
const maxJAASSize = 1 << 20

// Section is one login context of a JAAS file.
type Section struct {
	Name    string
	Modules []Module
}

// Module is one login module of a section.
type Module struct {
	Class string
	// Flag is the control flag, lower case.
	Flag string
	// Options are the module's options; a key given twice keeps its last
	// value, as Java does.
	Options map[string]string
}

// ParseJAAS reads a JAAS login configuration. Section names are unique, as
// Java requires. A value containing ${ is refused: Java would expand it
// from its system properties, which coordd does not have.
func ParseJAAS(data []byte) ([]Section, error) {
	if len(data) > maxJAASSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrJAAS, maxJAASSize)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: not UTF-8 text", ErrJAAS)
	}
	p := &jaasParser{lx: jaasLexer{src: string(data), line: 1}}
	var out []Section
	seen := make(map[string]bool)
	for {
		t, err := p.next()
		if err != nil {
			return nil, err
		}
		if t.kind == tokEOF {
			return out, nil
		}
		if !t.isName() {
			return nil, p.errAt(t, "a section name, not %s", t)
		}
		if seen[t.text] {
			return nil, p.errAt(t, "section %q is given twice", t.text)
		}
		seen[t.text] = true
		s, err := p.section(t.text)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
}

// section reads a section after its name: { module... } ;
func (p *jaasParser) section(name string) (Section, error) {
	s := Section{Name: name}
	if err := p.expect('{', "after section "+name); err != nil {
		return s, err
	}
	for {
		t, err := p.next()
		if err != nil {
			return s, err
		}
		if t.kind == '}' {
			return s, p.expect(';', "after the } of section "+name)
		}
		if t.kind != tokWord {
			return s, p.errAt(t, "a login module's class name in section %s, not %s", name, t)
		}
		m, err := p.module(t.text)
		if err != nil {
			return s, err
		}
		s.Modules = append(s.Modules, m)
	}
}

// module reads a login module after its class: FLAG KEY=VALUE... ;
func (p *jaasParser) module(class string) (Module, error) {
	m := Module{Class: class, Options: make(map[string]string)}
	t, err := p.next()
	if err != nil {
		return m, err
	}
	switch flag := strings.ToLower(t.text); {
	case t.kind == tokWord && (flag == "required" || flag == "requisite" || flag == "sufficient" || flag == "optional"):
		m.Flag = flag
	default:
		return m, p.errAt(t, "the control flag of %s (required, requisite, sufficient or optional), not %s", class, t)
	}
	for {
		t, err := p.next()
		if err != nil {
			return m, err
		}
		if t.kind == ';' {
			return m, nil
		}
		if t.kind != tokWord {
			return m, p.errAt(t, "an option of %s (KEY=VALUE) or the ; that ends it, not %s", class, t)
		}
		key := t.text
		if err := p.expect('=', "after option "+key); err != nil {
			return m, err
		}
		v, err := p.next()
		if err != nil {
			return m, err
		}
		if !v.isName() {
			return m, p.errAt(v, "the value of option %s, not %s", key, v)
		}
		if strings.Contains(v.text, "${") {
			return m, p.errAt(v, "the value of option %s holds ${...}, which Java expands from its system properties and coordd does not: write the value itself", key)
		}
		m.Options[key] = v.text
	}
}

type jaasParser struct {
	lx jaasLexer
}

func (p *jaasParser) next() (token, error) { return p.lx.next() }

func (p *jaasParser) expect(kind rune, where string) error {
	t, err := p.next()
	if err != nil {
		return err
	}
	if t.kind != kind {
		return p.errAt(t, "%q %s, not %s", kind, where, t)
	}
	return nil
}

func (p *jaasParser) errAt(t token, format string, args ...any) error {
	return fmt.Errorf("%w: line %d: expected %s", ErrJAAS, t.line, fmt.Sprintf(format, args...))
}

// Token kinds: the punctuation is its own rune.
const (
	tokEOF    rune = -1
	tokWord   rune = -2
	tokString rune = -3
)

type token struct {
	kind rune
	text string
	line int
}

// isName reports whether the token can be a name or a value: a word or a
// quoted string.
func (t token) isName() bool { return t.kind == tokWord || t.kind == tokString }

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "the end of the file"
	case tokWord:
		return fmt.Sprintf("%q", short(t.text))
	case tokString:
		return "a quoted string"
	}
	return fmt.Sprintf("%q", t.kind)
}

// short cuts what an error quotes of the file.
func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// jaasLexer splits a JAAS file into words, quoted strings and the
// punctuation { } ; =.
type jaasLexer struct {
	src  string
	pos  int
	line int
}

func isPunct(c byte) bool { return c == '{' || c == '}' || c == ';' || c == '=' }

func (l *jaasLexer) next() (token, error) {
	if err := l.skipSpace(); err != nil {
		return token{}, err
	}
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, line: l.line}, nil
	}
	c := l.src[l.pos]
	switch {
	case isPunct(c):
		l.pos++
		return token{kind: rune(c), line: l.line}, nil
	case c == '"' || c == '\'':
		return l.quoted(c)
	}
	start := l.pos
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if c <= ' ' || isPunct(c) || c == '"' || c == '\'' || strings.HasPrefix(l.src[l.pos:], "//") || strings.HasPrefix(l.src[l.pos:], "/*") {
			break
		}
		l.pos++
	}
	return token{kind: tokWord, text: l.src[start:l.pos], line: l.line}, nil
}

// skipSpace skips white space and comments, counting lines.
func (l *jaasLexer) skipSpace() error {
	for l.pos < len(l.src) {
		rest := l.src[l.pos:]
		switch {
		case rest[0] == '\n':
			l.line++
			l.pos++
		case rest[0] <= ' ':
			l.pos++
		case strings.HasPrefix(rest, "//"):
			end := strings.IndexByte(rest, '\n')
			if end < 0 {
				end = len(rest)
			}
			l.pos += end
		case strings.HasPrefix(rest, "/*"):
			end := strings.Index(rest[2:], "*/")
			if end < 0 {
				return fmt.Errorf("%w: line %d: a /* comment is not closed", ErrJAAS, l.line)
			}
			l.line += strings.Count(rest[:end+4], "\n")
			l.pos += end + 4
		default:
			return nil
		}
	}
	return nil
}

// quoted reads a string quoted with q, with the escapes of Java's
// StreamTokenizer: \a \b \f \n \r \t \v, up to three octal digits, and a
// backslash before any other character stands for that character. A
// string ends at its line's end, where Java's does; without its closing
// quote it is an error.
func (l *jaasLexer) quoted(q byte) (token, error) {
	line := l.line
	l.pos++ // the opening quote
	var b strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == q:
			l.pos++
			return token{kind: tokString, text: b.String(), line: line}, nil
		case c == '\n' || c == '\r':
			return token{}, fmt.Errorf("%w: line %d: a quoted string is not closed on its line", ErrJAAS, line)
		case c != '\\':
			b.WriteByte(c)
			l.pos++
			continue
		}
		l.pos++ // the backslash
		if l.pos >= len(l.src) {
			break
		}
		c = l.src[l.pos]
		l.pos++
		switch c {
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			// Java's rule: up to three digits when the first is 0-3,
			// otherwise up to two.
			v, most := int(c-'0'), 2
			if c > '3' {
				most = 1
			}
			for ; most > 0 && l.pos < len(l.src) && l.src[l.pos] >= '0' && l.src[l.pos] <= '7'; most-- {
				v = v*8 + int(l.src[l.pos]-'0')
				l.pos++
			}
			b.WriteRune(rune(v))
		case '\n', '\r':
			return token{}, fmt.Errorf("%w: line %d: a quoted string is not closed on its line", ErrJAAS, line)
		default:
			// A character after a backslash stands for itself; copy it
			// whole when it is not ASCII.
			l.pos--
			r, size := utf8.DecodeRuneInString(l.src[l.pos:])
			b.WriteRune(r)
			l.pos += size
		}
	}
	return token{}, fmt.Errorf("%w: line %d: a quoted string is not closed", ErrJAAS, line)
}
