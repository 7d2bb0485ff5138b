package core

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
)

// Train runs the loop to the run's horizon (MaxEpochs, or MaxSteps optimizer steps): per
// optimizer step, accum runs of the gradient program then one run of the optimizer program (or
// one fused program). The run is reported in periods (periods.go): an epoch, or ValEvery steps
// across epochs. It reads as the run's sequence: publish the phase, step (one "train" line per
// optimizer step), validate when a "val" split exists, hand the period's summary to the console
// and the logger ("validate" and "data" lines), decide whether to stop (the stop flag, early
// stopping), save the period's checkpoint when due (recording that decision; a checkpoint inside
// an epoch records its data position), and finish the logger's record (completed, early_stop,
// requested or error). It starts where the run stands (a resumed run's steps included), inside
// an epoch when a period, an Interrupt or a bound cut one short. It returns an error for a
// non-finite loss, naming the step and epoch, for a non-finite or missing control metric, and for
// a failed checkpoint save; the run's phase is then Failed, else Done. The record is finished
// once: a later Train on the same Nitro writes to a finished logger, which a JSONLogger refuses
// (one warning per kind of line). TrainContext is Train that a context stops (Ctrl+C through
// signal.NotifyContext).
func (n *Nitro) Train() error { return n.train(nil) }

// train is Train and TrainContext; ctx, when not nil, interrupts the run once done.
func (n *Nitro) train(ctx context.Context) (err error) {
	var val map[string]float64 // finalized metrics, carried by the transition out of EvalStepping
	defer n.enter("train", &err, func(err error) {
		if err != nil {
			n.setPhase(monitors.Failed{Err: err}, val)
		} else {
			n.reportCompiles()
			n.setPhase(monitors.Done{}, val)
		}
		n.endLog(err) // after Done/Failed, so a monitor may still log on that transition
	})()
	n.tracker.Snapshot() // process-level monitors registered since New join this run
	n.report()
	if err := n.checkDrift("Train"); err != nil {
		return err
	}
	train, ok := n.spec.data["train"]
	if !ok && n.spec.specOnly() {
		return n.spec.noDataError("train")
	}
	if !ok {
		return fmt.Errorf("Train needs a \"train\" split; BuildData returned %v", sortedKeys(n.spec.data))
	}
	// A RequestStop made before Train is kept: the run trains one period, validates and stops.
	n.interrupted.Store(false)
	// Train consumes the stop it ends on: a later Evaluate (the CLI's test split) runs in full.
	defer func() { n.interrupted.Store(false); n.tracker.ClearStop() }()
	// Registered after that reset, so it runs first: no interrupt from ctx outlives this call.
	defer n.interruptWhenDone(ctx)()
	n.stopReason = ""
	if path := n.ck.stopped; path != "" {
		// Resuming a run that stopped early would re-satisfy the condition at once.
		n.spec.notice(fmt.Sprintf("%s records an early stop at epoch %d, and the early stopping configured now stops there too: nothing to train (start from its weights with WithCheckpoint, or relax the patience, to train on)", path, n.st.epoch))
		n.stopReason = StopEarly
		return nil
	}
	n.tracker.SetStepsPerEpoch(n.spec.stepsPerEpoch())
	n.measurePeak() // throughput.go: before training loads the device
	n.bound.openLog = false
	for n.hasMore() {
		start := time.Now()
		ep, _ := n.nextPosition()
		n.tracker.SetProgress(ep, n.st.step)
		n.setPhase(monitors.TrainStepping{}, val)
		res, err := n.trainPeriod(train)
		if err != nil {
			return err
		}
		if src, ok := n.spec.data["val"]; ok {
			n.setPhase(monitors.EvalStepping{}, nil)
			if val, err = n.evaluate("val", src); err != nil {
				return fmt.Errorf("%s: %w", n.periodName(res), err)
			}
			res.Val = withPrefix("val_", val) // named as the record, the console and the board name them
		}
		res.Seconds = time.Since(start).Seconds()
		if res.Headline, err = n.headline(res); err != nil {
			return err
		}
		n.endEpoch(res)
		// The stop decision comes before the checkpoint, so the last checkpoint records it.
		reason, err := n.stopDecision(res)
		if err != nil {
			return fmt.Errorf("%s: %w", n.periodName(res), err)
		}
		if reason == "" && n.atHorizon() {
			reason = StopCompleted
		}
		if n.checkpointDue(reason) {
			if err := n.saveCheckpoint(res, reason); err != nil {
				return err
			}
		}
		if reason != "" || n.bound.reached(res.Epoch, n.st.step) { // TrainSteps/TrainEpochs: the call ends, the run goes on
			n.stopReason = cmp.Or(reason, StopCompleted)
			return nil
		}
	}
	n.stopReason = StopCompleted
	return nil
}

