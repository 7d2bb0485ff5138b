package core_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/prefetch"
)

// Classes reads the regression as three classes, y (and the prediction) below -1, up to 1, above
// 1. Metrics (device) and HostMetrics (host) both report the confusion matrix as an array with
// no count and the mse; on the host the scores and labels of "y > 0.5" are collected too, for an
// AUC only a whole split can give. FinalizeMetrics keeps the accumulation and reports accuracy,
// mse and, on the host, auc.
type Classes struct {
	coretest.Base
	host bool
	rows []int // HostMetrics: the rows of each batch it was shown
	last metrics.Result
}

func (e *Classes) MetricsResidency() core.Residency {
	if e.host {
		return core.MetricsOnHost
	}
	return core.MetricsOnDevice
}

// graphClass is the class of v [B, 1] as int32 [B].
func graphClass(v *graph.Node) *graph.Node {
	g := v.Graph()
	above := func(t float64) *graph.Node {
		return graph.ConvertDType(graph.GreaterThan(v, graph.Scalar(g, v.DType(), t)), dtypes.Int32)
	}
	return graph.Reshape(graph.Add(above(-1), above(1)), v.Shape().Dimensions[0])
}

func hostClass(v float32) int {
	c := 0
	if v > -1 {
		c++
	}
	if v > 1 {
		c++
	}
	return c
}

func (*Classes) Metrics(out core.Outputs, in coretest.Tgt) map[string]hooks.Metric {
	pred := out["pred"]
	oh := func(v *graph.Node) *graph.Node { return graph.OneHot(graphClass(v), 3, dtypes.Float32) }
	n := graph.Scalar(pred.Graph(), dtypes.Float32, float64(pred.Shape().Dimensions[0]))
	return map[string]hooks.Metric{
		"confusion": {Sum: graph.Einsum("bi,bj->ij", oh(in.Y), oh(pred))},
		"mse":       {Sum: graph.ReduceAllSum(graph.Square(graph.Sub(pred, in.Y))), Count: n},
	}
}

func (e *Classes) HostMetrics(out core.Prediction, b prefetch.Batch) (map[string]metrics.Metric, error) {
	pred := tensors.MustCopyFlatData[float32](out["pred"])
	y := tensors.MustCopyFlatData[float32](b["y"])
	e.rows = append(e.rows, len(pred))
	truth, guess := make([]int, len(y)), make([]int, len(pred))
	score, pos := make([]float64, len(pred)), make([]float64, len(y))
	sse := 0.0
	for i := range y {
		truth[i], guess[i] = hostClass(y[i]), hostClass(pred[i])
		score[i] = float64(pred[i])
		if y[i] > 0.5 {
			pos[i] = 1
		}
		d := float64(pred[i]) - float64(y[i])
		sse += d * d
	}
	cm, err := metrics.ConfusionCounts(truth, guess, 3)
	if err != nil {
		return nil, err
	}
	return map[string]metrics.Metric{
		"confusion": metrics.Summed(cm), "score": metrics.Collected(score), "pos": metrics.Collected(pos),
		"mse": metrics.Mean(sse, float64(len(y))),
	}, nil
}

func (e *Classes) FinalizeMetrics(acc metrics.Result, split string) map[string]float64 {
	e.last = acc
	m, err := metrics.Confusion(acc.Arrays["confusion"])
	if err != nil {
		panic(err)
	}
	diag, total := 0, 0
	for i, row := range m {
		for j, v := range row {
			total += v
			if i == j {
				diag += v
			}
		}
	}
	res := map[string]float64{"accuracy": float64(diag) / float64(total), "mse": acc.Scalars["mse"]}
	if score, ok := acc.Collected["score"]; ok {
		pos := make([]bool, len(score))
		for i, p := range acc.Collected["pos"] {
			pos[i] = p == 1
		}
		res["auc"], err = metrics.AUC(score, pos)
		if err != nil {
			panic(err)
		}
	}
	return res
}

func (e *Classes) FinalizedMetricNames() []string {
	if e.host {
		return []string{"accuracy", "auc", "mse"}
	}
	return []string{"accuracy", "mse"}
}

