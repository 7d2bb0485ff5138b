package metrics_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/metrics"
)

func TestAccumulatorCombinesEachKind(t *testing.T) {
	var a metrics.Accumulator
	cm0, _ := metrics.ConfusionCounts([]int{0, 1, 1}, []int{0, 1, 0}, 2)
	cm1, _ := metrics.ConfusionCounts([]int{1, 0}, []int{1, 1}, 2)
	for _, b := range []map[string]metrics.Metric{
		{"acc": metrics.Mean(2, 3), "errors": metrics.Total(1), "cm": metrics.Summed(cm0), "score": metrics.Collected([]float64{0.1, 0.9})},
		{"acc": metrics.Mean(1, 2), "errors": metrics.Total(1), "cm": metrics.Summed(cm1), "score": metrics.Collected([]float64{0.5})},
	} {
		if err := a.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	r := a.Result()
	if got := r.Scalars["acc"]; got != 3.0/5 {
		t.Errorf("acc = %v, want 3/5 (sums over counts, not a mean of batch means)", got)
	}
	if got := r.Scalars["errors"]; got != 2 {
		t.Errorf("errors = %v, want 2 (summed, not divided)", got)
	}
	m, err := metrics.Confusion(r.Arrays["cm"])
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int{{1, 1}, {1, 2}}; !slices.EqualFunc(m, want, slices.Equal) {
		t.Errorf("confusion = %v, want %v", m, want)
	}
	if got := r.Collected["score"]; !slices.Equal(got, []float64{0.1, 0.9, 0.5}) {
		t.Errorf("collected = %v, want the batches' values in order", got)
	}
	if got := r.Names(); !slices.Equal(got, []string{"acc", "cm", "errors", "score"}) {
		t.Errorf("Names = %v", got)
	}
	if a.Batches() != 2 {
		t.Errorf("Batches = %d, want 2", a.Batches())
	}
	// The result is a copy: a caller changing it does not change the accumulator.
	r.Arrays["cm"].Data[0] = 100
	if a.Result().Arrays["cm"].Data[0] != 1 {
		t.Error("Result shares its arrays with the accumulator")
	}
}

func TestAccumulatorRefusesAChangeNamingTheMetric(t *testing.T) {
	var a metrics.Accumulator
	cm, _ := metrics.ConfusionCounts([]int{0}, []int{0}, 2)
	if err := a.Add(map[string]metrics.Metric{"cm": metrics.Summed(cm), "acc": metrics.Mean(1, 1)}); err != nil {
		t.Fatal(err)
	}
	big, _ := metrics.ConfusionCounts([]int{0}, []int{0}, 3)
	for _, tc := range []struct {
		batch map[string]metrics.Metric
		want  string
	}{
		{map[string]metrics.Metric{"cm": metrics.Summed(big), "acc": metrics.Mean(1, 1)}, `metric "cm", batch 1: array shape [3 3], earlier batches [2 2]`},
		{map[string]metrics.Metric{"acc": metrics.Total(1)}, `metric "acc", batch 1: a total, earlier batches a mean`},
		{map[string]metrics.Metric{"acc": metrics.Mean(1, -1)}, `metric "acc", batch 1: a Mean's count is -1`},
		{map[string]metrics.Metric{"cm": metrics.Summed(metrics.Array{Shape: []int{2, 2}, Data: []float64{1}})}, `metric "cm", batch 1: metrics: array shape [2 2] holds 4 values, got 1`},
	} {
		err := a.Add(tc.batch)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add: %v, want an error containing %q", err, tc.want)
		}
	}
	if got := a.Result().Scalars["acc"]; got != 1 || a.Batches() != 1 {
		t.Errorf("after refusals acc = %v, batches %d: a refused batch must add nothing", got, a.Batches())
	}
}

func TestConfusionHelpers(t *testing.T) {
	if _, err := metrics.ConfusionCounts([]int{0, 3}, []int{0, 1}, 3); err == nil || !strings.Contains(err.Error(), "row 1 has true class 3") {
		t.Errorf("label out of range: %v", err)
	}
	m := [][]int{{3, 1, 0}, {0, 0, 0}, {1, 1, 2}}
	acc := metrics.PerClassAccuracy(m)
	if acc[0] != 0.75 || !math.IsNaN(acc[1]) || acc[2] != 0.5 {
		t.Errorf("PerClassAccuracy = %v, want [0.75 NaN 0.5]", acc)
	}
	n := metrics.Normalize(m)
	if n[0][0] != 0.75 || n[0][1] != 0.25 || n[1][0] != 0 || n[2][2] != 0.5 {
		t.Errorf("Normalize = %v", n)
	}
	if _, err := metrics.Confusion(metrics.Array{Shape: []int{1, 1}, Data: []float64{0.5}}); err == nil {
		t.Error("Confusion accepted a fractional count")
	}
	if _, err := metrics.Confusion(metrics.Array{Shape: []int{2}, Data: []float64{1, 2}}); err == nil {
		t.Error("Confusion accepted a 1-D array")
	}
	p, err := metrics.ArgMaxRows([]float32{0, 2, 1, 5, 5, 0}, 3)
	if err != nil || !slices.Equal(p, []int{1, 0}) {
		t.Errorf("ArgMaxRows = %v, %v; want [1 0] (first of equal maxima)", p, err)
	}
	if _, err := metrics.ArgMaxRows([]float64{1, 2, 3}, 2); err == nil {
		t.Error("ArgMaxRows accepted 3 values in rows of 2")
	}
}

