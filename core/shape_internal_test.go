package core

import (
	"go/ast"
	"sort"
	"testing"
)

// maxNitroMethods bounds what a reader of Nitro has to hold: its verbs, accessors and the run's
// own steps. New's work belongs to the builder and the fixed facts' queries to runSpec.
const maxNitroMethods = 100

// TestNitroShape holds Nitro to one owner per method: no embedded field (an embedded struct
// promotes its methods, so n.x could be Nitro's or the embedded type's), and at most
// maxNitroMethods methods declared on *Nitro.
func TestNitroShape(t *testing.T) {
	src := parseCore(t)
	var methods []string
	for _, f := range src.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Nitro" {
					methods = append(methods, fd.Name.Name)
				}
			}
		}
		ast.Inspect(f, func(node ast.Node) bool {
			ts, ok := node.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "Nitro" {
				return true
			}
			for _, field := range ts.Type.(*ast.StructType).Fields.List {
				if len(field.Names) == 0 {
					t.Errorf("Nitro embeds %v: its methods would be promoted onto Nitro; name the field", field.Type)
				}
			}
			return false
		})
	}
	if len(methods) < 20 {
		t.Fatalf("found only %d methods on *Nitro: the scan is broken", len(methods))
	}
	if len(methods) > maxNitroMethods {
		sort.Strings(methods)
		t.Errorf("*Nitro has %d methods, more than %d: move setup-only work to the builder, and a concern of its own to a collaborator (%v)", len(methods), maxNitroMethods, methods)
	}
}
