package integration_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/internal/prereq"
)

// requireXLA returns the XLA backend or stops the test: no plugin anywhere skips (fails under any
// non-empty $CI); a plugin refused or not loading always fails.
func requireXLA(t testing.TB) *backend.Resolved {
	t.Helper()
	r, err := backend.Resolve(backend.XLA)
	prereq.XLAPlugin.Need(t, err)
	return r
}

func TestSmokeXLA(t *testing.T) {
	r := requireXLA(t)
	t.Log(r)
	if r.Name != backend.XLA || r.Backend.Name() != "stablehlo" {
		t.Fatalf("resolved %q (%s), want the PJRT stablehlo backend", r.Name, r.Backend.Name())
	}
	// y = x·W + b, then a reduction: exercises dot, broadcast and reduce on the plugin.
	exec, err := graph.NewExec(r.Backend, func(x, w, b *graph.Node) (*graph.Node, *graph.Node) {
		y := graph.Add(graph.Dot(x, w), graph.InsertAxes(b, 0))
		return y, graph.ReduceAllSum(graph.Square(y))
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Exec([][]float32{{1, 2}, {3, 4}}, [][]float32{{1, 0, -1}, {2, 1, 0}}, []float32{0.5, 0, -0.5})
	if err != nil {
		t.Fatal(err)
	}
	got := out[0].Value().([][]float32)
	want := [][]float32{{5.5, 2, -1.5}, {11.5, 4, -3.5}}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("y = %v, want %v", got, want)
			}
		}
	}
	var sum float32
	for i := range want {
		for j := range want[i] {
			sum += want[i][j] * want[i][j]
		}
	}
	if s := out[1].Value().(float32); s != sum {
		t.Fatalf("sum of squares = %v, want %v", s, sum)
	}
}
