package precision_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/precision"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]precision.Mode{"": precision.F32, "none": precision.F32, "f32": precision.F32, "bf16": precision.BF16} {
		got, err := precision.Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"fp16", "BF16", "float32", " bf16"} {
		_, err := precision.Parse(bad)
		var me *precision.ModeError
		if !errors.As(err, &me) || me.Value != bad || !strings.Contains(err.Error(), `"bf16"`) || !strings.Contains(err.Error(), `"f32"`) {
			t.Errorf("Parse(%q): error %v, want a *ModeError naming the value and the modes", bad, err)
		}
	}
	if _, _, ok := precision.F32.KeyEntry(); ok {
		t.Error("F32 has a key entry: float32 keys would change")
	}
	if name, value, ok := precision.BF16.KeyEntry(); !ok || name == "" || value != "bf16" {
		t.Errorf("BF16.KeyEntry() = %q, %q, %v", name, value, ok)
	}
}

func goBackend(t *testing.T) backends.Backend {
	t.Helper()
	b, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	return b
}

// TestBackendComputesProductsInBF16: 1 + 2^-10 is a float32 but not a bfloat16 (7 mantissa
// bits), so a product of it with 1 is 1 through the bf16 backend and exact through the plain one;
// the result is float32 either way, an addition (not a product) stays exact, and an integer
// product is left alone.
func TestBackendComputesProductsInBF16(t *testing.T) {
	b := goBackend(t)
	const x = 1 + 1.0/1024
	scalar := func(n *graph.Node) *graph.Node { return graph.Reshape(n) }
	ops := map[string]func(a, c *graph.Node) *graph.Node{
		"Dot":        func(a, c *graph.Node) *graph.Node { return scalar(graph.Dot(a, c)) },
		"DotGeneral": func(a, c *graph.Node) *graph.Node { return scalar(graph.Einsum("ij,jk->ik", a, c)) },
		"Conv": func(a, c *graph.Node) *graph.Node {
			return scalar(graph.Convolve(graph.Reshape(a, 1, 1, 1), graph.Reshape(c, 1, 1, 1)).StridePerAxis(1).NoPadding().Done())
		},
		"Add": func(a, c *graph.Node) *graph.Node { return scalar(graph.Add(a, c)) },
	}
	for name, op := range ops {
		for _, mode := range []precision.Mode{precision.F32, precision.BF16} {
			out := graph.MustExecOnce(mode.Backend(b), op, [][]float32{{x}}, [][]float32{{1}})
			want := float32(x)
			if name == "Add" {
				want = x + 1
			} else if mode == precision.BF16 {
				want = 1
			}
			if out.DType() != dtypes.Float32 || out.Value().(float32) != want {
				t.Errorf("%s under %s = %v, want Float32 %v", name, mode, out, want)
			}
		}
	}
	ints := graph.MustExecOnce(precision.BF16.Backend(b), func(a, c *graph.Node) *graph.Node { return graph.Dot(a, c) }, [][]int32{{3}}, [][]int32{{5}})
	if ints.DType() != dtypes.Int32 || ints.Value().([][]int32)[0][0] != 15 {
		t.Errorf("an Int32 product through the bf16 backend: %v", ints)
	}
}

// TestBackendIsOnePerBackend: the twin is the same value for every call (tensors are tied to
// the backend value they were placed with), wrapping it again is itself, and F32 wraps nothing.
func TestBackendIsOnePerBackend(t *testing.T) {
	b := goBackend(t)
	w := precision.BF16.Backend(b)
	if w == b || precision.BF16.Backend(b) != w || precision.BF16.Backend(w) != w {
		t.Fatal("BF16.Backend is not one wrapper per backend")
	}
	if precision.F32.Backend(b) != b {
		t.Fatal("F32.Backend wrapped the backend")
	}
	if w.Name() != b.Name() {
		t.Errorf("wrapper's name %q, want %q", w.Name(), b.Name())
	}
}
