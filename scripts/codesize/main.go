// Command codesize prints the longest functions of the module and the
// lines of each package, tests, generated code (*.pb.go) and vendored
// forks (third_party) left out: the figures a refactoring is judged by
// (go run ./scripts/codesize [-n 15] [DIR]).
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// fn is one function or method and its length in lines.
type fn struct {
	name  string
	where string
	lines int
}

func main() {
	n := flag.Int("n", 15, "how many of the longest functions to print")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	fset := token.NewFileSet()
	var fns []fn
	pkgLines := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "third_party" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".pb.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		pkgLines[filepath.Dir(p)] += fset.File(f.Pos()).LineCount()
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fname := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				fname = recvName(fd.Recv.List[0].Type) + "." + fname
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			fns = append(fns, fn{name: fname, where: fmt.Sprintf("%s:%d", p, start.Line), lines: end.Line - start.Line + 1})
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "codesize:", err)
		os.Exit(1)
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
	fmt.Printf("%d longest functions:\n", min(*n, len(fns)))
	for _, f := range fns[:min(*n, len(fns))] {
		fmt.Printf("%6d  %-40s %s\n", f.lines, f.name, f.where)
	}
	type pkg struct {
		dir   string
		lines int
	}
	var pkgs []pkg
	for d, l := range pkgLines {
		pkgs = append(pkgs, pkg{d, l})
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].lines > pkgs[j].lines })
	fmt.Printf("\n%d largest packages (lines, without tests):\n", min(*n, len(pkgs)))
	for _, p := range pkgs[:min(*n, len(pkgs))] {
		fmt.Printf("%6d  %s\n", p.lines, p.dir)
	}
}

// recvName is a method receiver's type name, without pointer or type
// parameters.
func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
