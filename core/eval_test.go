package core_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
)

// Rows adds a Metrics hook to Reg: "rows" is a sum with no count whose value is the number of
// rows Metrics was shown, "sse" the summed squared error, "mse" the same divided by the rows.
type Rows struct{ base }

func (*Rows) Metrics(out core.Outputs, in Tgt) map[string]core.Metric {
	pred := out["pred"]
	g := pred.Graph()
	rows := pred.Shape().Dimensions[0]
	if d := in.Y.Shape().Dimensions[0]; d != rows {
		panic(fmt.Sprintf("Metrics saw %d prediction rows but %d target rows", rows, d))
	}
	sse := graph.ReduceAllSum(graph.Square(graph.Sub(pred, in.Y)))
	n := graph.Scalar(g, dtypes.Float32, float64(rows))
	return map[string]core.Metric{
		"rows": {Sum: n},
		"sse":  {Sum: sse},
		"mse":  {Sum: sse, Count: n},
	}
}

// Finalized adds a MetricsFinalizer to Rows, recording the splits it was called for.
type Finalized struct {
	Rows
	splits []string
}

func (e *Finalized) FinalizeMetrics(acc map[string]float64, split string) map[string]float64 {
	e.splits = append(e.splits, split)
	acc["rmse"] = math.Sqrt(acc["mse"])
	return acc
}

