package prefetch_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// table returns n samples whose "id" is the sample index and whose "x" row is [i, 10i].
func table(n int) map[string]*tensors.Tensor {
	ids := make([]int32, n)
	xs := make([]float32, 2*n)
	for i := range n {
		ids[i] = int32(i)
		xs[2*i], xs[2*i+1] = float32(i), float32(10*i)
	}
	return map[string]*tensors.Tensor{
		"id": tensors.FromFlatDataAndDimensions(ids, n),
		"x":  tensors.FromFlatDataAndDimensions(xs, n, 2),
	}
}

// split runs SplitArrays and returns each split's sample ids in the order served (train before
// any BeginEpoch, so in the deal's order).
func split(t *testing.T, fields map[string]*tensors.Tensor, opts prefetch.SplitOptions) (prefetch.Data, map[string][]int32) {
	t.Helper()
	data, err := prefetch.SplitArrays(fields, opts)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][]int32{}
	for name, src := range data {
		ids[name] = order(t, src.(*prefetch.ArrayBatches))
	}
	return data, ids
}

func TestSplitArraysDealsEverySampleOnce(t *testing.T) {
	data, ids := split(t, table(103), prefetch.SplitOptions{BatchSize: 8, EvalBatchSize: 5, Val: 0.2, Test: 0.1, Seed: 7})
	want := map[string]int{"val": 21, "test": 10, "train": 72} // round(103·0.2), round(103·0.1), the rest
	for name, n := range want {
		src, ok := data[name].(*prefetch.ArrayBatches)
		if !ok {
			t.Fatalf("split %q missing or not an *ArrayBatches: %T", name, data[name])
		}
		if src.Samples() != n {
			t.Errorf("split %q holds %d samples, want %d", name, src.Samples(), n)
		}
	}
	if got := data["train"].(*prefetch.ArrayBatches); got.Len() != 72/8 || !got.DropsPartial() {
		t.Errorf("train: %d batches, drops partial %v; want 9 batches of 8, dropping the partial one", got.Len(), got.DropsPartial())
	}
	if got := data["val"].(*prefetch.ArrayBatches); got.Len() != 5 || got.DropsPartial() {
		t.Errorf("val: %d batches, drops partial %v; want 5 batches of up to 5, keeping the partial one", got.Len(), got.DropsPartial())
	}
	var all []int32
	for _, name := range []string{"train", "val", "test"} {
		all = append(all, ids[name]...)
	}
	slices.Sort(all)
	for i, id := range all {
		if id != int32(i) {
			t.Fatalf("the splits together hold ids %v...: want every sample 0..102 exactly once", all[:min(len(all), i+3)])
		}
	}
	if len(all) != 103 {
		t.Fatalf("the splits together hold %d samples, want 103", len(all))
	}
	if slices.IsSorted(ids["train"]) {
		t.Errorf("train holds the samples in stored order %v: the deal did not permute", ids["train"][:8])
	}
}

func TestSplitArraysIsAFunctionOfTheSeed(t *testing.T) {
	opts := prefetch.SplitOptions{BatchSize: 4, Val: 0.25, Test: 0.25, Seed: 3}
	_, a := split(t, table(40), opts)
	_, b := split(t, table(40), opts)
	for _, name := range []string{"train", "val", "test"} {
		if !slices.Equal(a[name], b[name]) {
			t.Errorf("split %q differs between two deals with seed 3: %v and %v", name, a[name], b[name])
		}
	}
	opts.Seed = 4
	_, c := split(t, table(40), opts)
	if slices.Equal(a["val"], c["val"]) {
		t.Errorf("seeds 3 and 4 deal val the same samples %v", a["val"])
	}
}

func TestSplitArraysTrainReshufflesEachEpoch(t *testing.T) {
	data, _ := split(t, table(64), prefetch.SplitOptions{BatchSize: 8, Val: 0.125, Seed: 1})
	if _, ok := data["test"]; ok {
		t.Errorf("Test is 0 but the data hold a test split")
	}
	train := data["train"].(*prefetch.ArrayBatches)
	var epochs [][]int32
	for e := range 2 {
		if err := train.BeginEpoch(e); err != nil {
			t.Fatal(err)
		}
		epochs = append(epochs, order(t, train))
	}
	if slices.Equal(epochs[0], epochs[1]) {
		t.Errorf("train served epochs 0 and 1 in the same order %v", epochs[0])
	}
	e0, e1 := slices.Clone(epochs[0]), slices.Clone(epochs[1])
	slices.Sort(e0)
	slices.Sort(e1)
	if !slices.Equal(e0, e1) {
		t.Errorf("train served different samples in epochs 0 and 1")
	}
}

// The arrays are copied: writing the caller's tensors afterwards changes no split.
func TestSplitArraysCopiesTheArrays(t *testing.T) {
	fields := table(20)
	data, before := split(t, fields, prefetch.SplitOptions{BatchSize: 2, Val: 0.5})
	fields["id"].MutableFlatData(func(flat any) {
		for i := range flat.([]int32) {
			flat.([]int32)[i] = -1
		}
	})
	after := order(t, data["val"].(*prefetch.ArrayBatches))
	if !slices.Equal(before["val"], after) {
		t.Errorf("val changed from %v to %v when the caller wrote its arrays", before["val"], after)
	}
}

func TestSplitArraysRefusesNamingTheOption(t *testing.T) {
	ok := prefetch.SplitOptions{BatchSize: 4, Val: 0.1, Test: 0.1}
	with := func(f func(*prefetch.SplitOptions)) prefetch.SplitOptions { o := ok; f(&o); return o }
	scalar := map[string]*tensors.Tensor{"x": tensors.FromValue(float32(1))}
	ragged := table(10)
	ragged["y"] = tensors.FromFlatDataAndDimensions(make([]float32, 9), 9)
	for _, c := range []struct {
		name   string
		fields map[string]*tensors.Tensor
		opts   prefetch.SplitOptions
		want   string
	}{
		{"batch size 0", table(50), with(func(o *prefetch.SplitOptions) { o.BatchSize = 0 }), "SplitOptions.BatchSize is 0"},
		{"eval batch size -1", table(50), with(func(o *prefetch.SplitOptions) { o.EvalBatchSize = -1 }), "SplitOptions.EvalBatchSize is -1"},
		{"val 1", table(50), with(func(o *prefetch.SplitOptions) { o.Val = 1 }), "SplitOptions.Val is 1"},
		{"test negative", table(50), with(func(o *prefetch.SplitOptions) { o.Test = -0.1 }), "SplitOptions.Test is -0.1"},
		{"val NaN", table(50), with(func(o *prefetch.SplitOptions) { o.Val = math.NaN() }), "SplitOptions.Val is NaN"},
		{"test deals none", table(50), with(func(o *prefetch.SplitOptions) { o.Test = 0.001 }), `deals none to "test"`},
		{"no train batch", table(50), with(func(o *prefetch.SplitOptions) { o.Val, o.Test = 0.5, 0.45 }), "leave train 2 of 50 samples"},
		{"no fields", nil, ok, "no fields"},
		{"scalar field", scalar, ok, `field "x" is a scalar`},
		{"nil field", map[string]*tensors.Tensor{"x": nil}, ok, `field "x" is nil`},
		{"fields disagree", ragged, ok, `field "y" has 9 samples`},
		{"no samples", table(0), ok, "hold no samples"},
	} {
		_, err := prefetch.SplitArrays(c.fields, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
