package engine

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestStepReturnsNamedValues: a step hands back each micro-batch's loss and, only when asked to
// read them, its train metrics by name; the layer state and the parameters stay in the engine,
// and nothing parameter-sized is uploaded by a step.
func TestStepReturnsNamedValues(t *testing.T) {
	const accum = 2
	e, src := newAccumEngine(t, accum)
	e.hooks.TrainMetrics = func(_ any, out, _ map[string]*graph.Node) map[string]*graph.Node {
		return map[string]*graph.Node{"mean_y": graph.ReduceAllMean(out["y"])}
	}
	keys := []string{"x", "y"}
	next := func(i *int) func() (map[string]*tensors.Tensor, error) {
		return func() (map[string]*tensors.Tensor, error) {
			b, err := src.BatchAt(*i)
			*i++
			if err != nil {
				return nil, err
			}
			return e.Place(b, keys)
		}
	}
	before := e.Uploads()
	i := 0
	read, err := e.Step(1, keys, next(&i), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Micro) != accum {
		t.Fatalf("a step at accum %d returned %d micro-batches", accum, len(read.Micro))
	}
	for k, m := range read.Micro {
		if math.IsNaN(m.Loss) || m.Loss <= 0 {
			t.Errorf("micro-batch %d: loss %v, want a positive squared error", k, m.Loss)
		}
		if _, ok := m.Metrics["mean_y"]; !ok || len(m.Metrics) != 1 {
			t.Errorf("micro-batch %d: metrics %v, want mean_y alone", k, m.Metrics)
		}
	}
	if read.Loss() != read.Micro[accum-1].Loss {
		t.Errorf("Loss() = %v, want the last micro-batch's %v", read.Loss(), read.Micro[accum-1].Loss)
	}
	unread, err := e.Step(2, keys, next(&i), false)
	if err != nil {
		t.Fatal(err)
	}
	for k, m := range unread.Micro {
		if m.Metrics != nil {
			t.Errorf("unread step, micro-batch %d: metrics %v, want none read back", k, m.Metrics)
		}
	}
	if d := e.Uploads().Params - before.Params; d != 0 {
		t.Errorf("two steps uploaded %d parameter-sized arrays, want 0", d)
	}
}