// hostErrors returns, per batch of src, the squared errors of x·w + b against y on the host.
func hostErrors(t testing.TB, src core.Source, w []float64, b float64) [][]float64 {
	t.Helper()
	var out [][]float64
	for i := 0; i < src.Len(); i++ {
		batch := must(src.BatchAt(i))
		pred := predictHost(batch["x"], w, b)
		y := batch["y"].Value().([][]float32)
		var errs []float64
		for r := range pred {
			d := pred[r] - float64(y[r][0])
			errs = append(errs, d*d)
		}
		out = append(out, errs)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-4*(1+math.Abs(b)) }

func TestEvaluateShortFinalBatchCountsRealRows(t *testing.T) {
	val := arrays(t, 40, 16, 2, core.ArrayOptions{}) // batches of 16, 16, 8
	n := mustNew(t, &Rows{}, core.Data{"train": arrays(t, 64, 16, 1, core.ArrayOptions{DropPartial: true}), "val": val})
	uploads := n.Uploads()
	m, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if m["rows"] != 40 {
		t.Errorf("rows = %v, want 40 (the real sample count: padded rows must not reach Metrics)", m["rows"])
	}
	w, b := linearParams(t, n)
	var sse float64
	for _, errs := range hostErrors(t, val, w, b) {
		for _, e := range errs {
			sse += e
		}
	}
	if !near(m["sse"], sse) || !near(m["mse"], sse/40) {
		t.Errorf("sse %v mse %v, host %v and %v", m["sse"], m["mse"], sse, sse/40)
	}
	if len(m) != 3 {
		t.Errorf("metrics %v: want exactly rows, sse, mse", m)
	}
	// Evaluating uploads no parameter.
	if u := n.Uploads(); u.Params != uploads.Params || u.LayerState != uploads.LayerState {
		t.Errorf("Validate uploaded parameters or state: %+v -> %+v", uploads, u)
	}
	// Evaluate on another split name works the same way.
	m2, err := n.Evaluate("val")
	if err != nil || m2["rows"] != 40 {
		t.Errorf("Evaluate(val) = %v, %v", m2, err)
	}
}

func TestValLossIsTheMeanOfPerBatchLosses(t *testing.T) {
	val := arrays(t, 40, 16, 2, core.ArrayOptions{})
	n := mustNew(t, &Reg{}, core.Data{"train": arrays(t, 64, 16, 1, core.ArrayOptions{DropPartial: true}), "val": val})
	m, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	w, b := linearParams(t, n)
	var want float64
	batches := hostErrors(t, val, w, b)
	for _, errs := range batches {
		var s float64
		for _, e := range errs {
			s += e
		}
		want += s / float64(len(errs)) / float64(len(batches))
	}
	if !near(m[core.ValLoss], want) {
		t.Errorf("val_loss = %v, host mean of per-batch losses %v (short batch over its 8 real rows)", m[core.ValLoss], want)
	}
}

func TestMetricsFinalizerRunsOncePerSplit(t *testing.T) {
	e := &Finalized{}
	n := mustNew(t, e, core.Data{
		"train": arrays(t, 64, 16, 1, core.ArrayOptions{DropPartial: true}),
		"val":   arrays(t, 40, 16, 2, core.ArrayOptions{}),
		"test":  arrays(t, 20, 16, 3, core.ArrayOptions{}),
	})
	m, err := n.Evaluate("test")
	if err != nil {
		t.Fatal(err)
	}
	if m["rows"] != 20 || !near(m["rmse"], math.Sqrt(m["mse"])) {
		t.Errorf("test metrics %v: want rows 20 and rmse = sqrt(mse)", m)
	}
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(e.splits) != "[test val]" {
		t.Errorf("FinalizeMetrics called for %v, want [test val]", e.splits)
	}
}

// listSource serves a fixed list of batches.
type listSource []core.Batch

func (l listSource) Len() int                          { return len(l) }
func (l listSource) BatchAt(i int) (core.Batch, error) { return l[i], nil }

func TestEvaluateRefusesALongerLaterBatch(t *testing.T) {
	src := arrays(t, 40, 8, 2, core.ArrayOptions{})
	wide := arrays(t, 16, 16, 2, core.ArrayOptions{})
	n := mustNew(t, &Reg{}, core.Data{"val": listSource{must(src.BatchAt(0)), must(wide.BatchAt(0))}})
	_, err := n.Validate()
	wantErr(t, err, `split "val", batch 1 has 16 rows, more than batch 0's 8`, "only the final batch may differ")
}

func TestPredictAllSlicesTheShortFinalBatch(t *testing.T) {
	cache := newCache()
	n, err := core.New(&Reg{}, goOpts(cache, core.WithData(data(t, 0)))...)
	if err != nil {
		t.Fatal(err)
	}
	src := arrays(t, 40, 16, 4, core.ArrayOptions{})
	w, b := linearParams(t, n)
	var rows []int
	i := 0
	for p, err := range n.PredictAll(src) {
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != 1 || p["pred"] == nil {
			t.Fatalf("prediction %d = %v, want just pred", i, p)
		}
		got := p["pred"].Value().([][]float32)
		want := predictHost(must(src.BatchAt(i))["x"], w, b)
		rows = append(rows, len(got))
		if len(got) != len(want) {
			t.Fatalf("batch %d: %d rows, want %d", i, len(got), len(want))
		}
		for r := range want {
			if !near(float64(got[r][0]), want[r]) {
				t.Errorf("batch %d row %d: %v, host %v", i, r, got[r][0], want[r])
			}
		}
		i++
	}
	if fmt.Sprint(rows) != "[16 16 8]" {
		t.Errorf("PredictAll rows %v, want [16 16 8]", rows)
	}
	// The short batch is padded to the compiled width: one predict program.
	if s := cache.Stats(); s.Misses != 1 || s.Entries != 1 {
		t.Errorf("compile cache %+v: want one predict program", s)
	}
	// Breaking out early is fine.
	for range n.PredictAll(src) {
		break
	}
}

func TestPredict(t *testing.T) {
	n := mustNew(t, &Reg{}, data(t, 0))
	x, _ := synthetic(5, 9)
	// A prediction batch needs only Forward's fields: no "y".
	p, err := n.Predict(core.Batch{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	w, b := linearParams(t, n)
	got, want := p["pred"].Value().([][]float32), predictHost(x, w, b)
	if len(got) != 5 || !near(float64(got[4][0]), want[4]) {
		t.Errorf("Predict = %v, host %v", got, want)
	}
	// A plain map is a Batch too.
	if _, err := n.Predict(map[string]*tensors.Tensor{"x": x}); err != nil {
		t.Errorf("Predict(map): %v", err)
	}

	_, err = n.Predict(x)
	wantErr(t, err, "Predict takes a core.Batch keyed by Forward's declared fields [x]", "got *tensors.Tensor", `core.Batch{"x": t}`)
	_, err = n.Predict(arrays(t, 40, 16, 4, core.ArrayOptions{}))
	wantErr(t, err, "Predict takes one batch", "PredictAll")
	_, err = n.Predict(core.Batch{"y": x})
	wantErr(t, err, "hook Forward", `batch field "x"`)
}
