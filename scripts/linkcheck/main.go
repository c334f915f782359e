// Command linkcheck fails when a Markdown file of the repository links to a
// file that does not exist or to a heading that is not there: every
// relative link and image of every *.md file (README.md, DESIGN.md, docs/,
// the FORK.md notes...) is resolved against the repository, and a #fragment
// must name a heading of its target by GitHub's anchor rules. Links with a
// scheme (https:, mailto:) are not fetched: it needs no network. make lint
// runs it; its tests run it on the repository too.
package main

import (
	"fmt"
	"os"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	problems, err := Check(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "linkcheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("linkcheck: %d broken links\n", len(problems))
		os.Exit(1)
	}
}