// periodName names the period just trained in errors: its epoch, and with step periods its step.
func (n *Nitro) periodName(res EpochResult) string {
	if n.spec.stepPeriods() {
		return fmt.Sprintf("step %d (epoch %d)", n.st.step, res.Epoch)
	}
	return fmt.Sprintf("epoch %d", res.Epoch)
}

// trainPeriod trains one period from the next position (periods.go): the rest of an epoch, or
// with ValEvery steps across as many epochs as they span, and returns its summary (without
// validation). It ends early at an Interrupt or the call's bound.
func (n *Nitro) trainPeriod(train prefetch.Source) (EpochResult, error) {
	sums := stepSums{train: map[string]float64{}, step: map[string]float64{}}
	sums.clock.begin()
	for {
		ep, from := n.nextPosition()
		n.tracker.SetProgress(ep, n.st.step)
		ended, err := n.trainEpoch(train, ep, from, &sums)
		if err != nil {
			return EpochResult{}, err
		}
		if ended || !n.spec.stepPeriods() || !n.hasMore() {
			res := sums.result(ep)
			res.timed(&sums.clock)
			n.spec.tput.account(&res)
			res.DataWaitFrac = sums.waitFraction()
			return res, nil
		}
		n.st.epoch = ep // its batches ran out inside the period: the next span starts epoch ep+1
	}
}

// trainEpoch runs optimizer steps of epoch ep from train batch from (0, or where the epoch was cut
// short), logging each step's "train" line into sums, until the epoch's batches run out or ended
// says the period ended first: by the schedule (periodEnds), an Interrupt, or the call's bound.
func (n *Nitro) trainEpoch(train prefetch.Source, ep, from int, sums *stepSums) (ended bool, err error) {
	keys := routed(n.spec.splitAvail["train"], n.spec.trainHooks()...)
	accum := n.spec.cfg.accum.value
	to := from + (train.Len()-from)/accum*accum // whole optimizer steps
	// The stream calls the source's BeginEpoch; Close stops its goroutines and frees every batch
	// it staged, on every way out of the epoch (an Interrupt, a non-finite loss, an error).
	stream, err := n.batchStream(train, ep, keys, 0, from, to)
	if err != nil {
		return false, fmt.Errorf("epoch %d: %w", ep, err)
	}
	spanStart := time.Now()
	defer func() {
		sums.addWait(stream.WaitFraction(), time.Since(spanStart))
		if cerr := stream.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("epoch %d: closing the train stream: %w", ep, cerr)
		}
	}()
	for i := from; i < to; i += accum {
		n.st.data = dataPosition{epoch: ep, batch: i}
		sums.read = n.log.logs(n.st.step + 1)
		vals, err := n.optimizationStep(stream, keys, sums)
		if err != nil {
			return false, fmt.Errorf("epoch %d, step %d: %w", ep, n.st.step+1, err)
		}
		loss := vals.Loss()
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			where := ""
			if n.spec.cfg.accum.value > 1 {
				where = fmt.Sprintf(" (micro-batch %d)", len(vals.Micro))
			}
			return false, fmt.Errorf("non-finite loss %v at epoch %d, step %d%s: stopping; resume from the last checkpoint with a lower learning rate", loss, ep, n.st.step+1, where)
		}
		n.st.step++
		sums.steps++
		n.st.data.batch = i + accum
		n.tracker.SetProgress(ep, n.st.step)
		n.tracker.SetLoss(loss)
		n.tracker.Tick()
		n.log.step(n.st.step, ep, sums)
		// An Interrupt (Ctrl+C) or the call's bound (TrainSteps) stops at this step boundary, then
		// validates as usual; so does the end of a step period.
		if n.stepInterrupted(vals.Stop) || n.bound.atStep(n.st.step) || n.periodEnds(n.st.step) { // collective.go
			return true, nil
		}
	}
	return false, nil
}

