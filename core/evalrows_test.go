package core_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// With no Metrics hook, val_loss is the mean over the split's samples: 120 rows in batches of
// 50, 50 and 20, the last 20 with a target far from the model's, set the per-sample mean far
// from the plain mean of the three batch losses (which counts the 20 rows as 50).
func TestValLossWeighsAShortFinalBatchByItsRows(t *testing.T) {
	x, y := coretest.Synthetic(120, 7)
	ys := y.Value().([][]float32)
	for r := 100; r < 120; r++ {
		ys[r][0] = 10
	}
	y = tensors.FromValue(ys)
	val, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, 50, prefetch.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if val.Len() != 3 {
		t.Fatalf("val has %d batches, want 50, 50, 20", val.Len())
	}
	n := coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": val})
	m, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	w, b := linearParams(t, n)
	var sum, batchMean float64
	rows := 0
	for _, errs := range hostErrors(t, val, w, b) {
		var s float64
		for _, e := range errs {
			s += e
		}
		sum += s
		rows += len(errs)
		batchMean += s / float64(len(errs)) / 3
	}
	perSample := sum / float64(rows)
	if rows != 120 || near(perSample, batchMean) {
		t.Fatalf("host: %d rows, per-sample %v, batch mean %v: the example does not tell them apart", rows, perSample, batchMean)
	}
	if got := m[core.ValLoss]; !near(got, perSample) {
		t.Errorf("val_loss = %v, want the per-sample mean %v (the plain mean of the batch losses is %v)", got, perSample, batchMean)
	}
	// Evaluate on the same split agrees with Validate.
	if m2, err := n.Evaluate("val"); err != nil || m2[core.ValLoss] != m[core.ValLoss] {
		t.Errorf("Evaluate(val) = %v, %v; Validate gave %v", m2, err, m)
	}
}

// nilAt serves src's batches with field set to nil in batch at.
type nilAt struct {
	prefetch.Source
	at    int
	field string
}

func (s nilAt) BatchAt(i int) (prefetch.Batch, error) {
	b, err := s.Source.BatchAt(i)
	if err != nil || i != s.at {
		return b, err
	}
	c := prefetch.Batch{}
	for k, v := range b {
		c[k] = v
	}
	c[s.field] = nil
	return c, nil
}

// emptyAt serves src's batches with every field cut to 0 rows in batch at.
type emptyAt struct {
	prefetch.Source
	at int
}

func (s emptyAt) BatchAt(i int) (prefetch.Batch, error) {
	b, err := s.Source.BatchAt(i)
	if err != nil || i != s.at {
		return b, err
	}
	return prefetch.Batch{"x": zeroRows(b["x"]), "y": zeroRows(b["y"])}, nil
}

func zeroRows(t *tensors.Tensor) *tensors.Tensor {
	s := t.Shape().Clone()
	s.Dimensions[0] = 0
	return tensors.FromShape(s)
}

func TestPredictRefusesANilField(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 16))
	_, err := n.Predict(prefetch.Batch{"x": nil})
	coretest.WantErr(t, err, `Predict: batch field "x" is nil`, "give it a tensor")
	if err != nil && strings.Contains(err.Error(), "runtime error") {
		t.Errorf("error %q: want the refusal, not a recovered panic", err)
	}
}

func TestPredictRefusesZeroRows(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 16))
	_, err := n.Predict(prefetch.Batch{"x": tensors.FromShape(shapes.Make(dtypes.Float32, 0, coretest.Features))})
	coretest.WantErr(t, err, "Predict: the batch has 0 rows", "at least one row")
}

func TestPredictAllRefusesANilFieldOrZeroRows(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 16))
	for _, tc := range []struct {
		src  prefetch.Source
		want string
	}{
		{nilAt{coretest.Arrays(t, 12, 4, 3, prefetch.ArrayOptions{}), 1, "x"}, `PredictAll: batch 1: batch field "x" is nil`},
		{nilAt{coretest.Arrays(t, 12, 4, 3, prefetch.ArrayOptions{}), 0, "y"}, `PredictAll: batch 0: batch field "y" is nil`},
		{emptyAt{coretest.Arrays(t, 12, 4, 3, prefetch.ArrayOptions{}), 0}, "PredictAll: batch 0: the batch has 0 rows"},
		{emptyAt{coretest.Arrays(t, 12, 4, 3, prefetch.ArrayOptions{}), 2}, "PredictAll: batch 2: the batch has 0 rows"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			got, stopped := 0, false
			for p, err := range n.PredictAll(prefetch.NoPrefetch(tc.src)) {
				if err != nil {
					coretest.WantErr(t, err, tc.want)
					stopped = true
					break
				}
				got += must(batchWidthOf(p))
			}
			if !stopped {
				t.Errorf("PredictAll yielded %d rows and no error; want %q", got, tc.want)
			}
		})
	}
}

func batchWidthOf(p core.Prediction) (int, error) {
	for _, t := range p {
		return t.Shape().Dimensions[0], nil
	}
	return 0, fmt.Errorf("empty prediction")
}

// A prediction field whose rows have another shape or dtype than the data's is refused by name,
// both shapes given, before anything runs: the program compiled for the data's rows would fail
// inside the runtime. Prediction on rows of the data's shape still runs.
func TestPredictRefusesRowsOfAnotherShape(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 16))
	_, err := n.Predict(prefetch.Batch{"x": tensors.FromShape(shapes.Make(dtypes.Float32, 2, coretest.Features+1))})
	coretest.WantErr(t, err, `Predict: batch field "x" has rows of Float32[5]`, "take rows of Float32[4]", "pad or cut")
	_, err = n.Predict(prefetch.Batch{"x": tensors.FromShape(shapes.Make(dtypes.Float64, 2, coretest.Features))})
	coretest.WantErr(t, err, `batch field "x" has rows of Float64[4]`)
	if _, err := n.Predict(prefetch.Batch{"x": tensors.FromShape(shapes.Make(dtypes.Float32, 2, coretest.Features))}); err != nil {
		t.Fatal(err)
	}
}
