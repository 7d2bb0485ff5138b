package core

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/runstatus"
)

func valueOfOutputs(o Outputs) reflect.Value { return reflect.ValueOf(o) }

// ValLoss is the metric reported when the experiment has no Metrics hook: Loss, through its own
// batch routing, taken as the mean over a batch's real rows and so weighed by them: the split's
// val_loss is the mean over its samples, a short final batch counting for the rows it holds.
const ValLoss = "val_loss"

// evalProgram: parameters, layer state, Device fields and routed batch fields at the compiled
// width -> per metric, its sum and (unless nil) its count. In Go a metric hook is a graph function,
// so device metrics are fused into this one program instead of one program per hook. For a short
// final batch (real < width) the inputs arrive padded to the width and the program slices outputs
// and batch fields back to real rows before Metrics/Loss see them; that is the one extra program
// a split whose length is not a multiple of the batch size costs.
//
// At full width (real == width) the program also returns Forward's outputs, after the metrics:
// that is the program Predict runs, so moving between Validate/Evaluate and Predict compiles
// nothing. Validation only frees those outputs, a cost of one output buffer per batch. With the
// metrics on the host (HostMetrics) the program is Forward's outputs alone, always at full
// width: the host slices a short batch's outputs after the readback.
func (n *Nitro) evalProgram(width, real int, keys []string) (*program, error) {
	return n.memo(fmt.Sprintf("eval/%d/%d/%v", width, real, keys), func() (*program, error) {
		metricHook := n.evalMetricHook()
		sig := n.modelInputs(width, keys)
		key := n.key(compilecache.KindEval, hookNames(n.forward, metricHook), sig)
		key.Extra = append(key.Extra, [2]string{"rows", fmt.Sprint(real)})
		return n.getProgram(key, func(g *graph.Graph, src any) ([]*graph.Node, *program) {
			nodes := sig.params(g, n.varInputs)
			view := n.bindModel(g, nodes, src)
			n.ctx.SetTraining(g, false)
			out := n.callForward(view, batchNodes(nodes, routed(setOf(keys), n.forward)), width)
			mb := batchNodes(nodes, routed(setOf(keys), metricHook))
			if real < width {
				out = sliceOutputs(out, real)
				for _, k := range sortedKeys(mb) { // in a fixed order: the program must not depend on map order
					mb[k] = graph.Slice(mb[k], graph.AxisRange(0, real))
				}
			}
			meta := &program{}
			var outs []*graph.Node
			switch {
			case n.onHost(): // the metrics run on the host, on Forward's outputs
			case n.metrics == nil:
				loss := n.loss.call(view, valueOfOutputs(out), mb).Interface().(*graph.Node)
				meta.outNames, meta.hasCount = []string{ValLoss}, []bool{false}
				outs = append(outs, loss)
			default:
				outs = n.metricOutputs(view, out, mb, meta)
			}
			if real == width {
				meta.forward = sortedKeys(out)
				for _, name := range meta.forward {
					outs = append(outs, out[name])
				}
			}
			return outs, meta
		})
	})
}

// metricOutputs calls Metrics and lists each metric's sum and (unless nil) count as float64,
// recording their names and which have a count in meta. A sum with a count is a scalar; one
// without may be an array (summed over the split, for FinalizeMetrics).
func (n *Nitro) metricOutputs(view any, out Outputs, mb map[string]*graph.Node, meta *program) []*graph.Node {
	var outs []*graph.Node
	ms := n.metrics.call(view, valueOfOutputs(out), mb).Interface().(map[string]Metric)
	if len(ms) == 0 {
		panic(fmt.Errorf("Metrics returned no metrics, so the eval program would compute nothing: return at least one core.Metric{Sum, Count}, or drop the hook (without it, evaluation reports val_loss from Loss)"))
	}
	for _, name := range sortedKeys(ms) {
		m := ms[name]
		if m.Sum == nil || (m.Sum.Rank() != 0 && m.Count != nil) {
			panic(fmt.Errorf("metric %q: Sum must be a scalar node, or an array with a nil Count (summed, not divided), got %v", name, shapeOf(m.Sum)))
		}
		meta.outNames = append(meta.outNames, name)
		meta.hasCount = append(meta.hasCount, m.Count != nil)
		outs = append(outs, graph.ConvertDType(m.Sum, dtypeOf("Float64")))
		if m.Count != nil {
			if m.Count.Rank() != 0 {
				panic(fmt.Errorf("metric %q: Count must be a scalar node or nil, got %v", name, shapeOf(m.Count)))
			}
			outs = append(outs, graph.ConvertDType(m.Count, dtypeOf("Float64")))
		}
	}
	return outs
}

