package precision_test

import (
	"fmt"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/precision"
)

// Parse accepts the modes' spellings and refuses anything else, naming the modes.
func ExampleParse() {
	for _, s := range []string{"bf16", "none", "fp16"} {
		m, err := precision.Parse(s)
		fmt.Printf("%q -> %q, enabled %v, err %v\n", s, string(m), m.Enabled(), err)
	}
	// Output:
	// "bf16" -> "bf16", enabled true, err <nil>
	// "none" -> "f32", enabled false, err <nil>
	// "fp16" -> "", enabled false, err mixed precision "fp16" is not a mode: use "bf16", or "f32" (also "none" or "") for float32 throughout
}

// Mode.Backend is where the casts live: a graph built on the bf16 twin computes its float32
// products in bfloat16 (1 + 2^-10 rounds to 1) and returns float32.
func ExampleMode_Backend() {
	b, err := simplego.New("")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Finalize()
	dot := func(x, y *graph.Node) *graph.Node { return graph.Dot(x, y) }
	x, y := [][]float32{{1 + 1.0/1024}}, [][]float32{{1}}
	fmt.Println(graph.MustExecOnce(precision.F32.Backend(b), dot, x, y))
	fmt.Println(graph.MustExecOnce(precision.BF16.Backend(b), dot, x, y))
	// Output:
	// [1][1]float32{{1.001}}
	// [1][1]float32{{1}}
}
