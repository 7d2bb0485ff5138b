package engine

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
)

// testRun is a test's experiment as a caller binds it: every hook reads every batch field.
type testRun struct {
	exp     any // the experiment: GraphConst fields key its programs
	forward func(view any, ctx *context.Context, b map[string]*graph.Node) map[string]*graph.Node
	loss    func(view any, out, b map[string]*graph.Node) *graph.Node
	metrics func(view any, out, b map[string]*graph.Node) map[string]*graph.Node // TrainMetrics; nil: none
	grouper func(keypath []string) string
	data    *prefetch.ArrayBatches // its batch 0 gives the fields and the train width
	backend string                 // "go" or "xla"
	accum   int
	cache   *compilecache.Cache
	reducer AllReducer // nil: one process
	lambda  float64    // decoupled weight decay (DefaultNoDecay spares 1-D arrays); 0: none
}

// newTestEngine sets an engine up as a caller does: the model traced and initialized, the
// parameters placed, the default optimization (RAdam at 1e-3) resolved and its state placed.
func newTestEngine(t testing.TB, r testRun) *Engine {
	t.Helper()
	be := resolveBackend(t, r.backend)
	b0, err := r.data.BatchAt(0)
	if err != nil {
		t.Fatal(err)
	}
	width, err := prefetch.BatchWidth(b0)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]FieldShape{}
	for k, x := range b0 {
		fields[k] = FieldShape{DType: x.DType().String(), Row: x.Shape().Dimensions[1:]}
	}
	hash, err := markers.GraphConstHash(r.exp)
	if err != nil {
		t.Fatal(err)
	}
	values, err := markers.GraphConstValues(r.exp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := seededContext(t, 42)
	var plan *optimizers.Plan
	e, err := New(Config{
		Experiment: r.exp, TypeName: "test", Backend: be, Cache: r.cache, Ctx: ctx, Devices: 1,
		Accum: r.accum, TrainWidth: width, GraphConstHash: hash, GraphConst: values, FieldShapes: fields,
		Hooks:   Hooks{Forward: r.forward, Loss: r.loss, Route: func(_ string, keys []string) []string { return keys }},
		Grouper: r.grouper, Reducer: r.reducer,
		Hyper: func(group string, step int) (map[string]float64, error) { return plan.Hyper(group, step) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.PlaceDeviceFields(); err != nil {
		t.Fatal(err)
	}
	if err := e.TraceModel(width, sortedKeys(b0), nil); err != nil {
		t.Fatal(err)
	}
	if err := e.PlaceParameters(); err != nil {
		t.Fatal(err)
	}
	plan, err = optimizers.Resolve(optimizers.PlanSpec{
		LearningRate: optimizers.Setting{Value: 1e-3, Source: "test"}, Groups: e.Layouts(), TotalSteps: 1000,
		Lambda: optimizers.Setting{Value: r.lambda, Source: "test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.InitOptimizer(plan); err != nil {
		t.Fatal(err)
	}
	return e
}

// trainEpochs runs epochs of optimizer steps over the train source, whole steps only.
func trainEpochs(t testing.TB, e *Engine, src *prefetch.ArrayBatches, epochs int, step *int) {
	t.Helper()
	b0, _ := src.BatchAt(0)
	keys := sortedKeys(b0)
	for range epochs {
		for i := 0; i+e.accum <= src.Len(); i += e.accum {
			k := i
			next := func() (map[string]*tensors.Tensor, error) {
				b, err := src.BatchAt(k)
				if err != nil {
					return nil, err
				}
				k++
				e.CountBatchUploads(len(keys))
				return e.Place(b, keys)
			}
			*step++
			if _, err := e.Step(*step, keys, next, false); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// resolveBackend resolves the named backend, or ends the test (XLA: as a missing prerequisite).
func resolveBackend(t testing.TB, name string) *backend.Resolved {
	t.Helper()
	be, err := backend.Resolve(name)
	if err != nil {
		if name == backend.XLA {
			prereq.XLAPlugin.Need(t, err)
		}
		t.Fatal(err)
	}
	return be
}

// seededContext is a new context whose random state starts from seed.
func seededContext(t testing.TB, seed int64) *context.Context {
	t.Helper()
	ctx := context.New()
	if err := ctx.SetRNGStateFromSeed(seed); err != nil {
		t.Fatal(err)
	}
	return ctx
}