func sliceOutputs(out Outputs, rows int) Outputs {
	s := make(Outputs, len(out))
	for _, k := range sortedKeys(out) {
		s[k] = graph.Slice(out[k], graph.AxisRange(0, rows))
	}
	return s
}

// Validate evaluates the "val" split.
func (n *Nitro) Validate() (map[string]float64, error) { return n.Evaluate("val") }

// ErrNoSplit is what the error for a split the data does not have matches (errors.Is).
var ErrNoSplit = errors.New("no such split")

// SplitError names a split the data does not have, and the splits it has.
type SplitError struct {
	Split string
	Have  []string
}

func (e *SplitError) Error() string {
	return fmt.Sprintf("no split %q: BuildData returned %v", e.Split, e.Have)
}

// Is makes errors.Is(err, ErrNoSplit) hold.
func (e *SplitError) Is(target error) bool { return target == ErrNoSplit }

// ErrInterrupted is what the error of an evaluation or a PredictAll that Interrupt cut short
// matches (errors.Is).
var ErrInterrupted = errors.New("evaluation interrupted")

// PartialError is Evaluate's error when Interrupt (Ctrl+C) stopped the split at a batch boundary.
// Metrics are finalized the way a whole split's are, but over the first Batches of its Total
// batches only: they are partial, never the split's metrics. Evaluate returns the same map beside
// this error, so a caller that checks only the error still sees the stop.
type PartialError struct {
	Split   string
	Batches int              // batches evaluated
	Total   int              // batches in the split
	Reason  runstatus.Status // StopRequested: the stop reason Train reports for the same interrupt
	Metrics map[string]float64
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("split %q: stopped (%s) after %d of %d batches: the metrics are partial", e.Split, e.Reason, e.Batches, e.Total)
}

// Is makes errors.Is(err, ErrInterrupted) hold.
func (e *PartialError) Is(target error) bool { return target == ErrInterrupted }

// Evaluate runs a split in eval mode and returns its finalized metrics: sums and counts added up
// over the split, then divided (a nil count is summed only, and an array with no count reaches
// FinalizeMetrics whole; with no Metrics hook, val_loss is each batch's Loss weighed by its real
// rows, the mean over the split's samples). With the metrics on the host, HostMetrics' results
// are combined the same way (package metrics). Layer state computed in eval mode is discarded,
// and the resident parameters are used as they are: no parameter is uploaded. The run is in
// EvalStepping meanwhile and returns to the phase it was in, the metrics going with that
// transition.
//
// Interrupt (what Ctrl+C means) stops the split at the next batch boundary; one still pending
// when Evaluate starts stops it before batch 0. Evaluate then returns the metrics of the batches
// it ran together with a *PartialError (matching ErrInterrupted), and the transition carries no
// metrics, so a monitor never takes partial ones for the split's. The interrupt is consumed: the
// next Evaluate or Train runs in full. Train's own validation is never cut short: there an
// Interrupt ends training after the epoch's validation and checkpoint.
func (n *Nitro) Evaluate(split string) (m map[string]float64, err error) {
	prev := n.tracker.Phase()
	defer n.enter("evaluate", &err, func(err error) {
		if err != nil {
			n.setPhase(prev, nil)
		} else {
			n.setPhase(prev, m)
		}
	})()
	n.report()
	if err := n.checkDrift(fmt.Sprintf("Evaluate(%q)", split)); err != nil { // Validate is Evaluate("val")
		return nil, err
	}
	src, ok := n.data[split]
	if !ok && n.specOnly() {
		return nil, n.noDataError("evaluate")
	}
	if !ok {
		return nil, &SplitError{Split: split, Have: sortedKeys(n.data)}
	}
	n.setPhase(monitors.EvalStepping{}, nil)
	return n.evalLoop(split, src, true)
}

