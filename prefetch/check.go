package prefetch

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// SequentialSource is a Source that can also walk its current epoch in order on its own, without
// BatchAt: the reference CheckBatchAt holds BatchAt to.
//
// Sequential yields the batches of the current epoch's plan (the one the last BeginEpoch set)
// in order, Len() of them, as fresh tensors, and stops after yielding an error. It must find its
// batch boundaries by its own arithmetic (a running sample offset advanced by each batch's
// width, say), not by calling BatchAt or sharing its index-to-rows code: a mistake the two
// share is one CheckBatchAt cannot see. Like BatchAt it must not overlap BeginEpoch.
type SequentialSource interface {
	Source
	Sequential() iter.Seq2[Batch, error]
}

var _ SequentialSource = (*ArrayBatches)(nil)

// CheckBatchAt asserts that src's BatchAt agrees, batch for batch, with the source's own
// sequential iteration of the current epoch: the same number of batches (Len), and for each
// index the same field names, dtypes and shapes, and, when values is true, the same contents
// byte for byte. It checks the epoch as it stands: to check a shuffled epoch, call BeginEpoch
// first. Declarations (Prefetch, NoPrefetch) are looked through.
//
// The sequential iteration is Sequential when the source is a SequentialSource. That is what
// catches the classic sample-offset bug, a BatchAt(i) that reads rows i..i+b instead of
// i*b..(i+1)*b. A source without Sequential has no independent reference, and is held to what
// can be checked without one: BatchAt(i) read twice gives equal batches (contents when values)
// in fresh tensors, the fields agree on the batch width, and every batch has the first batch's
// fields, dtypes and per-sample shapes, and its width, except a narrower final batch. Give such
// a source a Sequential to have it checked properly.
//
// BatchAt and Sequential run on the caller's goroutine, one batch at a time; a panic in either is
// returned as an error. The first disagreement is returned, naming the batch index and the
// field; nil means they agree.
func CheckBatchAt(src Source, values bool) error {
	if src == nil {
		return fmt.Errorf("prefetch: CheckBatchAt of a nil source")
	}
	s := base(src)
	n := s.Len()
	seq, ok := s.(SequentialSource)
	if !ok {
		return checkRepeatable(s, n, values)
	}
	i := 0
	var walkErr error
	func() {
		defer func() {
			if r := recover(); r != nil {
				walkErr = fmt.Errorf("prefetch: CheckBatchAt: batch %d: the sequential walk panicked: %v", i, r)
			}
		}()
		for want, err := range seq.Sequential() {
			if err != nil {
				walkErr = fmt.Errorf("prefetch: CheckBatchAt: batch %d: the sequential walk failed: %w", i, err)
				return
			}
			if i >= n {
				walkErr = fmt.Errorf("prefetch: CheckBatchAt: the sequential walk yields more batches than Len() = %d", n)
				return
			}
			got, err := safeBatchAt(s, i)
			if err != nil {
				walkErr = fmt.Errorf("prefetch: CheckBatchAt: batch %d: %w", i, err)
				return
			}
			if err := compareBatches(i, got, want, values, "BatchAt", "the sequential walk"); err != nil {
				walkErr = err
				return
			}
			i++
		}
	}()
	if walkErr != nil {
		return walkErr
	}
	if i != n {
		return fmt.Errorf("prefetch: CheckBatchAt: the sequential walk yields %d batches, Len() says %d", i, n)
	}
	return nil
}

// checkRepeatable is CheckBatchAt for a source with no sequential walk of its own.
func checkRepeatable(s Source, n int, values bool) error {
	var first Batch
	firstWidth := 0
	for i := range n {
		a, err := safeBatchAt(s, i)
		if err != nil {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: %w", i, err)
		}
		b, err := safeBatchAt(s, i)
		if err != nil {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d (read again): %w", i, err)
		}
		if err := compareBatches(i, a, b, values, "BatchAt", "BatchAt read again"); err != nil {
			return err
		}
		w, err := BatchWidth(a)
		if err != nil {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: %w", i, err)
		}
		if first == nil {
			first, firstWidth = a, w
			continue
		}
		if err := sameLayout(i, a, first); err != nil {
			return err
		}
		if w > firstWidth || (w < firstWidth && i != n-1) {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d has %d rows, batch 0 has %d: only the final batch may be narrower", i, w, firstWidth)
		}
	}
	return nil
}

// safeBatchAt is s.BatchAt(i) with a panic turned into an error.
func safeBatchAt(s Source, i int) (b Batch, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("BatchAt panicked: %v", r)
		}
	}()
	b, err = s.BatchAt(i)
	if err != nil {
		return nil, fmt.Errorf("BatchAt: %w", err)
	}
	return b, nil
}

