// Command funclen lists the longest functions (and methods) of the non-test Go files under the
// folders given, longest first, as "lines file:line name". Issue 19 caps a function at 80 lines;
// this is the one command that measures it. Run from the repository root:
//
//	go run ./integration/depcheck/funclen -n 10 core optimizers markers
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

type fn struct {
	name, pos string
	lines     int
}

func main() {
	n := flag.Int("n", 10, "how many functions to list (0: all)")
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = []string{"."}
	}
	var all []fn
	fset := token.NewFileSet()
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				name := fd.Name.Name
				if fd.Recv != nil && len(fd.Recv.List) > 0 {
					name = "(" + recvName(fd.Recv.List[0].Type) + ")." + name
				}
				start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
				all = append(all, fn{name: name, pos: fmt.Sprintf("%s:%d", path, start.Line), lines: end.Line - start.Line + 1})
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(1)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].lines > all[j].lines })
	if *n > 0 && len(all) > *n {
		all = all[:*n]
	}
	for _, f := range all {
		fmt.Printf("%4d %s %s\n", f.lines, f.pos, f.name)
	}
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
