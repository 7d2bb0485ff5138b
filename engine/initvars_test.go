package engine

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
)

// A variable whose initializer fails stops the initialization with an error naming it, and no
// variable is left holding a placeholder: those before it have their first values, it and
// those after it none.
func TestInitializeVariablesFailureLeavesNoPlaceholder(t *testing.T) {
	be := resolveBackend(t, backend.Go)
	ctx := seededContext(t, 1)
	g := graph.NewGraph(be.Backend, "trace")
	s := shapes.Make(dtypes.Float32, 2, 2)
	before := ctx.In("a").VariableWithShape("w", s)
	broken := ctx.In("b").WithInitializer(func(*graph.Graph, shapes.Shape) *graph.Node { panic("no initial value") }).VariableWithShape("w", s)
	after := ctx.In("c").VariableWithShape("w", s)
	for _, v := range []*context.Variable{before, broken, after} {
		v.ValueGraph(g)
	}
	g.Finalize()
	err := InitializeVariables(ctx, be.Backend)
	if err == nil || !strings.Contains(err.Error(), "/b/w") {
		t.Fatalf("err = %v, want one naming /b/w", err)
	}
	if !before.HasValue() || broken.HasValue() || after.HasValue() {
		t.Fatalf("values after the failure: /a/w %v, /b/w %v, /c/w %v; want only /a/w",
			before.HasValue(), broken.HasValue(), after.HasValue())
	}
	if !after.Shape().Equal(s) {
		t.Fatalf("/c/w has shape %s after the failure, want %s", after.Shape(), s)
	}
}
