package integration_test

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/pjrthook"
	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// forwarder is what every bench experiment's Forward is.
type forwarder interface {
	Forward(ctx *context.Context, in Inputs) core.Outputs
}

// tracedContext is a context seeded as core seeds a run's, holding the variables one trace of the
// model's Forward creates (nothing compiled, nothing initialized).
func tracedContext(t *testing.T, be backends.Backend, f *family) *context.Context {
	t.Helper()
	ctx := context.New()
	if err := ctx.SetRNGStateFromSeed(42); err != nil {
		t.Fatal(err)
	}
	d := newFamBatches(f, 1, 2)
	x := d.tensors()["x"]
	g := graph.NewGraph(be, "init_trace")
	defer g.Finalize()
	ctx.SetTraining(g, true)
	f.newExp().(forwarder).Forward(ctx, Inputs{X: graph.Parameter(g, "x", x.Shape())})
	return ctx
}

// digests is each variable's scope and name, shape and a SHA-256 of its bytes, in the
// context's order (the random state's variable among them).
func digests(t *testing.T, ctx *context.Context) []string {
	t.Helper()
	var out []string
	for v := range ctx.IterVariables() {
		val, err := v.Value()
		if err != nil {
			t.Fatalf("%s: %v", v.ScopeAndName(), err)
		}
		var sum [32]byte
		if err := val.ConstBytes(func(b []byte) { sum = sha256.Sum256(b) }); err != nil {
			t.Fatalf("%s: %v", v.ScopeAndName(), err)
		}
		out = append(out, fmt.Sprintf("%s %s %x", v.ScopeAndName(), val.Shape(), sum))
	}
	return out
}

// The engine's variable-by-variable initialization gives every variable of the bench models (the
// MLP, the CNN, the transformer, the 600-array model) the first value GoMLX's one program gives
// it, bit for bit, and leaves the random state where that program leaves it. On XLA it runs
// twice over a fresh disk cache: first compiling, then loading from disk; either way a program
// repeated across variables is compiled (or loaded) once and its executable shared.
func TestInitializeVariablesBitwise(t *testing.T) {
	for _, name := range []string{backend.Go, backend.XLA} {
		r, err := backend.Resolve(name)
		if err != nil {
			if name == backend.XLA {
				prereq.XLAPlugin.Need(t, err)
			}
			t.Fatal(err)
		}
		for _, f := range startModels() {
			t.Run(name+"/"+f.name, func(t *testing.T) {
				want := tracedContext(t, r.Backend, f)
				if err := want.InitializeVariables(r.Backend, nil); err != nil {
					t.Fatal(err)
				}
				if name == backend.Go {
					got := tracedContext(t, r.Backend, f)
					if err := engine.InitializeVariables(got, r.Backend); err != nil {
						t.Fatal(err)
					}
					sameValues(t, want, got)
					return
				}
				prev := pjrthook.Disk()
				dc, err := diskcache.Open(diskcache.Options{Dir: t.TempDir(), Notice: func(string) {}})
				if err != nil {
					t.Fatal(err)
				}
				pjrthook.SetDisk(dc)
				defer pjrthook.SetDisk(prev)
				for _, pass := range []string{"compiling", "from disk"} {
					got := tracedContext(t, r.Backend, f)
					before := pjrthook.Stats()
					if err := engine.InitializeVariables(got, r.Backend); err != nil {
						t.Fatalf("%s: %v", pass, err)
					}
					after := pjrthook.Stats()
					pjrthook.Flush()
					n := sameValues(t, want, got)
					compiled, loaded, shared := after.Compiled-before.Compiled, after.FromDisk-before.FromDisk, after.Shared-before.Shared
					t.Logf("%s: %d variables; %d programs compiled, %d loaded from disk, %d answered with a shared executable", pass, n, compiled, loaded, shared)
					if f.name == "arrays600" && (shared == 0 || compiled+loaded >= shared || pass == "from disk" && compiled != 0) {
						t.Errorf("%s: the 600-array model's initialization compiled %d programs, loaded %d from disk and shared %d: its repeated programs were not shared",
							pass, compiled, loaded, shared)
					}
				}
			})
		}
	}
}

// The same over the initializers a model can set (normal, uniform, Glorot, He, zeros, ones),
// dtypes besides float32 (float64, bfloat16, int32: zeros) and scalars, with variables already
// holding a value (kept as they are, as GoMLX keeps them) among those to initialize.
func TestInitializeVariablesBitwiseInitializers(t *testing.T) {
	r, err := backend.Resolve(backend.XLA)
	if err != nil {
		prereq.XLAPlugin.Need(t, err)
		t.Fatal(err)
	}
	build := func() *context.Context {
		ctx := context.New()
		ctx.SetParam(context.ParamInitialSeed, int64(7)) // the random state starts from ParamInitialSeed at its first use
		g := graph.NewGraph(r.Backend, "init_trace")
		defer g.Finalize()
		inits := map[string]context.VariableInitializer{
			"normal": initializers.RandomNormalFn(ctx, 0.3), "uniform": initializers.RandomUniformFn(ctx, -0.1, 0.2),
			"glorot": initializers.GlorotUniformFn(ctx),
			"he":     context.DefaultInitializer(ctx), "zero": graph.Zeros, "one": graph.Ones,
		}
		for j, kind := range []string{"normal", "uniform", "glorot", "he", "zero", "one", "normal", "he"} {
			if j == 2 {
				ctx.In("preset").VariableWithValue("kept", []float32{1, 2, 3})
			}
			c := ctx.In(fmt.Sprint(kind, j)).WithInitializer(inits[kind]).Checked(false)
			for i, s := range []shapes.Shape{
				shapes.Make(dtypes.Float32, 7, 5), shapes.Make(dtypes.Float64, 3, 4), shapes.Make(dtypes.BFloat16, 6, 2),
				shapes.Make(dtypes.Float32), shapes.Make(dtypes.Int32, 4), shapes.Make(dtypes.Float32, 3, 3, 2, 4),
				shapes.Make(dtypes.Float32, 7, 5),
			} {
				c.VariableWithShape(fmt.Sprintf("v%d", i), s).ValueGraph(g)
			}
		}
		return ctx
	}
	want, got := build(), build()
	if err := want.InitializeVariables(r.Backend, nil); err != nil {
		t.Fatal(err)
	}
	if err := engine.InitializeVariables(got, r.Backend); err != nil {
		t.Fatal(err)
	}
	sameValues(t, want, got)
}

// sameValues fails the test unless got holds the variables of want, in its order, with the same
// shapes and bytes; it returns how many.
func sameValues(t *testing.T, want, got *context.Context) int {
	t.Helper()
	w, g := digests(t, want), digests(t, got)
	if len(w) != len(g) {
		t.Fatalf("%d variables after the engine's initialization, %d after GoMLX's", len(g), len(w))
	}
	for i := range w {
		if w[i] != g[i] {
			t.Errorf("variable %d: engine %s, GoMLX %s", i, g[i], w[i])
		}
	}
	return len(g)
}
