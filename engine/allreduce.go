package engine

import (
	"errors"
	"fmt"
	"math"

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

// DeviceAllReducer is an AllReducer that can also take a step's gradients where they are, on
// device 0, and return their mean over the processes there, with the mean of the step's scalars:
// the gradients never cross to the host (backend.XProcess, over a PJRT client spanning the
// processes). The engine takes this path when its Reducer is one.
type DeviceAllReducer interface {
	// AllReduceMean returns, for each float32 tensor of grads and for scalars, the element-wise
	// sum over the processes divided by Size(), as new tensors on device 0 (grads are left to
	// the caller) and a new slice.
	AllReduceMean(grads []*tensors.Tensor, scalars []float32) ([]*tensors.Tensor, []float32, error)
	Size() int
}

// reduceScratch is the one host buffer a step's gradients cross processes in, and the step's
// scalars before they join it, and the slice of the reduced segments handed to the optimizer:
// allocated on the first step, reused by every later one.
type reduceScratch struct {
	buf, scalars []float32
	out          []*tensors.Tensor
}

// reduceStep sums the step's gradients (already reduced over this process's devices) and its
// micro-batch scalars over the processes, in one collective over one contiguous buffer: the
// gradient segments in group order (each group's flat buffers, flat.go), then per micro-batch its
// loss and its train metrics when they were read (by name, sorted), then this process's stop vote
// (1 or 0), so that every process learns in the same call whether any wants to stop after this
// step.
//
// The rule: each process's gradient is that of its mean loss over its own batch, so the mean
// over the W processes, sum/W, is the gradient of the mean loss over the global batch of W x the
// batch: what one process on W devices with that global batch computes. Losses and train
// metrics are averaged the same way, so the step's loss is the global batch's on every rank (and
// non-finite on every rank when it is on one). The optimizer then runs on every rank with the
// same inputs, keeping the parameters identical.
//
// Each segment is copied device -> buffer and buffer -> device directly, with no host tensor in
// between: the host holds the gradients once, in the buffer, whatever the step count. The device
// gradients are freed; the reduced ones come back as device tensors the optimizer program donates.
func (e *Engine) reduceStep(grads []*tensors.Tensor, res *StepValues) ([]*tensors.Tensor, error) {
	scalars := e.stepScalars(res)
	n := len(scalars)
	if err := e.checkReducible(grads); err != nil {
		return nil, errors.Join(err, freeTensors(grads))
	}
	if d, ok := e.reducer.(DeviceAllReducer); ok {
		return e.reduceOnDevice(d, grads, res, scalars)
	}
	for _, g := range e.groups {
		for _, s := range g.segs {
			n += s.size
		}
	}
	if cap(e.reduce.buf) < n {
		e.reduce.buf = make([]float32, n)
	}
	buf := e.reduce.buf[:n]
	off, err := e.downloadSegments(grads, buf)
	if err = errors.Join(err, freeTensors(grads)); err != nil {
		return nil, err
	}
	if off != n-len(scalars) { // the upload cuts the buffer by the groups' segments: they must match
		return nil, fmt.Errorf("internal: the gradient program returned %d gradient elements, the parameter groups' segments hold %d", off, n-len(scalars))
	}
	copy(buf[off:], scalars)
	if err := e.reducer.AllReduceSum(buf); err != nil {
		return nil, fmt.Errorf("multi-process step: summing the gradients over %d processes: %w", e.reducer.Size(), err)
	}
	inv := 1 / float32(e.reducer.Size())
	for i := range buf {
		buf[i] *= inv
	}
	out, err := e.uploadSegmentsFrom(buf)
	if err != nil {
		return nil, err
	}
	takeScalars(res, buf[off:])
	return out, nil
}

// reduceOnDevice is reduceStep over a DeviceAllReducer: the same means, the gradients kept on the
// device.
func (e *Engine) reduceOnDevice(d DeviceAllReducer, grads []*tensors.Tensor, res *StepValues, scalars []float32) ([]*tensors.Tensor, error) {
	out, means, err := d.AllReduceMean(grads, scalars)
	if err = errors.Join(err, freeTensors(grads)); err != nil {
		return nil, errors.Join(fmt.Errorf("multi-process step: the mean of the gradients over %d processes: %w", d.Size(), err), freeTensors(out))
	}
	if len(out) != len(grads) || len(means) != len(scalars) {
		return nil, errors.Join(fmt.Errorf("internal: the device all-reduce returned %d gradients and %d scalars for %d and %d", len(out), len(means), len(grads), len(scalars)), freeTensors(out))
	}
	takeScalars(res, means)
	return out, nil
}

// takeScalars writes the reduced scalars (laid out by stepScalars) back into the step's values.
func takeScalars(res *StepValues, buf []float32) {
	off := 0
	for i := range res.Micro {
		res.Micro[i].Loss = float64(buf[off])
		off++
		for _, k := range sortedKeys(res.Micro[i].Metrics) {
			res.Micro[i].Metrics[k] = float64(buf[off])
			off++
		}
	}
	res.Stop = buf[off] > 0
}

// checkReducible refuses what the all-reduce cannot sum (a group that is not float32) and
// gradients that are not the groups' segments, in order: the sums would land in other
// parameters' places.
func (e *Engine) checkReducible(grads []*tensors.Tensor) error {
	i := 0
	for _, g := range e.groups {
		if dtypeOf(g.dtype) != dtypes.Float32 {
			return fmt.Errorf("multi-process step: parameter group %q is %s; the all-reduce sums float32 gradients only: keep the parameters float32", g.name, g.dtype)
		}
		for _, seg := range g.segs {
			if i >= len(grads) || grads[i].Shape().Size() != seg.size {
				return fmt.Errorf("internal: the gradient program's outputs do not match parameter group %q's segments (output %d of %d)", g.name, i, len(grads))
			}
			i++
		}
	}
	if i != len(grads) {
		return fmt.Errorf("internal: the gradient program returned %d gradients, the parameter groups have %d segments", len(grads), i)
	}
	return nil
}

// stepScalars lays the step's micro-batch losses and read metrics, then the stop vote, out in
// the reused scalars slice.
func (e *Engine) stepScalars(res *StepValues) []float32 {
	scalars := e.reduce.scalars[:0]
	for _, m := range res.Micro {
		scalars = append(scalars, float32(m.Loss))
		for _, k := range sortedKeys(m.Metrics) {
			scalars = append(scalars, float32(m.Metrics[k]))
		}
	}
	vote := float32(0)
	if e.vote != nil && e.vote() {
		vote = 1
	}
	e.reduce.scalars = append(scalars, vote)
	return e.reduce.scalars
}

// downloadSegments copies each gradient segment, on device 0, into buf end to end, in group
// order (checkReducible checked them against the segments); it returns where the segments end.
func (e *Engine) downloadSegments(grads []*tensors.Tensor, buf []float32) (int, error) {
	be, off := e.backend.Backend, 0
	for _, t := range grads {
		n := t.Shape().Size()
		if n == 0 {
			continue
		}
		if off+n > len(buf) {
			return 0, fmt.Errorf("internal: the gradient segments hold more than the parameters' %d elements", len(buf))
		}
		b, err := t.Buffer(be, 0) // a program output: already on device 0, nothing moves
		if err == nil {
			err = be.BufferToFlatData(b, buf[off:off+n])
		}
		if err != nil {
			return 0, fmt.Errorf("multi-process step: reading a gradient segment %s back: %w", t.Shape(), err)
		}
		off += n
	}
	return off, nil
}

// uploadSegmentsFrom places each group's segments on device 0 from buf (laid out as
// downloadSegments left it), counted as parameter-sized uploads.
func (e *Engine) uploadSegmentsFrom(buf []float32) ([]*tensors.Tensor, error) {
	be, out, off := e.backend.Backend, e.reduce.out[:0], 0
	for _, g := range e.groups {
		for s, seg := range g.segs {
			if seg.size == 0 { // nothing to move, and PJRT's host transfer wants an element
				out = append(out, tensors.FromShape(g.segShape(s)))
				continue
			}
			b, err := be.BufferFromFlatData(0, buf[off:off+seg.size], g.segShape(s))
			var t *tensors.Tensor
			if err == nil {
				t, err = tensors.FromBuffer(be, b)
			}
			if err != nil {
				return nil, errors.Join(fmt.Errorf("multi-process step: uploading group %q's reduced gradient segment %d: %w", g.name, s, err), freeTensors(out))
			}
			e.uploads.Params++
			out = append(out, t)
			off += seg.size
		}
	}
	e.reduce.out = out
	return out, nil
}

// nonFinite reports whether v is NaN or infinite.
func nonFinite(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
