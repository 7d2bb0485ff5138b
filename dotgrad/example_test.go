package dotgrad_test

import (
	"fmt"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/dotgrad"
)

func ExampleInstall() {
	// Once, at the start of the program, before any graph is built.
	dotgrad.Install()

	backend, err := simplego.New("")
	if err != nil {
		panic(err)
	}
	// The gradient of sum(x·w) with respect to w is xᵀ times ones: built as a matrix product.
	grads := graph.MustExecOnceN(backend, func(x, w *graph.Node) []*graph.Node {
		return graph.Gradient(graph.ReduceAllSum(graph.Dot(x, w)), x, w)
	}, [][]float32{{1, 2}, {3, 4}}, [][]float32{{5}, {6}})
	fmt.Println(dotgrad.Installed(), grads[0].Value(), grads[1].Value())
	// Output: true [[5 6] [5 6]] [[4] [6]]
}
