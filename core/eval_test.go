package core_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/prefetch"
)

// Rows adds a Metrics hook to Reg: "rows" is a sum with no count whose value is the number of
// rows Metrics was shown, "sse" the summed squared error, "mse" the same divided by the rows.
type Rows struct{ coretest.Base }

func (*Rows) Metrics(out core.Outputs, in coretest.Tgt) map[string]hooks.Metric {
	pred := out["pred"]
	g := pred.Graph()
	rows := pred.Shape().Dimensions[0]
	if d := in.Y.Shape().Dimensions[0]; d != rows {
		panic(fmt.Sprintf("Metrics saw %d prediction rows but %d target rows", rows, d))
	}
	sse := graph.ReduceAllSum(graph.Square(graph.Sub(pred, in.Y)))
	n := graph.Scalar(g, dtypes.Float32, float64(rows))
	return map[string]hooks.Metric{
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

func (e *Finalized) FinalizeMetrics(acc metrics.Result, split string) map[string]float64 {
	e.splits = append(e.splits, split)
	acc.Scalars["rmse"] = math.Sqrt(acc.Scalars["mse"])
	return acc.Scalars
}

func (e *Finalized) FinalizedMetricNames() []string { return []string{"rows", "sse", "mse", "rmse"} }

// hostErrors returns, per batch of src, the squared errors of x·w + b against y on the host.
func hostErrors(t testing.TB, src prefetch.Source, w []float64, b float64) [][]float64 {
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
	val := coretest.Arrays(t, 40, 16, 2, prefetch.ArrayOptions{}) // batches of 16, 16, 8
	n := coretest.MustNew(t, &Rows{}, prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": val})
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

func TestValLossIsTheMeanOverSamples(t *testing.T) {
	val := coretest.Arrays(t, 40, 16, 2, prefetch.ArrayOptions{})
	n := coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": val})
	m, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if want := sampleMeanLoss(t, n, val, val.Len()); !near(m[core.ValLoss], want) {
		t.Errorf("val_loss = %v, host mean over the 40 samples %v (the short batch weighs its 8 real rows)", m[core.ValLoss], want)
	}
}

func TestMetricsFinalizerRunsOncePerSplit(t *testing.T) {
	e := &Finalized{}
	n := coretest.MustNew(t, e, prefetch.Data{
		"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}),
		"val":   coretest.Arrays(t, 40, 16, 2, prefetch.ArrayOptions{}),
		"test":  coretest.Arrays(t, 20, 16, 3, prefetch.ArrayOptions{}),
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
type listSource []prefetch.Batch

func (l listSource) Len() int                              { return len(l) }
func (l listSource) BatchAt(i int) (prefetch.Batch, error) { return l[i], nil }

func TestEvaluateRefusesALongerLaterBatch(t *testing.T) {
	src := coretest.Arrays(t, 40, 8, 2, prefetch.ArrayOptions{})
	wide := coretest.Arrays(t, 16, 16, 2, prefetch.ArrayOptions{})
	n := coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"val": listSource{must(src.BatchAt(0)), must(wide.BatchAt(0))}})
	_, err := n.Validate()
	coretest.WantErr(t, err, `split "val", batch 1 has 16 rows, more than batch 0's 8`, "only the final batch may differ")
}

func TestPredictAllSlicesTheShortFinalBatch(t *testing.T) {
	cache := newCache()
	n, err := core.New(&coretest.Reg{}, coretest.GoOpts(cache, core.WithData(coretest.Data(t, 0)))...)
	if err != nil {
		t.Fatal(err)
	}
	src := coretest.Arrays(t, 40, 16, 4, prefetch.ArrayOptions{})
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
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0))
	x, _ := coretest.Synthetic(5, 9)
	// A prediction batch needs only Forward's fields: no "y".
	p, err := n.Predict(prefetch.Batch{"x": x})
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
	coretest.WantErr(t, err, "Predict takes a prefetch.Batch keyed by Forward's declared fields [x]", "got *tensors.Tensor", `prefetch.Batch{"x": t}`)
	_, err = n.Predict(coretest.Arrays(t, 40, 16, 4, prefetch.ArrayOptions{}))
	coretest.WantErr(t, err, "Predict takes one batch", "PredictAll")
	_, err = n.Predict(prefetch.Batch{"y": x})
	coretest.WantErr(t, err, "hook Forward", `batch field "x"`)
}

// hookSource calls fire once, from BatchAt(at), after arm: fed inline (prefetch.NoPrefetch), that is
// while the loop takes batch at, so a stop it requests lands at the boundary after that batch.
type hookSource struct {
	prefetch.Source
	at    int
	armed bool
	fire  func()
}

func (h *hookSource) BatchAt(i int) (prefetch.Batch, error) {
	if h.armed && i == h.at {
		h.armed = false
		h.fire()
	}
	return h.Source.BatchAt(i)
}

// sampleMeanLoss is val_loss over batches [0, k) of src: the mean squared error over their
// samples, on the host.
func sampleMeanLoss(t testing.TB, n *core.Nitro, src prefetch.Source, k int) float64 {
	t.Helper()
	w, b := linearParams(t, n)
	var sum float64
	rows := 0
	for _, errs := range hostErrors(t, src, w, b)[:k] {
		for _, e := range errs {
			sum += e
		}
		rows += len(errs)
	}
	return sum / float64(rows)
}

// An Interrupt during Validate stops the split at the next batch boundary: the partial metrics
// come back with a *PartialError naming how many batches ran, and they are exactly the metrics of
// those batches. The interrupt is consumed: the next Validate runs in full and a Train is not
// stopped by it.
func TestInterruptStopsValidateAtABatchBoundary(t *testing.T) {
	val := coretest.Arrays(t, 88, 16, 2, prefetch.ArrayOptions{}) // 6 batches: five of 16, one of 8
	hs := &hookSource{Source: val, at: 2}
	n := coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": prefetch.NoPrefetch(hs)},
		core.WithMaxEpochs(2))
	hs.fire, hs.armed = n.Interrupt, true
	before := n.ProgressCounter()
	m, err := n.Validate()
	var pe *core.PartialError
	if !errors.As(err, &pe) || !errors.Is(err, core.ErrInterrupted) {
		t.Fatalf("Validate after an Interrupt at batch 2: %v, %v; want a *core.PartialError matching ErrInterrupted", m, err)
	}
	coretest.WantErr(t, err, `split "val": stopped (requested) after 3 of 6 batches: the metrics are partial`)
	if pe.Split != "val" || pe.Batches != 3 || pe.Total != 6 || pe.Reason != core.StopRequested {
		t.Errorf("PartialError %+v: want split val, 3 of 6 batches, reason requested", pe)
	}
	if got := n.ProgressCounter() - before; got != 3 {
		t.Errorf("the progress counter moved %d, want 3 (one per batch evaluated)", got)
	}
	if fmt.Sprint(m) != fmt.Sprint(pe.Metrics) || len(m) != 1 {
		t.Errorf("Validate returned %v, the error holds %v: want the same partial val_loss", m, pe.Metrics)
	}
	partial, full := sampleMeanLoss(t, n, val, 3), sampleMeanLoss(t, n, val, 6)
	if !near(m[core.ValLoss], partial) || near(m[core.ValLoss], full) {
		t.Errorf("partial val_loss %v: want the mean over the samples of batches 0..2 %v, not over the split %v", m[core.ValLoss], partial, full)
	}

	m, err = n.Validate()
	if err != nil || !near(m[core.ValLoss], full) {
		t.Fatalf("the next Validate: %v, %v; want the whole split's val_loss %v (the interrupt was consumed)", m, err, full)
	}
	if err := n.Train(); err != nil || n.StopReason() != core.StopCompleted || n.Epoch() != 2 {
		t.Errorf("Train after the interrupted Validate: %v, stopped %q after %d epochs; want completed after 2", err, n.StopReason(), n.Epoch())
	}
}

// A partial split is finalized like a whole one, over the batches it ran: sums with a count are
// divided, sums without one are summed, and the finalizer sees the partial sums. An Interrupt
// made before Evaluate starts stops it before batch 0 with no metrics.
func TestInterruptedEvaluateFinalizesThePartialSums(t *testing.T) {
	test := coretest.Arrays(t, 80, 16, 3, prefetch.ArrayOptions{})
	hs := &hookSource{Source: test, at: 1}
	n := coretest.MustNew(t, &Finalized{}, prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "test": prefetch.NoPrefetch(hs)})
	hs.fire, hs.armed = n.Interrupt, true
	m, err := n.Evaluate("test")
	var pe *core.PartialError
	if !errors.As(err, &pe) || pe.Batches != 2 || pe.Total != 5 {
		t.Fatalf("Evaluate(test): %v, %v; want a PartialError after 2 of 5 batches", m, err)
	}
	w, b := linearParams(t, n)
	var sse float64
	for _, errs := range hostErrors(t, test, w, b)[:2] {
		for _, e := range errs {
			sse += e
		}
	}
	if m["rows"] != 32 || !near(m["sse"], sse) || !near(m["mse"], sse/32) || !near(m["rmse"], math.Sqrt(sse/32)) {
		t.Errorf("partial metrics %v: want rows 32, sse %v, mse %v and rmse from the finalizer", m, sse, sse/32)
	}

	n.Interrupt()
	m, err = n.Evaluate("test")
	if !errors.As(err, &pe) || pe.Batches != 0 || pe.Total != 5 || len(m) != 0 {
		t.Errorf("Evaluate after an Interrupt made before it: %v, %v; want no metrics and 0 of 5 batches", m, err)
	}
}

// An Interrupt during Train's validation does not cut that validation short: the epoch is
// validated in full, then the run stops with reason requested, and the stop is not left behind
// for a later Validate.
func TestInterruptDuringTrainValidationValidatesInFull(t *testing.T) {
	val := coretest.Arrays(t, 88, 16, 2, prefetch.ArrayOptions{})
	hs := &hookSource{Source: val, at: 1}
	n := coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": prefetch.NoPrefetch(hs)},
		core.WithMaxEpochs(3))
	hs.fire, hs.armed = n.Interrupt, true
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if n.StopReason() != core.StopRequested || n.Epoch() != 1 || hs.armed {
		t.Fatalf("stopped %q after %d epochs (interrupt fired: %v); want requested after 1", n.StopReason(), n.Epoch(), !hs.armed)
	}
	m, err := n.Validate()
	if err != nil {
		t.Fatalf("Validate after the interrupted Train: %v (Train must consume its interrupt)", err)
	}
	if got := n.History()[0].Val[core.ValLoss]; got != m[core.ValLoss] {
		t.Errorf("epoch 1 val_loss %v, a full Validate of the same weights %v: the epoch's validation was cut short", got, m[core.ValLoss])
	}
}

// An Interrupt during PredictAll stops it at the next batch boundary with an error matching
// ErrInterrupted that counts the batches predicted; the interrupt is consumed, so the next
// PredictAll runs in full.
func TestInterruptedPredictAllStopsAtABatchBoundary(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32))
	src := coretest.Arrays(t, 80, 16, 3, prefetch.ArrayOptions{})
	var got int
	var last error
	for p, err := range n.PredictAll(src) {
		if err != nil {
			last = err
			break
		}
		if got++; got == 2 {
			n.Interrupt()
		}
		if len(p) == 0 {
			t.Fatalf("prediction %d is empty", got)
		}
	}
	if got != 2 || !errors.Is(last, core.ErrInterrupted) || !strings.Contains(last.Error(), "after 2 of 5 batches") {
		t.Fatalf("PredictAll interrupted after batch 2: %d predictions, error %v; want 2 and an ErrInterrupted after 2 of 5 batches", got, last)
	}
	got = 0
	for _, err := range n.PredictAll(src) {
		if err != nil {
			t.Fatalf("PredictAll after the interrupted one: %v (the interrupt must be consumed)", err)
		}
		got++
	}
	if got != 5 {
		t.Errorf("PredictAll after the interrupted one: %d batches, want 5", got)
	}
}
