package core

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/runstatus"
)

// ValLoss is the metric reported when the experiment has no Metrics hook: Loss, through its own
// batch routing, taken as the mean over a batch's real rows and so weighed by them: the split's
// val_loss is the mean over its samples, a short final batch counting for the rows it holds.
const ValLoss = engine.ValLoss

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
	src, ok := n.spec.data[split]
	if !ok && n.spec.specOnly() {
		return nil, n.spec.noDataError("evaluate")
	}
	if !ok {
		return nil, &SplitError{Split: split, Have: sortedKeys(n.spec.data)}
	}
	n.setPhase(monitors.EvalStepping{}, nil)
	return n.evalLoop(split, src, true)
}

// evaluate is Train's validation: the whole split, whatever Interrupt says (an interrupted
// epoch still validates in full before the run stops).
func (n *Nitro) evaluate(split string, src prefetch.Source) (map[string]float64, error) {
	return n.evalLoop(split, src, false)
}

// evalLoop runs a split, one tick of the progress counter per batch. When interruptible, an
// Interrupt ends it at a batch boundary with the partial metrics and a *PartialError.
func (n *Nitro) evalLoop(split string, src prefetch.Source, interruptible bool) (_ map[string]float64, err error) {
	width := n.spec.splitWidth[split]
	if n.spec.noEvalProgram() {
		return nil, n.spec.noEvalHook(split) // manual.go
	}
	keys := n.spec.evalKeys(n.spec.splitAvail[split])
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
		res, err := n.eng.Eval(it.Device, keys, width, it.Rows, func(name string) bool { return n.ck.isControl(split, name) })
		var ms map[string]metrics.Metric
		if err == nil {
			ms, err = n.spec.batchMetrics(res, it.Host)
		}
		if err == nil {
			err = acc.Add(ms)
		}
		if err != nil {
			return nil, fmt.Errorf("split %q, batch %d: %w", split, it.Index, err)
		}
		seen++
		n.tracker.Tick()
	}
	if err := n.spec.reduceSplit(&acc, split); err != nil { // collective.go: the whole run's sums
		return nil, err
	}
	res, err := n.spec.finalizeSplit(&acc, split)
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
