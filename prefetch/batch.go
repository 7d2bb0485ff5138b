package prefetch

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// BatchWidth returns a batch's leading-axis length, checking every field agrees. Fields are
// checked in name order, so the error for a given batch is always the same.
func BatchWidth(b Batch) (int, error) {
	w := -1
	for _, name := range slices.Sorted(maps.Keys(b)) {
		t := b[name]
		if t == nil {
			return 0, fmt.Errorf("batch field %q is nil: every field needs a tensor with the batch on its leading axis (leave the key out instead)", name)
		}
		if t.Rank() < 1 {
			return 0, fmt.Errorf("batch field %q is a scalar: the batch axis must lead every field", name)
		}
		d := t.Shape().Dimensions[0]
		if w >= 0 && d != w {
			return 0, fmt.Errorf("batch field %q has %d rows on its leading axis, others have %d", name, d, w)
		}
		w = d
	}
	if w < 0 {
		return 0, fmt.Errorf("empty batch")
	}
	return w, nil
}

// PadRows returns t with its leading axis grown to width by repeating the last row, in a new
// tensor; when t already has width rows it returns t itself. Padded rows are never seen by
// metrics or returned outputs: the programs slice them away.
//
// t must be a live tensor with at least one row and at most width rows (comparing BatchWidth with
// the compiled width checks this); PadRows panics otherwise rather than drop samples or serve
// zeros.
func PadRows(t *tensors.Tensor, width int) *tensors.Tensor {
	dims := t.Shape().Dimensions
	if len(dims) < 1 {
		panic(fmt.Sprintf("prefetch.PadRows: a scalar has no batch axis to pad (shape %s)", t.Shape()))
	}
	n := dims[0]
	if n == width {
		return t
	}
	if n < 1 || n > width {
		panic(fmt.Sprintf("prefetch.PadRows: cannot pad %d rows to %d: need 1 <= rows <= width", n, width))
	}
	rb := int(t.Shape().Memory()) / n
	out := tensors.FromShape(shapes.Make(t.DType(), append([]int{width}, dims[1:]...)...))
	var inner error
	err := t.ConstBytes(func(in []byte) {
		inner = out.MutableBytes(func(dst []byte) {
			copy(dst, in)
			for r := n; r < width; r++ {
				copy(dst[r*rb:(r+1)*rb], in[(n-1)*rb:n*rb])
			}
		})
	})
	if err == nil {
		err = inner
	}
	if err != nil {
		panic(fmt.Sprintf("prefetch.PadRows: %v", err))
	}
	return out
}

// SliceRows returns rows [lo, hi) of t's leading axis in a new tensor: a share of a batch (an
// evaluation batch split over processes by samples). It panics on a scalar or a range outside
// [0, rows], as PadRows does, rather than serve another sample's rows.
func SliceRows(t *tensors.Tensor, lo, hi int) *tensors.Tensor {
	dims := t.Shape().Dimensions
	if len(dims) < 1 {
		panic(fmt.Sprintf("prefetch.SliceRows: a scalar has no batch axis to slice (shape %s)", t.Shape()))
	}
	n := dims[0]
	if lo < 0 || hi < lo || hi > n {
		panic(fmt.Sprintf("prefetch.SliceRows: rows [%d, %d) of %d", lo, hi, n))
	}
	if lo == 0 && hi == n {
		return t
	}
	out := tensors.FromShape(shapes.Make(t.DType(), append([]int{hi - lo}, dims[1:]...)...))
	if n == 0 || hi == lo {
		return out
	}
	rb := int(t.Shape().Memory()) / n
	var inner error
	err := t.ConstBytes(func(in []byte) {
		inner = out.MutableBytes(func(dst []byte) { copy(dst, in[lo*rb:hi*rb]) })
	})
	if err == nil {
		err = inner
	}
	if err != nil {
		panic(fmt.Sprintf("prefetch.SliceRows: %v", err))
	}
	return out
}
