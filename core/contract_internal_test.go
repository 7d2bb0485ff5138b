package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// contractSource is core's non-test source, parsed, with the file each top-level type lives in.
type contractSource struct {
	files map[string]*ast.File
	typed map[string]string // type name -> file
}

func parseCore(t *testing.T) contractSource {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	src := contractSource{files: map[string]*ast.File{}, typed: map[string]string{}}
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		src.files[p] = f
		for _, d := range f.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
				for _, s := range gd.Specs {
					src.typed[s.(*ast.TypeSpec).Name.Name] = p
				}
			}
		}
	}
	return src
}

// experimentHooks finds every interface core asserts the experiment against: a type assertion
// e.(T), or x.e.(T) for any x (n.spec.e, su.e: the runSpec's experiment), with T a named type
// of package core. That is what New and the verbs call on an experiment, whatever file declares it.
func (s contractSource) experimentHooks() map[string]string {
	hooks := map[string]string{}
	for _, f := range s.files {
		ast.Inspect(f, func(node ast.Node) bool {
			ta, ok := node.(*ast.TypeAssertExpr)
			if !ok || ta.Type == nil {
				return true
			}
			isExperiment := false
			switch x := ta.X.(type) {
			case *ast.Ident:
				isExperiment = x.Name == "e"
			case *ast.SelectorExpr:
				isExperiment = x.Sel.Name == "e"
			}
			if id, ok := ta.Type.(*ast.Ident); ok && isExperiment {
				if file, ok := s.typed[id.Name]; ok {
					hooks[id.Name] = file
				}
			}
			return true
		})
	}
	return hooks
}

// methodsOf lists an interface type's method names.
func (s contractSource) methodsOf(name string) []string {
	var out []string
	ast.Inspect(s.files[s.typed[name]], func(node ast.Node) bool {
		ts, ok := node.(*ast.TypeSpec)
		if !ok || ts.Name.Name != name {
			return true
		}
		if it, ok := ts.Type.(*ast.InterfaceType); ok {
			for _, m := range it.Methods.List {
				for _, n := range m.Names {
					out = append(out, n.Name)
				}
			}
		}
		return false
	})
	return out
}

// knobNames lists the knob names resolveKnobs passes to resolveKnob.
func (s contractSource) knobNames() []string {
	var out []string
	ast.Inspect(s.files["config.go"], func(node ast.Node) bool {
		call, ok := node.(*ast.CallExpr)
		if !ok {
			return true
		}
		if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "resolveKnob" && len(call.Args) > 1 {
			if lit, ok := call.Args[1].(*ast.BasicLit); ok {
				name, _ := strconv.Unquote(lit.Value)
				out = append(out, name)
			}
		}
		return true
	})
	return out
}

// TestDocTableListsEveryHook holds doc.go to the code: every interface core asserts the
// experiment against, every traced hook and every knob has its row in the package comment's
// tables, each hook row naming the file that declares it; and every (file, Interface) the table
// names is declared there, so a moved or removed hook cannot leave a stale row.
func TestDocTableListsEveryHook(t *testing.T) {
	src := parseCore(t)
	docBytes, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(docBytes)
	rowStart := func(name string) bool {
		return regexp.MustCompile(`(?m)^//\t` + regexp.QuoteMeta(name)).MatchString(doc)
	}
	hooks := src.experimentHooks()
	if len(hooks) < 10 {
		t.Fatalf("found only %d experiment interfaces (%v): the scan is broken", len(hooks), hooks)
	}
	for iface, file := range hooks {
		if !regexp.MustCompile(regexp.QuoteMeta(file) + `,\s*(//\s*)?` + iface + `\)`).MatchString(doc) {
			t.Errorf("doc.go's hook table has no row naming (%s, %s): add the row for it", file, iface)
		}
		for _, m := range src.methodsOf(iface) {
			if !rowStart(m + "(") {
				t.Errorf("doc.go's hook table has no row starting with %s( (interface %s in %s)", m, iface, file)
			}
		}
	}
	for name := range tracedHooks {
		if !rowStart(name + "(") {
			t.Errorf("doc.go's hook table has no row for the traced hook %s", name)
		}
	}
	knobs := src.knobNames()
	if len(knobs) < 7 {
		t.Fatalf("found only %d knobs (%v): the scan is broken", len(knobs), knobs)
	}
	for _, k := range knobs {
		if !rowStart(k + " ") {
			t.Errorf("doc.go's knob table has no row for %s", k)
		}
	}
	// The reverse: each (file, Interface) the table names is declared in that file.
	named := regexp.MustCompile(`\(?([a-z]+\.go),\s*(?://\s*)?([A-Z][A-Za-z]+)\)`).FindAllStringSubmatch(doc, -1)
	if len(named) < len(hooks) {
		t.Fatalf("doc.go names %d (file, Interface) pairs, fewer than the %d hooks found", len(named), len(hooks))
	}
	var stale []string
	for _, m := range named {
		file, iface := m[1], m[2]
		if src.typed[iface] != file {
			stale = append(stale, file+", "+iface)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("doc.go's hook table names %v, but those files do not declare those types: fix the rows", stale)
	}
}
