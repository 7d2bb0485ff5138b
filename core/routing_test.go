package core_test

import (
	"fmt"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// noPanic runs fn, turning a panic into a test error: a verb must return errors, never panic.
func noPanic(t *testing.T, what string, fn func() error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	if err := fn(); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// withW is the synthetic task plus an all-zero "w" field (OptionalW's optional input).
func withW(t testing.TB, n int, opts prefetch.ArrayOptions) *prefetch.ArrayBatches {
	t.Helper()
	x, y := coretest.Synthetic(n, 1)
	w := tensors.FromFlatDataAndDimensions(make([]float32, n*coretest.Features), n, coretest.Features)
	a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y, "w": w}, 16, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// An optional batch field may be present in one split and absent from another: each split (and
// each Predict batch) is routed by the fields its own batches carry, so a split without the field
// compiles a program that does not take it (routed by the union of all splits' fields, the
// program would wait for a "w" the split never sends).
func TestOptionalFieldPresentInOnlySomeSplits(t *testing.T) {
	t.Run("missing in train, present in val", func(t *testing.T) {
		n := coretest.MustNew(t, &OptionalW{}, prefetch.Data{
			"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}),
			"val":   withW(t, 32, prefetch.ArrayOptions{}),
		})
		noPanic(t, "Validate", func() error { _, err := n.Validate(); return err })
		noPanic(t, "Train", n.Train)
	})
	t.Run("present in train, missing in val and in a Predict batch", func(t *testing.T) {
		n := coretest.MustNew(t, &OptionalW{}, prefetch.Data{
			"train": withW(t, 64, prefetch.ArrayOptions{DropPartial: true}),
			"val":   coretest.Arrays(t, 32, 16, 2, prefetch.ArrayOptions{}),
		})
		noPanic(t, "Train", n.Train)
		noPanic(t, "Validate", func() error { _, err := n.Validate(); return err })
		x, _ := coretest.Synthetic(16, 3)
		noPanic(t, "Predict without the optional field", func() error {
			p, err := n.Predict(prefetch.Batch{"x": x})
			if err == nil && fmt.Sprint(p["pred"].Shape().Dimensions) != "[16 1]" {
				return fmt.Errorf("pred shape %v", p["pred"].Shape())
			}
			return err
		})
	})
}