// stepSums adds up an epoch's per-micro-batch loss and TrainMetrics for its means, and the current
// optimizer step's for its "train" line.
type stepSums struct {
	loss   float64
	micro  int
	train  map[string]float64
	trainN int  // micro-batches whose TrainMetrics were read
	read   bool // read this step's TrainMetrics back (a logged step)

	stepLoss  float64
	stepMicro int
	step      map[string]float64 // this step's TrainMetrics sums (when read)
	clock     stepClock          // the steps' wall time (steptiming.go)

	steps int // optimizer steps of the period
	// The batch streams' waiting, weighted by each stream's wall time: a period may span epochs.
	waited, spanned time.Duration
}

// addWait adds one batch stream's wait fraction over its wall time d.
func (s *stepSums) addWait(frac float64, d time.Duration) {
	s.waited += time.Duration(frac * float64(d))
	s.spanned += d
}

// waitFraction is the period's share of its streams' time spent waiting on batches.
func (s *stepSums) waitFraction() float64 {
	if s.spanned <= 0 {
		return 0
	}
	return float64(s.waited) / float64(s.spanned)
}

func (s *stepSums) result(ep int) EpochResult {
	res := EpochResult{Epoch: ep, TrainLoss: s.loss / float64(max(s.micro, 1)), Steps: s.steps}
	if len(s.train) > 0 {
		res.Train = map[string]float64{}
		for k, v := range s.train {
			res.Train[k] = v / float64(max(s.trainN, 1))
		}
	}
	return res
}

// stepValues is the current step's "train" line: "loss" and each TrainMetric, the means over the
// step's micro-batches (the loss wins over a TrainMetric of the same name).
func (s *stepSums) stepValues() map[string]float64 {
	d := float64(max(s.stepMicro, 1))
	v := make(map[string]float64, len(s.step)+1)
	for k, x := range s.step {
		v[k] = x / d
	}
	v["loss"] = s.stepLoss / d
	return v
}

// endStep clears the current step's sums.
func (s *stepSums) endStep() {
	s.stepLoss, s.stepMicro = 0, 0
	clear(s.step)
}

// optimizationStep runs the next optimizer step on the stream's batches: the step's scheduled
// Device values, then the step itself (accum micro-batches and the update, or one fused or manual
// program), whose values go into the sums. It returns the engine's values as they are: the first
// non-finite loss ends Micro, before the update, and Stop says whether, over several processes,
// any of them voted to stop after this step (an Interrupt).
func (n *Nitro) optimizationStep(stream *prefetch.Stream[prefetch.Batch], keys []string, sums *stepSums) (engine.StepValues, error) {
	step := n.st.step + 1
	if err := n.applyDeviceSchedules(step); err != nil {
		return engine.StepValues{}, err
	}
	next := func() (map[string]*tensors.Tensor, error) {
		it, err := n.next(stream, keys, "train")
		return it.Device, err
	}
	vals, err := n.eng.Step(step, keys, next, sums.read)
	if err != nil {
		return vals, err
	}
	for _, m := range vals.Micro {
		sums.add(m)
	}
	return vals, nil
}

// endEpoch records a finished epoch: the epoch counter, the history, the logger's "validate" and
// "data" lines and the console's line.
func (n *Nitro) endEpoch(res EpochResult) {
	n.st.epoch = res.Epoch
	res.Step = n.st.step
	if n.spec.stepPeriods() {
		res.TotalSteps = n.TotalSteps()
	}
	n.history = append(n.history, res)
	n.log.epoch(n.st.step, res)
	if n.spec.console != nil {
		n.spec.console.Epoch(res, n.spec.cfg.maxEpochs.value)
	}
}

// add counts one micro-batch: its loss (read back by the validated readback the loop branches
// on) and, on a step that is read, its TrainMetrics (on the steps LogEvery skips the engine does
// not read them at all).
func (s *stepSums) add(m engine.Micro) {
	s.loss += m.Loss
	s.micro++
	s.stepLoss += m.Loss
	s.stepMicro++
	if m.Metrics == nil {
		return
	}
	s.trainN++
	for name, v := range m.Metrics {
		s.train[name] += v
		s.step[name] += v
	}
}