// classesData: a trained-for-nothing model is enough (the metrics are compared against the
// host's own reading of Predict); val has 40 rows at batch 16, so a short final batch of 8.
func classesData(t *testing.T) prefetch.Data {
	return prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": coretest.Arrays(t, 40, 16, 2, prefetch.ArrayOptions{})}
}

// hostTruth is what the split's metrics must be, from Predict and the host labels: the
// confusion matrix, the mse and the AUC of pred as a score for y > 0.5.
func hostTruth(t *testing.T, n *core.Nitro, src prefetch.Source) (cm [][]int, mse, auc float64) {
	var truth, guess []int
	var score []float64
	var pos []bool
	sse := 0.0
	for i := 0; i < src.Len(); i++ {
		b := must(src.BatchAt(i))
		p, err := n.Predict(prefetch.Batch{"x": b["x"]})
		if err != nil {
			t.Fatal(err)
		}
		pred := tensors.MustCopyFlatData[float32](p["pred"])
		y := tensors.MustCopyFlatData[float32](b["y"])
		for r := range y {
			truth, guess = append(truth, hostClass(y[r])), append(guess, hostClass(pred[r]))
			score, pos = append(score, float64(pred[r])), append(pos, y[r] > 0.5)
			d := float64(pred[r]) - float64(y[r])
			sse += d * d
		}
	}
	a, err := metrics.ConfusionCounts(truth, guess, 3)
	if err != nil {
		t.Fatal(err)
	}
	cm = must(metrics.Confusion(a))
	auc = must(metrics.AUC(score, pos))
	return cm, sse / float64(len(truth)), auc
}

// Both residencies give the split's confusion matrix (an array summed with no count) and mse;
// the host one also an exact AUC over the whole split. The host hook never sees padding, and a
// short final batch costs the host no second program: one eval program against the device's two.
func TestMetricsResidencyConfusionAndAUC(t *testing.T) {
	for _, host := range []bool{false, true} {
		e := &Classes{host: host}
		c := compilecache.New()
		d := classesData(t)
		n, err := core.New(e, coretest.GoOpts(c, core.WithData(d))...)
		if err != nil {
			t.Fatal(err)
		}
		m, err := n.Validate()
		if err != nil {
			t.Fatalf("host %v: %v", host, err)
		}
		misses := c.Stats().Misses
		t.Logf("host %v: %v, confusion %v", host, m, e.last.Arrays["confusion"].Data)
		cm, mse, auc := hostTruth(t, n, d["val"])
		got, err := metrics.Confusion(e.last.Arrays["confusion"])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, cm, slices.Equal) {
			t.Errorf("host %v: confusion %v, want %v", host, got, cm)
		}
		if !near(m["mse"], mse) {
			t.Errorf("host %v: mse %v, want %v", host, m["mse"], mse)
		}
		wantMisses := 2 // the full-width eval program and the short final batch's
		if host {
			wantMisses = 1
			if m["auc"] != auc {
				t.Errorf("auc %v, want %v (over the whole split)", m["auc"], auc)
			}
			if !slices.Equal(e.rows, []int{16, 16, 8}) {
				t.Errorf("HostMetrics saw batches of %v rows, want [16 16 8] (never the padding)", e.rows)
			}
		} else if _, ok := m["auc"]; ok || e.rows != nil {
			t.Errorf("device residency ran HostMetrics (rows %v, metrics %v)", e.rows, m)
		}
		if misses != wantMisses {
			t.Errorf("host %v: validation compiled %d programs, want %d", host, misses, wantMisses)
		}
	}
}

// The checkpoint and early-stopping metrics are checked at New against the names the finalizer
// declares, not after the first epoch.
func TestFinalizedNamesCheckedAtSetup(t *testing.T) {
	d := classesData(t)
	err := newErr(t, &Classes{}, d, core.WithEarlyStopping("val_auc", "max", 2, 0))
	coretest.WantErr(t, err, `"val_auc"`, "val_accuracy", "val_mse")
	tk := must(checkpoint.NewTopK(1, "val_f1", "max", t.TempDir(), nil))
	coretest.WantErr(t, newErr(t, &Classes{}, d, core.WithCheckpointer(tk)), `"val_f1"`, "val_accuracy")
	// Declared, so accepted: auc on the host.
	coretest.MustNew(t, &Classes{host: true}, d, core.WithEarlyStopping("val_auc", "max", 2, 0))
}