// compareBatches reports the first way got (from gotName) and want (from wantName) differ.
func compareBatches(i int, got, want Batch, values bool, gotName, wantName string) error {
	names := map[string]bool{}
	for name := range got {
		names[name] = true
	}
	for name := range want {
		names[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		g, w := got[name], want[name]
		switch {
		case g == nil && w == nil:
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q: a nil tensor in both %s and %s", i, name, gotName, wantName)
		case g == nil:
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q: in %s, missing (or nil) in %s", i, name, wantName, gotName)
		case w == nil:
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q: in %s, missing (or nil) in %s", i, name, gotName, wantName)
		case g == w:
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q: %s and %s returned the same tensor: every batch must be fresh tensors the caller owns", i, name, gotName, wantName)
		}
		if g.DType() != w.DType() {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q: %s has dtype %s, %s %s", i, name, gotName, g.DType(), wantName, w.DType())
		}
		if !slices.Equal(g.Shape().Dimensions, w.Shape().Dimensions) {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q: %s has shape %v, %s %v", i, name, gotName, g.Shape().Dimensions, wantName, w.Shape().Dimensions)
		}
		if !values {
			continue
		}
		row, err := firstDifferentRow(g, w)
		if err != nil {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q: reading the contents: %w", i, name, err)
		}
		if row >= 0 {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q: row %d differs between %s and %s (a sample-offset bug reads rows i..i+b instead of i*b..(i+1)*b)", i, name, row, gotName, wantName)
		}
	}
	return nil
}

// firstDifferentRow compares two tensors of one shape byte for byte and returns the first row
// (leading-axis index) where they differ, or -1.
func firstDifferentRow(a, b *tensors.Tensor) (int, error) {
	if a.Shape().Size() == 0 {
		return -1, nil
	}
	row := -1
	var inner error
	err := a.ConstBytes(func(x []byte) {
		inner = b.ConstBytes(func(y []byte) {
			if bytes.Equal(x, y) {
				return
			}
			k := 0
			for k < len(x) && k < len(y) && x[k] == y[k] {
				k++
			}
			row = 0
			if dims := a.Shape().Dimensions; len(dims) > 0 && dims[0] > 0 {
				row = k / max(1, len(x)/dims[0])
			}
		})
	})
	if err == nil {
		err = inner
	}
	return row, err
}

// sameLayout checks that batch i has the fields, dtypes and per-sample shapes of first.
func sameLayout(i int, b, first Batch) error {
	bn, fn := slices.Sorted(maps.Keys(b)), slices.Sorted(maps.Keys(first))
	if !slices.Equal(bn, fn) {
		return fmt.Errorf("prefetch: CheckBatchAt: batch %d has fields %v, batch 0 has %v", i, bn, fn)
	}
	for _, name := range bn {
		t, f := b[name], first[name]
		if t.DType() != f.DType() {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q has dtype %s, batch 0 %s", i, name, t.DType(), f.DType())
		}
		if !slices.Equal(t.Shape().Dimensions[1:], f.Shape().Dimensions[1:]) {
			return fmt.Errorf("prefetch: CheckBatchAt: batch %d: field %q has per-sample shape %v, batch 0 %v", i, name, t.Shape().Dimensions[1:], f.Shape().Dimensions[1:])
		}
	}
	return nil
}

// Sequential walks the current epoch in order for CheckBatchAt: a running sample offset
// advanced by each batch's width through the epoch's permutation (the stored order before any
// shuffled BeginEpoch), the final short batch dropped when DropPartial. Like BatchAt it copies
// into fresh tensors and must not overlap BeginEpoch.
func (a *ArrayBatches) Sequential() iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		var order []int
		if p := a.perm.Load(); p != nil {
			order = *p
		}
		names := make([]string, 0, len(a.fields))
		for name := range a.fields {
			names = append(names, name)
		}
		sort.Strings(names)
		for offset := 0; offset < a.n; {
			width := min(a.size, a.n-offset)
			if width < a.size && a.opts.DropPartial {
				return
			}
			b := make(Batch, len(names))
			for _, name := range names {
				t, err := gatherRows(a.fields[name], order, offset, width)
				if err != nil {
					yield(nil, fmt.Errorf("field %q: %w", name, err))
					return
				}
				b[name] = t
			}
			offset += width
			if !yield(b, nil) {
				return
			}
		}
	}
}

// gatherRows copies rows offset..offset+width of the sample order (order[k], or k itself when
// order is nil) out of whole, a whole-dataset array, into a new tensor.
func gatherRows(whole *tensors.Tensor, order []int, offset, width int) (*tensors.Tensor, error) {
	dims := whole.Shape().Dimensions
	perSample := 1
	for _, d := range dims[1:] {
		perSample *= d
	}
	rowBytes := perSample * whole.DType().Size()
	out := tensors.FromShape(shapes.Make(whole.DType(), append([]int{width}, dims[1:]...)...))
	if rowBytes == 0 {
		return out, nil
	}
	var inner error
	err := whole.ConstBytes(func(src []byte) {
		inner = out.MutableBytes(func(dst []byte) {
			for k := range width {
				sample := offset + k
				if order != nil {
					sample = order[sample]
				}
				copy(dst[k*rowBytes:], src[sample*rowBytes:(sample+1)*rowBytes])
			}
		})
	})
	if err == nil {
		err = inner
	}
	return out, err
}
