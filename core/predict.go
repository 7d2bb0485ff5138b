package core

import (
	"fmt"
	"iter"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
)

// sharedForward says which fields Predict's program takes for a batch whose fields route fwd to
// Forward, and whether it is the full-width eval program of a split that routes Forward the same
// fields (shared), so that Validate/Evaluate and Predict share one compiled forward: the "val"
// split's first, then "test", then the others by name. With no such split (a Nitro built from
// input specs, or a batch carrying an optional field no split has) it is Forward alone.
func (su *runSpec) sharedForward(fwd []string) (keys []string, shared bool) {
	order := []string{"val", "test"}
	for _, split := range sortedKeys(su.splitAvail) {
		if split != "val" && split != "test" {
			order = append(order, split)
		}
	}
	for _, split := range order {
		avail, ok := su.splitAvail[split]
		// Without Metrics or Loss (manual mode) there is no eval program to share: Forward alone.
		if !ok || su.noEvalProgram() || !slices.Equal(routed(avail, su.forward), fwd) {
			continue
		}
		return su.evalKeys(avail), true
	}
	return fwd, false
}

// Prediction is one batch's outputs on the host, sliced to the batch's real rows.
type Prediction map[string]*tensors.Tensor

// Predict runs Forward in eval mode on one prefetch.Batch and returns its outputs on the host. It
// refuses anything that is not a Batch, naming the fields Forward declares, and a Batch with a nil
// field or no rows; for a prefetch.Source use PredictAll. A batch narrower than the mesh width is padded by
// repeating its last row and its outputs sliced back, so Forward must treat rows independently
// (no reduction across the batch axis) for them to be exact.
func (n *Nitro) Predict(x any) (p Prediction, err error) {
	prev := n.tracker.Phase()
	defer n.enter("predict", &err, func(error) { n.setPhase(prev, nil) })()
	n.report()
	if err := n.checkDrift("Predict"); err != nil {
		return nil, err
	}
	var b prefetch.Batch
	switch v := x.(type) {
	case prefetch.Batch:
		b = v
	case map[string]*tensors.Tensor:
		b = prefetch.Batch(v)
	case prefetch.Source:
		return nil, fmt.Errorf("Predict takes one batch; for a source use PredictAll, which yields batches lazily")
	default:
		return nil, fmt.Errorf("Predict takes a prefetch.Batch keyed by Forward's declared fields %v, got %T: wrap the array, e.g. prefetch.Batch{%q: t}", n.spec.forwardFields(), x, first(n.spec.forwardFields()))
	}
	w, err := predictRows(b)
	if err == nil {
		err = n.spec.checkRowShapes(b)
	}
	if err != nil {
		return nil, fmt.Errorf("Predict: %w", err)
	}
	n.setPhase(monitors.EvalStepping{}, nil)
	return n.predictPadded(b, n.eng.MeshWidth(w), w)
}

// PredictAll yields each batch's outputs lazily, in order. A short final batch is padded to the
// compiled width (batch 0's) by repeating its last row and its outputs sliced back to its real
// rows, so Forward must treat rows independently (no reduction across the batch axis) for them
// to be exact. A batch with a nil field or no rows ends the iteration with an error naming it.
// Interrupt (what Ctrl+C means) stops it at the next batch boundary: the iteration then yields
// one last error, matching ErrInterrupted, that says how many batches were predicted; the
// interrupt is consumed.
func (n *Nitro) PredictAll(src prefetch.Source) iter.Seq2[Prediction, error] {
	return func(yield func(Prediction, error) bool) {
		// No recover around the iteration: a panic in the caller's loop body is the caller's.
		// predictPadded recovers its own.
		n.tracker.Enter()
		defer n.tracker.Exit()
		prev := n.tracker.Phase()
		defer n.setPhase(prev, nil)
		n.report()
		if err := n.checkDrift("PredictAll"); err != nil {
			yield(nil, err)
			return
		}
		n.setPhase(monitors.EvalStepping{}, nil)
		width := -1
		for i := 0; i < src.Len(); i++ {
			if n.consumeInterrupt() {
				yield(nil, fmt.Errorf("PredictAll: stopped (%s) after %d of %d batches: %w", StopRequested, i, src.Len(), ErrInterrupted))
				return
			}
			b, err := src.BatchAt(i)
			if err != nil {
				yield(nil, fmt.Errorf("batch %d: %w", i, err))
				return
			}
			real, err := predictRows(b)
			if err == nil {
				err = n.spec.checkRowShapes(b)
			}
			if err != nil {
				yield(nil, fmt.Errorf("PredictAll: batch %d: %w", i, err))
				return
			}
			if width < 0 {
				width = n.eng.MeshWidth(real)
			}
			if real > width {
				err = fmt.Errorf("batch %d has %d rows, more than batch 0's %d", i, real, width)
			}
			var p Prediction
			if err == nil {
				p, err = n.predictPadded(b, width, real)
			}
			if !yield(p, err) || err != nil {
				return
			}
		}
	}
}

// checkRowShapes refuses a prediction field whose rows differ in dtype or shape from the data
// contract's (the data's, or WithInputSpecs'): the programs are compiled for those rows, and a
// buffer of another shape would fail inside the runtime with a message that names neither the
// field nor the fix.
func (su *runSpec) checkRowShapes(b prefetch.Batch) error {
	for _, k := range sortedKeys(b) {
		want, ok := su.fieldShapes[k]
		if !ok || !su.forward.whole && !slices.Contains(su.forwardFields(), k) {
			continue // a field Forward does not read is not sent to the device
		}
		got := fieldShape{dtype: b[k].DType().String(), row: b[k].Shape().Dimensions[1:]}
		if got.dtype != want.dtype || !slices.Equal(got.row, want.row) {
			return fmt.Errorf("batch field %q has rows of %s%v, and the model's programs take rows of %s%v (the data's, or WithInputSpecs'): give rows of that dtype and shape (pad or cut a sequence to it)",
				k, got.dtype, got.row, want.dtype, want.row)
		}
	}
	return nil
}

// predictRows is a prediction batch's row count. A nil field or a batch of no rows has nothing
// to run, and past this point would fail as a nil dereference or a zero-sized compile that name
// neither: both are refused here, by field.
func predictRows(b prefetch.Batch) (int, error) {
	for _, k := range sortedKeys(b) {
		if b[k] == nil {
			return 0, fmt.Errorf("batch field %q is nil: give it a tensor with the batch on its leading axis, or leave the key out if Forward does not read it", k)
		}
	}
	w, err := batchWidth(b)
	if err == nil && w == 0 {
		err = fmt.Errorf("the batch has 0 rows: give every field at least one row on its leading axis (skip an empty batch before predicting)")
	}
	return w, err
}

// predictPadded predicts one batch of real rows at the program width (padded by the engine).
func (n *Nitro) predictPadded(b prefetch.Batch, width, real int) (_ Prediction, err error) {
	defer recoverInto("predict", &err)
	avail := keySet(b)
	if err := n.spec.forward.checkAgainst("predict", avail); err != nil {
		return nil, err
	}
	fwd := routed(avail, n.spec.forward)
	keys, shared := n.spec.sharedForward(fwd)
	res, err := n.eng.Predict(b, fwd, keys, shared, width, real)
	if err != nil {
		return nil, err
	}
	n.tracker.Tick()
	return res, nil
}

func (su *runSpec) forwardFields() []string {
	var names []string
	for _, f := range su.forward.fields {
		names = append(names, f.name)
	}
	return names
}

func first(s []string) string {
	if len(s) == 0 {
		return "x"
	}
	return s[0]
}
