// Command funclen measures a Go package directory's size: its non-test lines, the files over a
// line limit and the functions over a length limit (a function's lines from its func keyword to
// its closing brace, doc comment excluded). It prints the figures and exits 0; it is a ruler,
// not a gate. Run from the repository root:
//
//	go run ./integration/depcheck/funclen [-file 500] [-func 80] [-top 10] core
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type fn struct {
	name  string
	lines int
}

func main() {
	fileLimit := flag.Int("file", 500, "report files with more lines than this")
	funcLimit := flag.Int("func", 80, "report functions with more lines than this")
	top := flag.Int("top", 10, "also list this many longest functions")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	for _, dir := range dirs {
		if err := measure(dir, *fileLimit, *funcLimit, *top); err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(1)
		}
	}
}

func measure(dir string, fileLimit, funcLimit, top int) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	total, code := 0, 0
	var bigFiles []string
	var fns []fn
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		lines := fset.File(f.Pos()).LineCount()
		total += lines
		code += codeLines(p)
		if lines > fileLimit {
			bigFiles = append(bigFiles, fmt.Sprintf("%s (%d)", filepath.Base(p), lines))
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				name = recvName(fd.Recv.List[0].Type) + "." + name
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Type.Func).Line + 1
			fns = append(fns, fn{filepath.Base(p) + ":" + name, n})
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
	over := 0
	for _, f := range fns {
		if f.lines > funcLimit {
			over++
		}
	}
	fmt.Printf("%s: %d non-test lines (%d neither blank nor comment); files over %d lines: %d %v; functions over %d lines: %d\n",
		dir, total, code, fileLimit, len(bigFiles), bigFiles, funcLimit, over)
	for i := 0; i < top && i < len(fns); i++ {
		fmt.Printf("  %4d  %s\n", fns[i].lines, fns[i].name)
	}
	return nil
}

// codeLines counts a file's lines that are neither blank nor only a // comment (a rough count:
// a /* */ block counts as code).
func codeLines(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "//") {
			n++
		}
	}
	return n
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