// Undeclared names returns an error naming both lists.
type Undeclared struct{ Classes }

func (e *Undeclared) FinalizedMetricNames() []string { return []string{"accuracy"} }

// OldFinalizer has the map signature FinalizeMetrics had.
type OldFinalizer struct{ coretest.Reg }

func (*OldFinalizer) FinalizeMetrics(acc map[string]float64, split string) map[string]float64 {
	return acc
}

// ArrayNoFinal reports an array metric and nothing that could report it.
type ArrayNoFinal struct{ coretest.Base }

func (*ArrayNoFinal) Metrics(out core.Outputs, in coretest.Tgt) map[string]hooks.Metric {
	return map[string]hooks.Metric{"hist": {Sum: graph.ReduceSum(out["pred"], 0)}}
}

// HostOnly has HostMetrics and no Metrics.
type HostOnly struct{ coretest.Base }

func (*HostOnly) HostMetrics(out core.Prediction, b prefetch.Batch) (map[string]metrics.Metric, error) {
	return map[string]metrics.Metric{"n": metrics.Total(float64(out["pred"].Shape().Dimensions[0]))}, nil
}

// Both has both hooks and chooses the device.
type Both struct{ HostOnly }

func (*Both) MetricsResidency() core.Residency { return core.MetricsOnDevice }

func (*Both) Metrics(out core.Outputs, in coretest.Tgt) map[string]hooks.Metric {
	return map[string]hooks.Metric{"dev": {Sum: graph.Scalar(out["pred"].Graph(), dtypes.Float32, float64(out["pred"].Shape().Dimensions[0]))}}
}

func TestMetricsResidencyRefusals(t *testing.T) {
	d := classesData(t)
	if _, err := coretest.MustNew(t, &Undeclared{}, d).Validate(); err == nil || !strings.Contains(err.Error(), "FinalizeMetrics returned [accuracy mse], FinalizedMetricNames declares [accuracy]") {
		t.Errorf("undeclared names: %v", err)
	}
	coretest.WantErr(t, newErr(t, &OldFinalizer{}, d), "FinalizeMetrics has type", "FinalizeMetrics(acc metrics.Result, split string)", "FinalizedMetricNames")
	// An array with no finalizer: at New when a checkpoint or stopping metric makes it trace
	// Metrics, else at the first evaluation.
	coretest.WantErr(t, newErr(t, &ArrayNoFinal{}, d, core.WithEarlyStopping("val_loss", "min", 2, 0)), `metric "hist" is an array or a collection`)
	if _, err := coretest.MustNew(t, &ArrayNoFinal{}, d).Validate(); err == nil || !strings.Contains(err.Error(), `metric "hist" is an array or a collection`) {
		t.Errorf("array with no finalizer: %v", err)
	}
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, d, core.WithMetricsResidency(core.MetricsOnHost)), "has no HostMetrics hook", "WithMetricsResidency")
	coretest.WantErr(t, newErr(t, &HostOnly{}, d, core.WithMetricsResidency(core.MetricsOnDevice)), "no Metrics hook", "HostMetrics runs only on the host")
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, d, core.WithMetricsResidency("gpu")), `metrics residency "gpu"`)
	// HostOnly defaults to the host: its metric, no val_loss.
	m, err := coretest.MustNew(t, &HostOnly{}, d).Validate()
	if err != nil || m["n"] != 40 || len(m) != 1 {
		t.Errorf("HostOnly Validate = %v, %v; want {n: 40}", m, err)
	}
	// MetricsResidency wins over the default, and the option over both.
	if m := must(coretest.MustNew(t, &Both{}, d).Validate()); m["dev"] != 40 || len(m) != 1 {
		t.Errorf("Both, MetricsResidency() device: %v; want {dev: 40}", m)
	}
	if m := must(coretest.MustNew(t, &Both{}, d, core.WithMetricsResidency(core.MetricsOnHost)).Validate()); m["n"] != 40 || len(m) != 1 {
		t.Errorf("Both, WithMetricsResidency(host): %v; want {n: 40}", m)
	}
}
