package prefetch

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"sync/atomic"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// ArrayOptions configures NewArrayBatches.
type ArrayOptions struct {
	Shuffle     bool   // a new permutation at every BeginEpoch
	Seed        uint64 // the permutation's seed (combined with the epoch)
	DropPartial bool   // drop the final batch when it would be short
}

// ArrayBatches is an in-memory Source over whole-dataset arrays sharing a leading axis.
//
// It keeps the Source guarantee: BatchAt may run on several goroutines at once within an epoch
// (the epoch's permutation is read through an atomic pointer and never written in place), and
// each call copies its rows into fresh tensors. The whole-dataset arrays are only read, under
// each tensor's own lock; the caller must not write them while the source is in use.
type ArrayBatches struct {
	fields    map[string]*tensors.Tensor // a copy of the caller's map; the tensors are shared
	names     []string                   // field names, sorted
	n, size   int
	opts      ArrayOptions
	perm      atomic.Pointer[[]int] // the epoch's sample order; nil serves the stored order
	rowBytes  map[string]int
	rowShapes map[string][]int
}

var (
	_ EpochSource    = (*ArrayBatches)(nil)
	_ PartialDropper = (*ArrayBatches)(nil)
)

// NewArrayBatches cuts whole-dataset arrays (one per field, same leading length) into batches.
// Until the first BeginEpoch, batches follow the stored order even when shuffling.
func NewArrayBatches(fields map[string]*tensors.Tensor, batchSize int, opts ArrayOptions) (*ArrayBatches, error) {
	if batchSize <= 0 {
		return nil, fmt.Errorf("batch size %d: must be positive", batchSize)
	}
	n, err := sampleCount(fields)
	if err != nil {
		return nil, err
	}
	a := &ArrayBatches{fields: maps.Clone(fields), size: batchSize, opts: opts, n: n, rowBytes: map[string]int{}, rowShapes: map[string][]int{}}
	for name, t := range a.fields {
		a.names = append(a.names, name)
		dims := t.Shape().Dimensions
		a.rowShapes[name] = append([]int(nil), dims[1:]...)
		a.rowBytes[name] = int(t.Shape().Memory()) / n
	}
	sort.Strings(a.names)
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

// SampleOrdered is true: batch i is samples iB to iB+B-1 of the stored order or, shuffled, of the
// epoch's permutation of the samples, which does not depend on B.
func (a *ArrayBatches) SampleOrdered() bool { return true }

// DropsPartial reports the option.
func (a *ArrayBatches) DropsPartial() bool { return a.opts.DropPartial }

// BeginEpoch draws the epoch's permutation when shuffling: rand.NewPCG(Seed, epoch).Perm(n), a
// pure function of seed and epoch, so replaying an epoch (a resumed run) serves the same order.
// It publishes a new slice rather than rewriting the old one, but must still not overlap BatchAt
// calls: a call that straddles it could serve rows from both epochs.
func (a *ArrayBatches) BeginEpoch(epoch int) error {
	if !a.opts.Shuffle {
		return nil
	}
	perm := rand.New(rand.NewPCG(a.opts.Seed, uint64(epoch))).Perm(a.n)
	a.perm.Store(&perm)
	return nil
}

// BatchAt copies batch i's rows into fresh host tensors. It is safe to call from several
// goroutines at once.
func (a *ArrayBatches) BatchAt(i int) (Batch, error) {
	if i < 0 || i >= a.Len() {
		return nil, fmt.Errorf("batch index %d out of range [0, %d)", i, a.Len())
	}
	var perm []int
	if p := a.perm.Load(); p != nil {
		perm = *p
	}
	lo, hi := i*a.size, min((i+1)*a.size, a.n)
	b := make(Batch, len(a.names))
	for _, name := range a.names {
		src := a.fields[name]
		rb := a.rowBytes[name]
		out := tensors.FromShape(shapes.Make(src.DType(), append([]int{hi - lo}, a.rowShapes[name]...)...))
		var inner error
		err := src.ConstBytes(func(in []byte) {
			inner = out.MutableBytes(func(dst []byte) {
				for r := lo; r < hi; r++ {
					row := r
					if perm != nil {
						row = perm[r]
					}
					copy(dst[(r-lo)*rb:(r-lo+1)*rb], in[row*rb:(row+1)*rb])
				}
			})
		})
		if err == nil {
			err = inner
		}
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
		b[name] = out
	}
	return b, nil
}

// Sized is a source that knows how many samples it holds (not only its batch count), so a
// consumer can report samples left out by a dropped partial batch.
type Sized interface {
	Samples() int
}

var _ Sized = (*ArrayBatches)(nil)
