package core

import (
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/monitors"
)

// forwardProgram is the program Predict runs for a batch whose fields route fwd to Forward, at
// width, and the batch fields it takes. It is the full-width eval program of a split that routes
// Forward the same fields, so that Validate/Evaluate and Predict share one compiled forward: the
// "val" split's first, then "test", then the others by name. With no such split (a Nitro built
// from input specs, or a batch carrying an optional field no split has) it is Forward alone.
func (n *Nitro) forwardProgram(width int, fwd []string) (*program, []string, error) {
	order := []string{"val", "test"}
	for _, split := range sortedKeys(n.splitAvail) {
		if split != "val" && split != "test" {
			order = append(order, split)
		}
	}
	for _, split := range order {
		avail, ok := n.splitAvail[split]
		// Without Metrics or Loss (manual mode) there is no eval program to share: Forward alone.
		if !ok || n.noEvalProgram() || !slices.Equal(routed(avail, n.forward), fwd) {
			continue
		}
		keys := n.evalKeys(avail)
		p, err := n.evalProgram(width, width, keys)
		return p, keys, err
	}
	p, err := n.predictProgram(width, fwd)
	return p, fwd, err
}

// predictProgram: Forward alone, at one width, returning every output.
func (n *Nitro) predictProgram(width int, keys []string) (*program, error) {
	return n.memo(fmt.Sprintf("predict/%d/%v", width, keys), func() (*program, error) {
		sig := n.modelInputs(width, keys)
		key := n.key(compilecache.KindPredict, hookNames(n.forward), sig)
		return n.getProgram(key, func(g *graph.Graph, src any) ([]*graph.Node, *program) {
			nodes := sig.params(g, n.varInputs)
			view := n.bindModel(g, nodes, src)
			n.ctx.SetTraining(g, false)
			out := n.callForward(view, batchNodes(nodes, keys), width)
			meta := &program{forward: sortedKeys(out)}
			var outs []*graph.Node
			for _, name := range meta.forward {
				outs = append(outs, out[name])
			}
			return outs, meta
		})
	})
}

// Prediction is one batch's outputs on the host, sliced to the batch's real rows.
type Prediction map[string]*tensors.Tensor

// Predict runs Forward in eval mode on one Batch and returns its outputs on the host. It refuses
// anything that is not a Batch, naming the fields Forward declares, and a Batch with a nil field
// or no rows; for a Source use PredictAll. A batch narrower than the mesh width is padded by
// repeating its last row and its outputs sliced back, so Forward must treat rows independently
// (no reduction across the batch axis) for them to be exact.
func (n *Nitro) Predict(x any) (p Prediction, err error) {
	prev := n.tracker.Phase()
	defer n.enter("predict", &err, func(error) { n.setPhase(prev, nil) })()
	n.report()
	if err := n.checkDrift("Predict"); err != nil {
		return nil, err
	}
	var b Batch
	switch v := x.(type) {
	case Batch:
		b = v
	case map[string]*tensors.Tensor:
		b = Batch(v)
	case Source:
		return nil, fmt.Errorf("Predict takes one batch; for a source use PredictAll, which yields batches lazily")
	default:
		return nil, fmt.Errorf("Predict takes a core.Batch keyed by Forward's declared fields %v, got %T: wrap the array, e.g. core.Batch{%q: t}", n.forwardFields(), x, first(n.forwardFields()))
	}
	w, err := predictRows(b)
	if err != nil {
		return nil, fmt.Errorf("Predict: %w", err)
	}
	n.setPhase(monitors.EvalStepping{}, nil)
	return n.predictPadded(b, n.meshWidth(w), w)
}

// PredictAll yields each batch's outputs lazily, in order. A short final batch is padded to the
// compiled width (batch 0's) by repeating its last row and its outputs sliced back to its real
// rows, so Forward must treat rows independently (no reduction across the batch axis) for them
// to be exact. A batch with a nil field or no rows ends the iteration with an error naming it.
// Interrupt (what Ctrl+C means) stops it at the next batch boundary: the iteration then yields
// one last error, matching ErrInterrupted, that says how many batches were predicted; the
// interrupt is consumed.
func (n *Nitro) PredictAll(src Source) iter.Seq2[Prediction, error] {
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
			if err != nil {
				yield(nil, fmt.Errorf("PredictAll: batch %d: %w", i, err))
				return
			}
			if width < 0 {
				width = n.meshWidth(real)
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

// predictRows is a prediction batch's row count. A nil field or a batch of no rows has nothing
// to run, and past this point would fail as a nil dereference or a zero-sized compile that name
// neither: both are refused here, by field.
func predictRows(b Batch) (int, error) {
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

func (n *Nitro) predictPadded(b Batch, width, real int) (_ Prediction, err error) {
	defer recoverInto("predict", &err)
	avail := keySet(b)
	if err := n.forward.checkAgainst("predict", avail); err != nil {
		return nil, err
	}
	fwd := routed(avail, n.forward)
	p, keys, err := n.forwardProgram(width, fwd)
	if err != nil {
		return nil, err
	}
	in := make(Batch, len(keys))
	for _, k := range keys {
		if slices.Contains(fwd, k) {
			in[k] = b[k]
			continue
		}
		// A field only Metrics or Loss reads (a label) gets zeros: a prediction batch need not
		// carry it, and the metrics computed from it are dropped.
		fs := n.fieldShapes[k]
		in[k] = tensors.FromShape(shapes.Make(dtypeOf(fs.dtype), append([]int{width}, fs.row...)...))
	}
	outs, err := n.runEval(p, in, keys, width)
	if err != nil {
		return nil, err
	}
	at := len(outs) - len(p.forward) // Forward's outputs come last
	if err := freeTensors(outs[:at]); err != nil {
		return nil, err
	}
	res := Prediction{}
	for i, name := range p.forward {
		if res[name], err = sliceRowsHost(outs[at+i], real); err != nil {
			return nil, fmt.Errorf("reading output %q back: %w", name, err)
		}
	}
	n.tracker.Tick()
	return res, nil
}

// runEval runs an eval-mode program on a batch padded to the compiled width. Layer state is
// passed but not donated, and what the program would return of it is never read: eval mode
// discards it.
func (n *Nitro) runEval(p *program, b Batch, keys []string, width int) ([]*tensors.Tensor, error) {
	padded := make(Batch, len(keys))
	for _, k := range keys {
		padded[k] = padRows(b[k], width)
	}
	outs, err := n.execute(p, n.modelArgs(padded, keys, false))
	return outs, errors.Join(err, freeBatch(padded, keys))
}

// sliceRowsHost brings t to the host and keeps its first rows.
func sliceRowsHost(t *tensors.Tensor, rows int) (*tensors.Tensor, error) {
	dims := t.Shape().Dimensions
	if dims[0] == rows {
		t.MaterializeLocal() // panics on a failed transfer: predictPadded recovers it into an error
		return t, nil
	}
	out := tensors.FromShape(shapes.Make(t.DType(), append([]int{rows}, dims[1:]...)...))
	var inner error
	err := t.ConstBytes(func(src []byte) {
		inner = out.MutableBytes(func(dst []byte) { copy(dst, src[:len(dst)]) })
	})
	return out, errors.Join(err, inner, t.FinalizeAll())
}

func (n *Nitro) forwardFields() []string {
	var names []string
	for _, f := range n.forward.fields {
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
