package prefetch_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

func TestBatchWidth(t *testing.T) {
	x := tensors.FromFlatDataAndDimensions(make([]float32, 12), 6, 2)
	y := tensors.FromFlatDataAndDimensions(make([]int32, 6), 6)
	if w, err := prefetch.BatchWidth(prefetch.Batch{"x": x, "y": y}); err != nil || w != 6 {
		t.Errorf("BatchWidth = %d, %v; want 6", w, err)
	}

	_, err := prefetch.BatchWidth(prefetch.Batch{})
	wantErr(t, err, "empty batch")
	_, err = prefetch.BatchWidth(prefetch.Batch{"x": x, "s": tensors.FromValue(float32(1))})
	wantErr(t, err, `batch field "s" is a scalar`, "the batch axis must lead every field")
	_, err = prefetch.BatchWidth(prefetch.Batch{"x": x, "n": nil})
	wantErr(t, err, `batch field "n" is nil`)
	// Fields are checked in name order, so the error names the same field every time.
	short := tensors.FromFlatDataAndDimensions(make([]int32, 5), 5)
	for range 5 {
		_, err = prefetch.BatchWidth(prefetch.Batch{"x": x, "y": short})
		wantErr(t, err, `batch field "y" has 5 rows on its leading axis, others have 6`)
	}
}

func TestPadRows(t *testing.T) {
	x := tensors.FromFlatDataAndDimensions([]float32{1, 10, 2, 20, 3, 30}, 3, 2)
	p := prefetch.PadRows(x, 5)
	if dims := p.Shape().Dimensions; !slices.Equal(dims, []int{5, 2}) {
		t.Fatalf("padded shape %v, want [5 2]", dims)
	}
	if got := fmt.Sprint(p.Value()); got != "[[1 10] [2 20] [3 30] [3 30] [3 30]]" {
		t.Errorf("padded rows = %s, want the last row repeated", got)
	}
	if fmt.Sprint(x.Value()) != "[[1 10] [2 20] [3 30]]" {
		t.Errorf("PadRows changed its input: %v", x.Value())
	}
	if prefetch.PadRows(x, 3) != x {
		t.Errorf("PadRows to the current width returned a new tensor; want t itself")
	}

	for _, c := range []struct {
		t     *tensors.Tensor
		width int
		want  string
	}{
		{x, 2, "cannot pad 3 rows to 2"},
		{tensors.FromFlatDataAndDimensions([]float32{}, 0, 2), 4, "cannot pad 0 rows to 4"},
		{tensors.FromValue(float32(1)), 4, "a scalar has no batch axis"},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !contains(fmt.Sprint(r), c.want) {
					t.Errorf("PadRows(%s, %d) recovered %v; want a panic containing %q", c.t.Shape(), c.width, r, c.want)
				}
			}()
			prefetch.PadRows(c.t, c.width)
		}()
	}
}

func TestSliceRows(t *testing.T) {
	x := tensors.FromFlatDataAndDimensions([]float32{1, 10, 2, 20, 3, 30}, 3, 2)
	if got := fmt.Sprint(prefetch.SliceRows(x, 1, 3).Value()); got != "[[2 20] [3 30]]" {
		t.Errorf("rows [1, 3) = %s, want [[2 20] [3 30]]", got)
	}
	if got := prefetch.SliceRows(x, 2, 2).Shape().Dimensions; !slices.Equal(got, []int{0, 2}) {
		t.Errorf("rows [2, 2) shape %v, want [0 2]", got)
	}
	if prefetch.SliceRows(x, 0, 3) != x {
		t.Errorf("all rows: want t itself")
	}
	if fmt.Sprint(x.Value()) != "[[1 10] [2 20] [3 30]]" {
		t.Errorf("SliceRows changed its input: %v", x.Value())
	}
	for _, r := range [][2]int{{-1, 1}, {2, 1}, {0, 4}} {
		func() {
			defer func() {
				if p := recover(); p == nil || !contains(fmt.Sprint(p), "prefetch.SliceRows: rows") {
					t.Errorf("rows %v: recovered %v, want a panic naming the range", r, p)
				}
			}()
			prefetch.SliceRows(x, r[0], r[1])
		}()
	}
}
