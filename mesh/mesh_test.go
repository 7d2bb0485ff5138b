package mesh_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/mesh"
)

// A mesh is 2 or more of the backend's devices; the error names what was asked and what exists.
func TestNewRefuses(t *testing.T) {
	b, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int][]string{1: {"1 devices", "at least 2"}, 3: {"3 devices", "has 1"}} {
		_, err := mesh.New(b, n)
		if err == nil {
			t.Fatalf("New(%d) on a 1-device backend: no error", n)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New(%d): %q lacks %q", n, err, w)
			}
		}
	}
}

// Outside a mesh program, Spec is nil and Parameter is a plain graph.Parameter.
func TestSpecOutsideMesh(t *testing.T) {
	b, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	g := graph.NewGraph(b, "plain")
	if s := mesh.Spec(g, true); s != nil {
		t.Fatalf("Spec on a plain graph = %v, want nil", s)
	}
	x := mesh.Parameter(g, "x", shapes.Make(dtypes.Float32, 4, 2), true)
	g.Compile(graph.ReduceAllSum(x))
	out := g.Run([][]float32{{1, 2}, {3, 4}, {5, 6}, {7, 8}})
	if v := out[0].Value().(float32); v != 36 {
		t.Fatalf("sum = %v, want 36", v)
	}
}
