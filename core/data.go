package core

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Batch is one batch of host arrays by field name, the batch on the leading axis of each.
// (The spec's batch dimension is last because Julia is column-major; GoMLX is row-major, so the
// same rule — one batch axis, asserted before any slicing — applies to axis 0.)
type Batch map[string]*tensors.Tensor

// Source is an index-addressable batch source: batch i of Len() is BatchAt(i). Index addressing
// is what lets a run resume mid-epoch and lets prefetch fan out without reordering bugs.
type Source interface {
	Len() int
	BatchAt(i int) (Batch, error)
}

// EpochSource is a Source that reshuffles (or otherwise re-plans) at each epoch's start.
type EpochSource interface {
	Source
	BeginEpoch(epoch int) error
}

// PartialDropper says whether a source drops its partial final batch. The train split must: a
// short training batch would compile a second gradient program and weigh its samples differently.
type PartialDropper interface {
	DropsPartial() bool
}

// Data is what BuildData returns: splits by name ("train", "val", "test", ...).
type Data map[string]Source

// ArrayOptions configures NewArrayBatches.
type ArrayOptions struct {
	Shuffle     bool   // a new permutation at every BeginEpoch
	Seed        uint64 // the permutation's seed (combined with the epoch)
	DropPartial bool   // drop the final batch when it would be short
}

// ArrayBatches is an in-memory Source over whole-dataset arrays sharing a leading axis.
type ArrayBatches struct {
	fields    map[string]*tensors.Tensor
	names     []string
	n, size   int
	opts      ArrayOptions
	perm      []int
	rowBytes  map[string]int
	rowShapes map[string][]int
}

var (
	_ EpochSource    = (*ArrayBatches)(nil)
	_ PartialDropper = (*ArrayBatches)(nil)
)

// NewArrayBatches cuts whole-dataset arrays (one per field, same leading length) into batches.
func NewArrayBatches(fields map[string]*tensors.Tensor, batchSize int, opts ArrayOptions) (*ArrayBatches, error) {
	if batchSize <= 0 {
		return nil, fmt.Errorf("batch size %d: must be positive", batchSize)
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("no fields: an array source needs at least one named array")
	}
	a := &ArrayBatches{fields: fields, size: batchSize, opts: opts, n: -1, rowBytes: map[string]int{}, rowShapes: map[string][]int{}}
	for name, t := range fields {
		a.names = append(a.names, name)
		if t.Rank() < 1 {
			return nil, fmt.Errorf("field %q is a scalar: every field needs the samples on its leading axis", name)
		}
		dims := t.Shape().Dimensions
		if a.n >= 0 && dims[0] != a.n {
			return nil, fmt.Errorf("field %q has %d samples on its leading axis, others have %d: all fields must agree", name, dims[0], a.n)
		}
		a.n = dims[0]
		a.rowShapes[name] = append([]int(nil), dims[1:]...)
		a.rowBytes[name] = int(t.Shape().Memory()) / max(dims[0], 1)
	}
	sort.Strings(a.names)
	if a.n == 0 {
		return nil, fmt.Errorf("the arrays hold no samples")
	}
	return a, nil
}

// Len is the number of batches.
func (a *ArrayBatches) Len() int {
	if a.opts.DropPartial {
		return a.n / a.size
	}
	return (a.n + a.size - 1) / a.size
}

// Samples is the number of samples in the source.
func (a *ArrayBatches) Samples() int { return a.n }

// DropsPartial reports the option.
func (a *ArrayBatches) DropsPartial() bool { return a.opts.DropPartial }

// BeginEpoch draws the epoch's permutation when shuffling (deterministic in seed and epoch).
func (a *ArrayBatches) BeginEpoch(epoch int) error {
	if !a.opts.Shuffle {
		return nil
	}
	r := rand.New(rand.NewPCG(a.opts.Seed, uint64(epoch)))
	a.perm = r.Perm(a.n)
	return nil
}

// BatchAt copies batch i's rows into fresh host tensors.
func (a *ArrayBatches) BatchAt(i int) (Batch, error) {
	if i < 0 || i >= a.Len() {
		return nil, fmt.Errorf("batch index %d out of range [0, %d)", i, a.Len())
	}
	lo, hi := i*a.size, min((i+1)*a.size, a.n)
	b := make(Batch, len(a.names))
	for _, name := range a.names {
		src := a.fields[name]
		rb := a.rowBytes[name]
		out := tensors.FromShape(shapes.Make(src.DType(), append([]int{hi - lo}, a.rowShapes[name]...)...))
		var err error
		src.ConstBytes(func(in []byte) {
			err = out.MutableBytes(func(dst []byte) {
				for r := lo; r < hi; r++ {
					row := r
					if a.perm != nil {
						row = a.perm[r]
					}
					copy(dst[(r-lo)*rb:(r-lo+1)*rb], in[row*rb:(row+1)*rb])
				}
			})
		})
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
		b[name] = out
	}
	return b, nil
}

// batchWidth returns a batch's leading-axis length, checking every field agrees.
func batchWidth(b Batch) (int, error) {
	w := -1
	for _, name := range sortedKeys(b) {
		t := b[name]
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

// padRows returns t with its leading axis grown to width by repeating the last row. Padded rows
// are never seen by metrics or returned outputs: the programs slice them away.
func padRows(t *tensors.Tensor, width int) *tensors.Tensor {
	dims := t.Shape().Dimensions
	n := dims[0]
	if n == width {
		return t
	}
	rb := int(t.Shape().Memory()) / n
	out := tensors.FromShape(shapes.Make(t.DType(), append([]int{width}, dims[1:]...)...))
	t.ConstBytes(func(in []byte) {
		out.MutableBytes(func(dst []byte) {
			copy(dst, in)
			for r := n; r < width; r++ {
				copy(dst[r*rb:(r+1)*rb], in[(n-1)*rb:n*rb])
			}
		})
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
