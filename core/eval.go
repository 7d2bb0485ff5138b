package core

import (
	"errors"
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strconv"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/runstatus"
)

func valueOfOutputs(o Outputs) reflect.Value { return reflect.ValueOf(o) }

func tensorsShape(dtype string, size int) shapes.Shape { return shapes.Make(dtypeOf(dtype), size) }

// ValLoss is the metric reported when the experiment has no Metrics hook: Loss, through its own
// batch routing, averaged over batches (a count of 1 per batch).
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
// nothing. Validation only frees those outputs, a cost of one output buffer per batch.
func (n *Nitro) evalProgram(width, real int, keys []string) (*program, error) {
	return n.memo(fmt.Sprintf("eval/%d/%d/%v", width, real, keys), func() (*program, error) {
		metricHook := n.metrics
		if metricHook == nil {
			metricHook = n.loss
		}
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
			if n.metrics == nil {
				loss := n.loss.call(view, valueOfOutputs(out), mb).Interface().(*graph.Node)
				meta.outNames, meta.hasCount = []string{ValLoss}, []bool{false}
				outs = append(outs, loss)
			} else {
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

// metricOutputs calls Metrics and lists each metric's sum and (unless nil) count as float64
// scalars, recording their names and which have a count in meta.
func (n *Nitro) metricOutputs(view any, out Outputs, mb map[string]*graph.Node, meta *program) []*graph.Node {
	var outs []*graph.Node
	ms := n.metrics.call(view, valueOfOutputs(out), mb).Interface().(map[string]Metric)
	for _, name := range sortedKeys(ms) {
		m := ms[name]
		if m.Sum == nil || m.Sum.Rank() != 0 {
			panic(fmt.Errorf("metric %q: Sum must be a scalar node, got %v", name, shapeOf(m.Sum)))
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

// ErrInterrupted is what the error of an evaluation that Interrupt cut short matches (errors.Is).
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
// over the split, then divided (a nil count is summed only; with no Metrics hook, val_loss is the
// mean of Loss over batches). Layer state computed in eval mode is discarded, and the resident
// parameters are used as they are: no parameter is uploaded. The run is in EvalStepping meanwhile
// and returns to the phase it was in, the metrics going with that transition.
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
	if err := n.checkDrift("Evaluate"); err != nil {
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
	metricHook := n.metrics
	if metricHook == nil {
		metricHook = n.loss
	}
	keys := routed(n.splitAvail[split], n.forward, metricHook)
	// The producer pads a short final batch to the compiled width and transfers the padded one;
	// Item.Rows is the real count, which picks the program that slices the padding away.
	stream, err := n.batchStream(src, max(n.st.epoch, 1), keys, width, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("split %q: %w", split, err)
	}
	defer func() {
		if cerr := stream.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("split %q: closing the stream: %w", split, cerr)
		}
	}()
	sums, counts := map[string]float64{}, map[string]float64{}
	var names []string
	var withCount []bool
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
		p, err := n.evalProgram(width, it.Rows, keys)
		if err != nil {
			return nil, errors.Join(err, freeBatch(it.Device, keys))
		}
		outs, err := n.run(p, n.modelArgs(it.Device, keys, false))
		if err = errors.Join(err, freeBatch(it.Device, keys)); err != nil {
			return nil, fmt.Errorf("split %q, batch %d: %w", split, it.Index, err)
		}
		names, withCount = p.outNames, p.hasCount
		j := 0
		for m, name := range p.outNames {
			v, err := n.metricValue(split, name, outs[j])
			if err != nil {
				return nil, fmt.Errorf("split %q, batch %d: %w", split, i, err)
			}
			sums[name] += v
			j++
			if p.hasCount[m] {
				c, err := n.metricValue(split, name, outs[j])
				if err != nil {
					return nil, fmt.Errorf("split %q, batch %d: %w", split, i, err)
				}
				counts[name] += c
				j++
			} else if n.metrics == nil {
				counts[name]++
			}
		}
		if err := freeTensors(outs); err != nil { // free device buffers now, not at the next GC
			return nil, fmt.Errorf("split %q, batch %d: %w", split, i, err)
		}
		seen++
		n.tracker.Tick()
	}
	res := map[string]float64{}
	for m, name := range names {
		if withCount[m] || n.metrics == nil {
			res[name] = sums[name] / counts[name]
		} else {
			res[name] = sums[name]
		}
	}
	// A finalizer is shown the sums of at least one batch: with none there is nothing to finalize.
	if n.acc.finalizer != nil && seen > 0 {
		res = n.acc.finalizer.FinalizeMetrics(res, split)
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

// forwardProgram is the program Predict runs for a batch whose fields route fwd to Forward, at
// width, and the batch fields it takes. It is the full-width eval program of a split that routes
// Forward the same fields, so that Validate/Evaluate and Predict share one compiled forward: the
// "val" split's first, then "test", then the others by name. With no such split (a Nitro built
// from input specs, or a batch carrying an optional field no split has) it is Forward alone.
func (n *Nitro) forwardProgram(width int, fwd []string) (*program, []string, error) {
	metricHook := n.metrics
	if metricHook == nil {
		metricHook = n.loss
	}
	order := []string{"val", "test"}
	for _, split := range sortedKeys(n.splitAvail) {
		if split != "val" && split != "test" {
			order = append(order, split)
		}
	}
	for _, split := range order {
		avail, ok := n.splitAvail[split]
		if !ok || !slices.Equal(routed(avail, n.forward), fwd) {
			continue
		}
		keys := routed(avail, n.forward, metricHook)
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
// anything that is not a Batch, naming the fields Forward declares; for a Source use PredictAll.
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
	w, err := batchWidth(b)
	if err != nil {
		return nil, err
	}
	n.setPhase(monitors.EvalStepping{}, nil)
	return n.predictPadded(b, w, w)
}

// PredictAll yields each batch's outputs lazily, in order. A short final batch is padded to the
// compiled width (batch 0's) and its outputs sliced back to its real rows.
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
			b, err := src.BatchAt(i)
			if err != nil {
				yield(nil, fmt.Errorf("batch %d: %w", i, err))
				return
			}
			real, err := batchWidth(b)
			if err == nil && width < 0 {
				width = real
			}
			if err == nil && real > width {
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
	outs, err := n.run(p, n.modelArgs(padded, keys, false))
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

// SetDevice writes a new value into a Device field of this live Nitro. It reuses every compiled
// program: Device values are program inputs, never part of a key. It refuses a GraphConst field
// (it bakes: build a new Nitro, which hits every cache entry the change does not move), a Host
// field (traced code never sees it) and a value of another dtype or shape (that would be another
// program, or fail inside XLA).
func (n *Nitro) SetDevice(name string, value any) (err error) {
	defer n.enter("SetDevice", &err, nil)()
	if n.isScheduledDevice(name) {
		return fmt.Errorf("Device field %s is driven by a schedule, which rewrites it every optimizer step: a value written here would last until the next step and no longer; change the schedule instead (Schedules()[%q])", name, name)
	}
	old, ok := n.dev[name]
	if err := markers.SetDevice(n.e, name, value); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("internal: Device field %q has no device value", name)
	}
	v, err := markers.DeviceValueOf(n.e, name)
	if err != nil {
		return err
	}
	t, err := hostTensor(v)
	if err != nil {
		return fmt.Errorf("Device field %s: %w", name, err)
	}
	if !t.Shape().Equal(old.Shape()) {
		return fmt.Errorf("Device field %s: new value has shape %s, the resident one %s", name, t.Shape(), old.Shape())
	}
	return n.replaceDevice(name, t)
}

// replaceDevice installs t (host) as Device field name's device copy, freeing the old one only
// once the new one is on the device: a failed upload leaves the field as it was.
func (n *Nitro) replaceDevice(name string, t *tensors.Tensor) error {
	old := n.dev[name]
	nt, err := n.upload(t, &n.uploads.Device)
	if err != nil {
		return fmt.Errorf("Device field %s: %w", name, err)
	}
	n.dev[name] = nt
	if old != nil {
		if err := old.FinalizeAll(); err != nil {
			return fmt.Errorf("Device field %s: freeing the old value: %w", name, err)
		}
	}
	return nil
}

// DeviceValue reads a Device field's current value (the host copy the experiment holds).
func (n *Nitro) DeviceValue(name string) (any, error) { return markers.DeviceValueOf(n.e, name) }