// evaluate is Train's validation: the whole split, whatever Interrupt says (an interrupted
// epoch still validates in full before the run stops).
func (n *Nitro) evaluate(split string, src Source) (map[string]float64, error) {
	return n.evalLoop(split, src, false)
}

// evalLoop runs a split, one tick of the progress counter per batch. When interruptible, an
// Interrupt ends it at a batch boundary with the partial metrics and a *PartialError.
func (n *Nitro) evalLoop(split string, src Source, interruptible bool) (_ map[string]float64, err error) {
	width := n.splitWidth[split]
	if n.noEvalProgram() {
		return nil, n.noEvalHook(split) // manual.go
	}
	keys := n.evalKeys(n.splitAvail[split])
	// The producer pads a short final batch to the compiled width and transfers the padded one;
	// Item.Rows is the real count, which picks the program that slices the padding away.
	stream, err := n.evalStream(src, max(n.st.epoch, 1), keys, width)
	if err != nil {
		return nil, fmt.Errorf("split %q: %w", split, err)
	}
	defer func() {
		if cerr := stream.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("split %q: closing the stream: %w", split, cerr)
		}
	}()
	var acc metrics.Accumulator
	seen := 0
	for i := 0; i < src.Len(); i++ {
		if interruptible && n.consumeInterrupt() {
			break
		}
		it, err := n.next(stream, keys, "split "+strconv.Quote(split)+",")
		var be *prefetch.BatchError
		var pe *prefetch.PadError
		if errors.As(err, &be) && errors.As(err, &pe) {
			return nil, fmt.Errorf("split %q, batch %d has %d rows, more than batch 0's %d: only the final batch may differ, and only by being shorter", split, be.Index, pe.Rows, pe.Width)
		}
		if err != nil {
			return nil, fmt.Errorf("split %q: %w", split, err)
		}
		p, err := n.evalProgram(width, n.evalRows(width, it.Rows), keys)
		if err != nil {
			return nil, errors.Join(err, freeBatch(it.Device, keys))
		}
		outs, err := n.execute(p, n.modelArgs(it.Device, keys, false))
		if err = errors.Join(err, freeBatch(it.Device, keys)); err != nil {
			return nil, fmt.Errorf("split %q, batch %d: %w", split, it.Index, err)
		}
		ms, err := n.batchMetrics(split, p, outs, it)
		if err == nil {
			err = acc.Add(ms)
		}
		if err = errors.Join(err, freeTensors(outs)); err != nil { // free device buffers now, not at the next GC
			return nil, fmt.Errorf("split %q, batch %d: %w", split, i, err)
		}
		seen++
		n.tracker.Tick()
	}
	res, err := n.finalizeSplit(&acc, split)
	if err != nil {
		return nil, err
	}
	if seen < src.Len() {
		return res, &PartialError{Split: split, Batches: seen, Total: src.Len(), Reason: StopRequested, Metrics: res}
	}
	return res, nil
}

// consumeInterrupt reports whether an Interrupt is pending and, if so, takes it with the stop
// request it made: the caller that stops for it has surfaced it, so no later entry point (a
// Train that would stop after one epoch) acts on it again.
func (n *Nitro) consumeInterrupt() bool {
	if !n.interrupted.CompareAndSwap(true, false) {
		return false
	}
	n.tracker.ClearStop()
	return true
}

// metricValue reads one of an eval program's metric outputs back. A metric the run branches on
// (the checkpoint ranking or early-stopping metric of the val split) goes through the validated
// readback; the others are only reported, and a failed readback of them is not worth a stop.
func (n *Nitro) metricValue(split, name string, t *tensors.Tensor) (float64, error) {
	if n.ck.isControl(split, name) {
		return readControlScalar(t, "metric "+name)
	}
	return scalarValue(t), nil
}

func scalarValue(t *tensors.Tensor) float64 {
	switch x := t.Value().(type) {
	case float64:
		return x
	case float32:
		return float64(x)
	}
	return 0
}
