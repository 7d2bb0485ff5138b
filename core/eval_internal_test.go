package core

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/prefetch"
)

// evalShare is a two-layer classifier with two Forward outputs and an integer label that only
// Metrics reads: Predict batches carry x alone.
type evalShare struct{}

type evalShareIn struct {
	X *graph.Node `batch:"x"`
}

type evalShareTgt struct {
	Y *graph.Node `batch:"y"`
}

func (*evalShare) BuildModel(*context.Context) error { return nil }

func (*evalShare) Forward(ctx *context.Context, in evalShareIn) Outputs {
	h := activations.Relu(layers.Dense(ctx.In("hidden"), in.X, true, 8))
	return Outputs{"logits": layers.Dense(ctx.In("out"), h, true, 3), "hidden": h}
}

func (*evalShare) Loss(out Outputs, in evalShareTgt) *graph.Node {
	onehot := graph.OneHot(in.Y, 3, out["logits"].DType())
	return graph.ReduceAllMean(graph.Neg(graph.ReduceSum(graph.Mul(onehot, graph.LogSoftmax(out["logits"], -1)), -1)))
}

func (*evalShare) Metrics(out Outputs, in evalShareTgt) map[string]hooks.Metric {
	logits := out["logits"]
	pred := graph.ArgMax(logits, -1, dtypes.Int32)
	rows := graph.Scalar(logits.Graph(), dtypes.Float32, float64(logits.Shape().Dimensions[0]))
	return map[string]hooks.Metric{"accuracy": {Sum: graph.ReduceAllSum(graph.ConvertDType(graph.Equal(pred, in.Y), dtypes.Float32)), Count: rows}}
}

func evalShareBatches(t testing.TB, n, batch int, seed uint64, opts ...prefetch.ArrayOptions) *prefetch.ArrayBatches {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	xs, ys := make([]float32, n*5), make([]int32, n)
	for i := range xs {
		xs[i] = float32(r.NormFloat64())
	}
	for i := range ys {
		ys[i] = int32(r.IntN(3))
	}
	a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromFlatDataAndDimensions(xs, n, 5), "y": tensors.FromFlatDataAndDimensions(ys, n)}, batch, append(opts, prefetch.ArrayOptions{})[0])
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// evalShareBackends: the pure-Go backend, and XLA where its plugin is found (in CI it must be).
func evalShareBackends(t *testing.T) []string {
	if _, err := backend.Resolve(backend.XLA); err != nil {
		if prereq.CI() || !prereq.IsAbsent(err) {
			prereq.XLAPlugin.Need(t, err) // a failure in CI, and whenever the plugin is broken
		}
		t.Logf("SKIPPED on XLA, NOT PASSED: no plugin (%v); the go backend only", err)
		return []string{"go"}
	}
	return []string{"go", "xla"}
}

// Predict runs validation's compiled forward: after Validate, Predict at the validation width
// compiles nothing, and before Validate, Predict's program is the one Validate then runs (only
// the short final batch's program is new). Its outputs are bit for bit those of Forward alone,
// the program Predict ran before it shared validation's, at the validation width and at another.
func TestPredictSharesTheEvalProgram(t *testing.T) {
	for _, be := range evalShareBackends(t) {
		t.Run(be, func(t *testing.T) {
			newNitro := func(c *compilecache.Cache) *Nitro {
				t.Helper()
				n, err := New(&evalShare{}, WithBackend(be), Quiet(), WithCache(c), WithoutLogger(), WithoutCheckpoints(),
					WithData(prefetch.Data{"train": evalShareBatches(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": evalShareBatches(t, 40, 16, 2)})) // val: 16, 16, 8
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			c := compilecache.New()
			n := newNitro(c)
			if _, err := n.Validate(); err != nil {
				t.Fatal(err)
			}
			if s := c.Stats(); s.Misses != 2 {
				t.Fatalf("Validate: %d misses, want 2 (the full-width and the short-batch eval programs)", s.Misses)
			}
			for _, rows := range []int{16, 5} {
				b := prefetch.Batch{"x": must(evalShareBatches(t, rows, rows, 9).BatchAt(0))["x"]}
				before := c.Stats()
				got, err := n.Predict(b)
				if err != nil {
					t.Fatal(err)
				}
				if s := c.Stats(); rows == 16 && s.Misses != before.Misses {
					t.Errorf("Predict at the validation width after Validate: %d new misses, want 0", s.Misses-before.Misses)
				}
				alone, err := n.eng.Predict(b, []string{"x"}, []string{"x"}, false, rows, rows) // Forward alone
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 2 || len(alone) != 2 {
					t.Fatalf("Predict returned %v, Forward alone %v: want hidden and logits", got, alone)
				}
				for _, name := range sortedKeys(alone) {
					want := alone[name]
					if !bytes.Equal(hostBytes(t, got[name]), hostBytes(t, want)) {
						t.Errorf("%d rows, output %q: Predict differs from Forward alone", rows, name)
					}
				}
			}

			c = compilecache.New()
			n = newNitro(c)
			if _, err := n.Predict(prefetch.Batch{"x": must(evalShareBatches(t, 16, 16, 9).BatchAt(0))["x"]}); err != nil {
				t.Fatal(err)
			}
			if _, err := n.Validate(); err != nil {
				t.Fatal(err)
			}
			if s := c.Stats(); s.Misses != 2 || s.Entries != 2 {
				t.Errorf("Predict then Validate: %d misses, %d entries; want 2 each (Predict's program and the short batch's)", s.Misses, s.Entries)
			}
		})
	}
}

func hostBytes(t testing.TB, x *tensors.Tensor) []byte {
	t.Helper()
	var b []byte
	if err := x.ConstBytes(func(d []byte) { b = bytes.Clone(d) }); err != nil {
		t.Fatal(err)
	}
	return b
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
