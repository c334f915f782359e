package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// This file finds the Markdown files, parses each once with goldmark
// (CommonMark and GitHub's tables, so that a link in a code block or a
// code span is not a link), and checks every relative link against the
// files and headings found.

// doc is one parsed Markdown file: its links and its headings' anchors.
type doc struct {
	links   []link
	anchors Anchors
}

// link is one link or image destination and the line it is on.
type link struct {
	dest string
	line int
}

// scheme matches a destination with a URL scheme (https:, mailto:...),
// which is not checked.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// Check parses every *.md file under root (but in hidden directories,
// testdata, bin and dist) and returns one line per broken link, sorted:
// FILE:LINE: DESTINATION: why.
func Check(root string) ([]string, error) {
	docs := map[string]*doc{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".md") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		docs[filepath.ToSlash(rel)] = parse(src)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var problems []string
	for name, d := range docs {
		for _, l := range d.links {
			if why := resolve(root, docs, name, l.dest); why != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", name, l.line, l.dest, why))
			}
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// parse collects a document's links and its headings' anchors.
func parse(src []byte) *doc {
	md := goldmark.New(goldmark.WithExtensions(extension.Table))
	root := md.Parser().Parse(text.NewReader(src))
	d := &doc{}
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			d.anchors.Add(plain(n, src))
		case *ast.Link:
			d.links = append(d.links, link{string(n.Destination), lineOf(src, n.Pos())})
		case *ast.Image:
			d.links = append(d.links, link{string(n.Destination), lineOf(src, n.Pos())})
		}
		return ast.WalkContinue, nil
	})
	return d
}

// plain is a heading's text as a reader sees it: code spans' and links'
// text kept, markup and raw HTML dropped.
func plain(n ast.Node, src []byte) string {
	var b bytes.Buffer
	var walk func(ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c := c.(type) {
			case *ast.Text:
				b.Write(c.Value(src))
				if c.SoftLineBreak() || c.HardLineBreak() {
					b.WriteByte(' ')
				}
			case *ast.String:
				b.Write(c.Value)
			case *ast.RawHTML:
			default:
				walk(c)
			}
		}
	}
	walk(n)
	return b.String()
}

// lineOf is the 1-based line of byte offset pos (0 when unknown).
func lineOf(src []byte, pos int) int {
	if pos < 0 || pos > len(src) {
		return 0
	}
	return bytes.Count(src[:pos], []byte("\n")) + 1
}

// resolve checks one destination of the document from (a path relative to
// root, with slashes) and says why it is broken, or "" when it is not.
func resolve(root string, docs map[string]*doc, from, dest string) string {
	if dest == "" {
		return "empty link"
	}
	if scheme.MatchString(dest) || strings.HasPrefix(dest, "//") {
		return ""
	}
	target, fragment, _ := strings.Cut(dest, "#")
	target, err := url.PathUnescape(target)
	if err != nil {
		return "bad escape in the path"
	}
	fragment, err = url.PathUnescape(fragment)
	if err != nil {
		return "bad escape in the anchor"
	}
	if i := strings.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	name := from
	if target != "" {
		if strings.HasPrefix(target, "/") {
			name = path.Clean(strings.TrimPrefix(target, "/"))
		} else {
			name = path.Join(path.Dir(from), target)
		}
		if name == ".." || strings.HasPrefix(name, "../") {
			return "outside the repository"
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(name))); err != nil {
			return "no such file"
		}
	}
	if fragment == "" {
		return ""
	}
	d, ok := docs[name]
	if !ok {
		return "an anchor in a file that is not Markdown"
	}
	if !d.anchors.Has(fragment) {
		return fmt.Sprintf("no heading in %s has the anchor #%s", name, fragment)
	}
	return ""
}
