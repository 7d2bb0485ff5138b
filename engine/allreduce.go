package engine

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
)

// AllReducer sums a host buffer over the processes of a data-parallel run, in place: on return
// every process's buf holds the element-wise sum of all of theirs. Every process calls it at the
// same point with a buffer of the same length. Size is the number of processes.
type AllReducer interface {
	AllReduceSum(buf []float32) error
	Size() int
}

// reduceScratch is the one host buffer a step's gradients cross processes in, and the step's
// scalars before they join it: allocated on the first step, reused by every later one.
type reduceScratch struct{ buf, scalars []float32 }

// reduceStep sums the step's gradients (already reduced over this process's devices) and its
// micro-batch scalars over the processes, in one collective over one contiguous buffer: the
// gradients in parameter order, then per micro-batch its loss and its train metrics when they
// were read (by name, sorted), then this process's stop vote (1 or 0), so that every process
// learns in the same call whether any wants to stop after this step.
//
// The rule: each process's gradient is that of its mean loss over its own batch, so the mean
// over the W processes, sum/W, is the gradient of the mean loss over the global batch of W x the
// batch: what one process on W devices with that global batch computes. Losses and train
// metrics are averaged the same way, so the step's loss is the global batch's on every rank (and
// non-finite on every rank when it is on one). The optimizer then runs on every rank with the
// same inputs, keeping the parameters identical.
//
// The device gradients are freed; the reduced ones come back as host tensors the optimizer
// program uploads (and donates).
func (e *Engine) reduceStep(grads []*tensors.Tensor, res *StepValues) ([]*tensors.Tensor, error) {
	micro := res.Micro
	scalars := e.reduce.scalars[:0]
	for _, m := range micro {
		scalars = append(scalars, float32(m.Loss))
		for _, k := range sortedKeys(m.Metrics) {
			scalars = append(scalars, float32(m.Metrics[k]))
		}
	}
	vote := float32(0)
	if e.vote != nil && e.vote() {
		vote = 1
	}
	scalars = append(scalars, vote)
	e.reduce.scalars = scalars
	n := len(scalars)
	shaped := make([]shapes.Shape, len(grads)) // kept: a freed tensor has no shape
	for i, t := range grads {
		shaped[i] = t.Shape()
		if t.DType() != dtypes.Float32 {
			return nil, fmt.Errorf("multi-process step: a gradient is %s (%s); the all-reduce sums float32 gradients only: keep the parameters float32", t.DType(), t.Shape())
		}
		n += t.Shape().Size()
	}
	if cap(e.reduce.buf) < n {
		e.reduce.buf = make([]float32, n)
	}
	buf := e.reduce.buf[:n]
	off := 0
	for _, t := range grads {
		var err error
		if t.Shape().Size() > 0 {
			err = t.ConstFlatData(func(flat any) { off += copy(buf[off:], flat.([]float32)) })
		}
		if err != nil {
			return nil, fmt.Errorf("multi-process step: reading a gradient %s back: %w", t.Shape(), err)
		}
	}
	copy(buf[off:], scalars)
	if err := freeTensors(grads); err != nil {
		return nil, err
	}
	if err := e.reducer.AllReduceSum(buf); err != nil {
		return nil, fmt.Errorf("multi-process step: summing the gradients over %d processes: %w", e.reducer.Size(), err)
	}
	inv := 1 / float32(e.reducer.Size())
	for i := range buf {
		buf[i] *= inv
	}
	out := make([]*tensors.Tensor, len(grads))
	off = 0
	for i, sh := range shaped {
		out[i] = tensors.FromFlatDataAndDimensions(buf[off:off+sh.Size()], sh.Dimensions...)
		off += sh.Size()
	}
	for i := range micro {
		micro[i].Loss = float64(buf[off])
		off++
		for _, k := range sortedKeys(micro[i].Metrics) {
			micro[i].Metrics[k] = float64(buf[off])
			off++
		}
	}
	res.Stop = buf[off] > 0
	return out, nil
}

// nonFinite reports whether v is NaN or infinite.
func nonFinite(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
