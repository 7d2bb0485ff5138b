package engine_test

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/engine"
)

// A traced model's variables get their first values, the ones GoMLX's InitializeVariables
// would give them, one small program per variable.
func ExampleInitializeVariables() {
	be, err := backend.Resolve(backend.Go)
	if err != nil {
		panic(err)
	}
	ctx := context.New()
	if err := ctx.SetRNGStateFromSeed(42); err != nil {
		panic(err)
	}
	g := graph.NewGraph(be.Backend, "trace")
	w := ctx.In("dense").VariableWithShape("weights", shapes.Make(dtypes.Float32, 3, 2))
	b := ctx.In("dense").VariableWithShape("biases", shapes.Make(dtypes.Float32, 2))
	w.ValueGraph(g)
	b.ValueGraph(g)
	g.Finalize()
	if err := engine.InitializeVariables(ctx, be.Backend); err != nil {
		panic(err)
	}
	fmt.Println(w.HasValue(), w.Shape(), b.HasValue(), b.MustValue().Value())
	// Output:
	// true (Float32)[3 2] true [0 0]
}
