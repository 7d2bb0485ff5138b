package mnist_test

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/prefetch"
)

// TestConfusionMatrixIsTrueByPredicted: the test split's confusion matrix is the host's own count
// of (label, argmax of Predict's logits) pairs, true digit down and predicted across (a
// transposed matrix fails: its rows would not count each digit's images), and each digit's
// accuracy is its row's diagonal share.
func TestConfusionMatrixIsTrueByPredicted(t *testing.T) {
	e := tiny(t, map[string]any{"TrainLimit": 3000, "TestLimit": 600, "MaxEpochs": 1})
	n, err := core.New(e, core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints())
	if err != nil {
		t.Fatal(err)
	}
	ranOn(t, n)
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	m, err := n.Evaluate("test")
	if err != nil {
		t.Fatal(err)
	}
	got, labels, ok := e.Confusion("test")
	if !ok || !slices.Equal(labels, mnist.Digits) {
		t.Fatalf("Confusion(test) = %v, %v, %v", got, labels, ok)
	}
	dir, err := mnist.DataDir("")
	if err != nil {
		t.Fatal(err)
	}
	test, err := mnist.Load(dir, "t10k", 600)
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.Predict(prefetch.Batch{"image": test.Images})
	if err != nil {
		t.Fatal(err)
	}
	pred, err := metrics.ArgMaxRows(tensors.MustCopyFlatData[float32](p["logits"]), 10)
	if err != nil {
		t.Fatal(err)
	}
	var truth []int
	for _, l := range tensors.MustCopyFlatData[int32](test.Labels) {
		truth = append(truth, int(l))
	}
	a, err := metrics.ConfusionCounts(truth, pred, 10)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := metrics.Confusion(a)
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("confusion matrix\n%v\nwant (host count of label, prediction)\n%v", got, want)
	}
	for d, acc := range metrics.PerClassAccuracy(want) {
		if k := "accuracy_" + string(rune('0'+d)); math.Abs(m[k]-acc) > 1e-12 {
			t.Errorf("%s = %v, want %v", k, m[k], acc)
		}
	}
}