func TestAUC(t *testing.T) {
	for _, tc := range []struct {
		scores []float64
		pos    []bool
		want   float64
	}{
		{[]float64{0.1, 0.4, 0.35, 0.8}, []bool{false, false, true, true}, 0.75}, // sklearn's roc_auc_score example
		{[]float64{1, 2, 3, 4}, []bool{false, false, true, true}, 1},
		{[]float64{4, 3, 2, 1}, []bool{false, false, true, true}, 0},
		{[]float64{0.5, 0.5, 0.5}, []bool{true, false, false}, 0.5}, // ties count one half
		{[]float64{0.2, 0.5, 0.5, 0.9}, []bool{false, true, false, true}, 0.875},
	} {
		got, err := metrics.AUC(tc.scores, tc.pos)
		if err != nil || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("AUC(%v, %v) = %v, %v; want %v", tc.scores, tc.pos, got, err, tc.want)
		}
	}
	if _, err := metrics.AUC([]float64{1, 2}, []bool{true, true}); err == nil || !strings.Contains(err.Error(), "0 negatives") {
		t.Errorf("no negatives: %v", err)
	}
	if _, err := metrics.AUC([]float64{math.NaN(), 2}, []bool{true, false}); err == nil {
		t.Error("AUC ranked a NaN")
	}
}

// pairSum is two processes' sum functions for Reduce: each sends its buffer and adds the other's.
func pairSum() (func([]float64) error, func([]float64) error) {
	a, b := make(chan []float64, 1), make(chan []float64, 1)
	f := func(mine, theirs chan []float64) func([]float64) error {
		return func(buf []float64) error {
			mine <- slices.Clone(buf)
			o := <-theirs
			for i := range buf {
				buf[i] += o[i]
			}
			return nil
		}
	}
	return f(a, b), f(b, a)
}

// Reduce over two processes gives, on each, what one accumulator of both processes' batches
// gives; a different layout and a Collected metric are refused.
func TestAccumulatorReduce(t *testing.T) {
	batch := func(k float64) map[string]metrics.Metric {
		a, _ := metrics.NewArray([]float64{k, 2 * k}, 2)
		return map[string]metrics.Metric{"acc": metrics.Mean(k, 10), "n": metrics.Total(k), "conf": metrics.Summed(a)}
	}
	var p0, p1, both metrics.Accumulator
	for _, b := range []map[string]metrics.Metric{batch(1), batch(2)} {
		_ = p0.Add(b)
		_ = both.Add(b)
	}
	_ = p1.Add(batch(5))
	_ = both.Add(batch(5))
	s0, s1 := pairSum()
	errs := make(chan error, 1)
	go func() { errs <- p1.Reduce(2, s1) }()
	if err := errors.Join(p0.Reduce(2, s0), <-errs); err != nil {
		t.Fatal(err)
	}
	want := both.Result()
	for _, acc := range []*metrics.Accumulator{&p0, &p1} {
		got := acc.Result()
		if got.Scalars["acc"] != want.Scalars["acc"] || got.Scalars["n"] != want.Scalars["n"] ||
			!slices.Equal(got.Arrays["conf"].Data, want.Arrays["conf"].Data) || acc.Batches() != 3 {
			t.Errorf("reduced %+v (%d batches), want %+v (3)", got, acc.Batches(), want)
		}
	}
	var q, r metrics.Accumulator
	_ = q.Add(map[string]metrics.Metric{"acc": metrics.Mean(1, 1)})
	_ = r.Add(map[string]metrics.Metric{"loss": metrics.Mean(1, 1)})
	s0, s1 = pairSum()
	go func() { errs <- r.Reduce(2, s1) }()
	err := q.Reduce(2, s0)
	for _, err := range []error{err, <-errs} {
		if err == nil || !strings.Contains(err.Error(), "accumulated different metrics") {
			t.Errorf("layout mismatch: %v", err)
		}
	}
	var c metrics.Accumulator
	_ = c.Add(map[string]metrics.Metric{"scores": metrics.Collected([]float64{1})})
	if err := c.Reduce(2, func([]float64) error { return nil }); err == nil || !strings.Contains(err.Error(), `metric "scores" is Collected`) {
		t.Errorf("Collected: %v", err)
	}
}
