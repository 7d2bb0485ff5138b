package integration_test

// Claims docs/porting.md makes about GoMLX v0.25 as a user porting from JAX or PyTorch meets it,
// each checked here on the pure-Go and the XLA backend, with the workaround the page gives.

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/core/tensors/images"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
)

// portingBackends runs f on the go backend and on XLA (a missing plugin fails in CI).
func portingBackends(t *testing.T, f func(t *testing.T, be backends.Backend)) {
	for _, name := range []string{backend.Go, backend.XLA} {
		t.Run(name, func(t *testing.T) {
			var r *backend.Resolved
			if name == backend.XLA {
				r = requireXLA(t)
			} else {
				var err error
				if r, err = backend.Resolve(backend.Go); err != nil {
					t.Fatal(err)
				}
			}
			f(t, r.Backend)
		})
	}
}

// run executes fn once in a fresh context seeded for repeatability and returns its outputs.
func run(t *testing.T, be backends.Backend, ctx *context.Context, fn any, args ...any) []*tensors.Tensor {
	t.Helper()
	if ctx == nil {
		ctx = context.New()
	}
	ctx.SetParam(context.ParamInitialSeed, int64(7))
	e, err := context.NewExecAny(be, ctx, fn)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := e.Exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

func flat32(t *tensors.Tensor) []float32 { return tensors.MustCopyFlatData[float32](t) }

// Relu's gradient at exactly 0 is 1 in GoMLX (Max(x, 0) sends a tie to x); JAX and PyTorch give
// 0. The Where spelling gives 0 at 0.
func TestPortingReluGradientAtZero(t *testing.T) {
	portingBackends(t, func(t *testing.T, be backends.Backend) {
		x := tensors.FromValue([]float32{-1, 0, 2})
		outs := run(t, be, nil, func(ctx *context.Context, x *Node) []*Node {
			jaxRelu := Where(GreaterThan(x, ZerosLike(x)), x, ZerosLike(x))
			return []*Node{
				Gradient(ReduceAllSum(activations.Relu(x)), x)[0],
				Gradient(ReduceAllSum(jaxRelu), x)[0],
			}
		}, x)
		if got := flat32(outs[0]); got[0] != 0 || got[1] != 1 || got[2] != 1 {
			t.Errorf("d relu/dx at -1, 0, 2 = %v; the page says [0 1 1]", got)
		}
		if got := flat32(outs[1]); got[0] != 0 || got[1] != 0 || got[2] != 1 {
			t.Errorf("the Where spelling's gradient = %v; the page says [0 0 1] (JAX's)", got)
		}
	})
}

// attentionRef is softmax(q·k / scale) over the keys, per head, from host arrays:
// q [n, h, d], k [m, h, d] -> [n, h, m].
func attentionRef(q, k []float64, n, m, h, d int, scale float64) []float64 {
	out := make([]float64, n*h*m)
	for i := range n {
		for hh := range h {
			row := out[(i*h+hh)*m : (i*h+hh+1)*m]
			top := math.Inf(-1)
			for j := range m {
				s := 0.0
				for dd := range d {
					s += q[(i*h+hh)*d+dd] * k[(j*h+hh)*d+dd]
				}
				row[j] = s / scale
				top = max(top, row[j])
			}
			sum := 0.0
			for j := range row {
				row[j] = math.Exp(row[j] - top)
				sum += row[j]
			}
			for j := range row {
				row[j] /= sum
			}
		}
	}
	return out
}

// MultiHeadAttention divides the logits by head_dim (it scales the query by 1/sqrt(head_dim) and
// the logits again), where JAX and PyTorch divide by sqrt(head_dim). The coefficients are
// checked against a host softmax of the layer's own projections; an attention written out (as
// the page shows) scales once.
func TestPortingMultiHeadAttentionScalesTwice(t *testing.T) {
	const n, in, heads, d = 5, 6, 2, 16
	portingBackends(t, func(t *testing.T, be backends.Backend) {
		xs := make([]float32, n*in)
		for i := range xs {
			xs[i] = float32(math.Sin(float64(i)*1.7)) * 4 // large enough that the scale shows in the softmax
		}
		x := tensors.FromFlatDataAndDimensions(xs, 1, n, in)
		outs := run(t, be, nil, func(ctx *context.Context, x *Node) []*Node {
			_, coef := layers.MultiHeadAttention(ctx.In("mha"), x, x, x, heads, d).DoneWithCoefficients()
			// the layer's own projections, for the reference
			mine := ctx.In("mha").In("MultiHeadAttention").Reuse()
			q := layers.Dense(mine.In("query"), x, true, heads, d)
			k := layers.Dense(mine.In("key"), x, true, heads, d)
			own := singleScaledAttention(q, k)
			return []*Node{coef, ConvertDType(q, dtypes.Float64), ConvertDType(k, dtypes.Float64), own}
		}, x)
		q, k := tensors.MustCopyFlatData[float64](outs[1]), tensors.MustCopyFlatData[float64](outs[2])
		byD := attentionRef(q, k, n, n, heads, d, d)
		bySqrt := attentionRef(q, k, n, n, heads, d, math.Sqrt(d))
		got, own := flat32(outs[0]), flat32(outs[3])
		far := 0.0
		for i := range got {
			if math.Abs(float64(got[i])-byD[i]) > 1e-4 {
				t.Fatalf("coefficient %d: layer %v, softmax(qk/d) %v, softmax(qk/sqrt d) %v", i, got[i], byD[i], bySqrt[i])
			}
			if math.Abs(float64(own[i])-bySqrt[i]) > 1e-4 {
				t.Fatalf("coefficient %d: the written-out attention %v, softmax(qk/sqrt d) %v", i, own[i], bySqrt[i])
			}
			far = max(far, math.Abs(byD[i]-bySqrt[i]))
		}
		if far < 0.05 {
			t.Fatalf("the two scalings differ by at most %v here: the test does not tell them apart", far)
		}
	})
}

// singleScaledAttention is the attention logits' softmax with one 1/sqrt(head_dim):
// q, k [batch, n, heads, d] -> [batch, n, heads, m], as JAX and PyTorch compute it.
func singleScaledAttention(q, k *Node) *Node {
	d := q.Shape().Dimensions[q.Rank()-1]
	logits := Einsum("bnhd,bmhd->bnhm", q, k)
	return Softmax(DivScalar(logits, math.Sqrt(float64(d))), -1)
}

// The default initializer (He) takes the fan-in of a [in, heads, head_dim] kernel as heads×in
// (it reads a rank-3 shape as a convolution kernel), so attention projections start sqrt(heads)
// smaller than He over the contracted axis alone (sqrt(2/in), what a [in, heads·head_dim] matrix
// gets); a 2-D Dense kernel gets sqrt(2/in), and a Dense to heads·head_dim reshaped after is
// the workaround.
func TestPortingHeFanInOfAttentionKernels(t *testing.T) {
	const in, heads, d = 64, 8, 32
	portingBackends(t, func(t *testing.T, be backends.Backend) {
		ctx := context.New()
		x := tensors.FromFlatDataAndDimensions(make([]float32, in), 1, in)
		run(t, be, ctx, func(ctx *context.Context, x *Node) []*Node {
			a := layers.Dense(ctx.In("rank3"), x, true, heads, d)
			b := Reshape(layers.Dense(ctx.In("flat"), x, true, heads*d), 1, heads, d)
			return []*Node{a, b}
		}, x)
		std := func(scope string) float64 {
			v := ctx.In(scope).In("dense").GetVariable("weights")
			if v == nil {
				t.Fatalf("no variable %s/dense/weights", scope)
			}
			vals := flat32(v.MustValue())
			s := 0.0
			for _, w := range vals {
				s += float64(w) * float64(w)
			}
			return math.Sqrt(s / float64(len(vals)))
		}
		r3, r2 := std("rank3"), std("flat")
		want3, want2 := math.Sqrt(2.0/(heads*in)), math.Sqrt(2.0/in)
		if math.Abs(r3/want3-1) > 0.05 {
			t.Errorf("[in, heads, head_dim] kernel std %v, the page says sqrt(2/(heads*in)) = %v (He over in alone: %v)", r3, want3, want2)
		}
		if math.Abs(r2/want2-1) > 0.05 {
			t.Errorf("[in, heads*head_dim] kernel std %v, want sqrt(2/in) = %v", r2, want2)
		}
	})
}

// The same rule on convolution kernels: channels-last [kh, kw, in, out] gets the usual fan-in
// kh·kw·in; channels-first [out, in, kh, kw] gets kh·out·in (the last two axes read as in and
// out), so its kernels start sqrt(out/kw) too small.
func TestPortingHeFanInOfConvolutionKernels(t *testing.T) {
	const c, f, k = 16, 32, 3
	portingBackends(t, func(t *testing.T, be backends.Backend) {
		ctx := context.New()
		last := tensors.FromFlatDataAndDimensions(make([]float32, 8*8*c), 1, 8, 8, c)
		first := tensors.FromFlatDataAndDimensions(make([]float32, 8*8*c), 1, c, 8, 8)
		run(t, be, ctx, func(ctx *context.Context, last, first *Node) []*Node {
			return []*Node{
				layers.Convolution(ctx.In("last"), last).Filters(f).KernelSize(k).Done(),
				layers.Convolution(ctx.In("first"), first).Filters(f).KernelSize(k).ChannelsAxis(images.ChannelsFirst).Done(),
			}
		}, last, first)
		for _, c := range []struct {
			scope string
			dims  []int
			want  float64
		}{{"last", []int{k, k, c, f}, math.Sqrt(2.0 / (k * k * c))}, {"first", []int{f, c, k, k}, math.Sqrt(2.0 / (k * f * c))}} {
			v := ctx.In(c.scope).In("conv").GetVariable("weights")
			if v == nil {
				t.Fatalf("no variable %s/conv/weights; variables: %v", c.scope, ctx.In(c.scope).Scope())
			}
			if !slices.Equal(v.Shape().Dimensions, c.dims) {
				t.Fatalf("%s kernel shape %v, want %v", c.scope, v.Shape().Dimensions, c.dims)
			}
			vals := flat32(v.MustValue())
			s := 0.0
			for _, w := range vals {
				s += float64(w) * float64(w)
			}
			if got := math.Sqrt(s / float64(len(vals))); math.Abs(got/c.want-1) > 0.05 {
				t.Errorf("%s kernel %v: std %v, the page says %v", c.scope, c.dims, got, c.want)
			}
		}
	})
}

// LayerNormalization's default epsilon is 1e-3 (PyTorch 1e-5, Flax 1e-6): on a feature row of
// variance 1e-4 the normalized value is 0.30, not 0.95. Epsilon(1e-5) or the context
// hyperparameter layer_norm_epsilon (layers.ParamLayerNormEpsilon) sets PyTorch's.
func TestPortingLayerNormEpsilon(t *testing.T) {
	portingBackends(t, func(t *testing.T, be backends.Backend) {
		x := tensors.FromValue([][]float32{{0.01, -0.01}})
		outs := run(t, be, nil, func(ctx *context.Context, x *Node) []*Node {
			viaParam := ctx.In("p")
			viaParam.SetParam(layers.ParamLayerNormEpsilon, 1e-5)
			return []*Node{
				layers.LayerNormalization(ctx.In("default"), x, -1).Done(),
				layers.LayerNormalization(ctx.In("explicit"), x, -1).Epsilon(1e-5).Done(),
				layers.LayerNormalization(viaParam, x, -1).Done(),
			}
		}, x)
		want := []float64{0.01 / math.Sqrt(1e-4+1e-3), 0.01 / math.Sqrt(1e-4+1e-5), 0.01 / math.Sqrt(1e-4+1e-5)}
		for i, name := range []string{"default (1e-3)", "Epsilon(1e-5)", "layer_norm_epsilon=1e-5"} {
			if got := flat32(outs[i])[0]; math.Abs(float64(got)-want[i]) > 1e-4 {
				t.Errorf("%s: normalized %v, want %v", name, got, want[i])
			}
		}
	})
}
