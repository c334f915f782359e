package main

import (
	"strconv"
	"strings"
	"unicode"
)

// This file turns a heading's text into the anchor GitHub gives it, as
// github-slugger does: lower case; letters, digits, marks, '-' and '_'
// kept; each space a '-'; everything else (punctuation, symbols) dropped.
// A repeated anchor gets -1, -2... in the order the headings come.

// Slug is the anchor of a heading whose rendered text is text.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors gives the headings of one document their anchors, in order, with
// GitHub's suffixes for repeats.
type Anchors struct {
	seen map[string]bool
}

// Add records a heading and returns its anchor.
func (a *Anchors) Add(text string) string {
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	base := Slug(text)
	s := base
	for i := 1; a.seen[s]; i++ {
		s = base + "-" + strconv.Itoa(i)
	}
	a.seen[s] = true
	return s
}

// Has reports whether anchor names a heading added so far.
func (a *Anchors) Has(anchor string) bool {
	return a.seen[anchor]
}
