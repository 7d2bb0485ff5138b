package core

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
)

// Train runs the loop for the resolved number of epochs: per optimizer step, accum runs of the
// gradient program then one run of the optimizer program (or one fused program); validation after
// each epoch when a "val" split exists. It reads as the run's sequence: publish the phase, step
// (one "train" line per optimizer step), hand the epoch's summary to the console and the logger
// ("validate" and "data" lines), decide whether to stop (the stop flag, early stopping), save the
// epoch's checkpoint (recording that decision), and finish the logger's record (completed,
// early_stop, requested or error). It starts after the epochs already done (a resumed run's
// included) and finishes an epoch an Interrupt cut short first. It returns an error for a
// non-finite loss, naming the step and epoch, for a non-finite or missing control metric, and for
// a failed checkpoint save; the run's phase is then Failed, else Done. The record is finished
// once: a later Train on the same Nitro writes to a finished logger, which a JSONLogger refuses
// (one warning per kind of line).
func (n *Nitro) Train() (err error) {
	var val map[string]float64 // finalized metrics, carried by the transition out of EvalStepping
	defer n.enter("train", &err, func(err error) {
		if err != nil {
			n.setPhase(monitors.Failed{Err: err}, val)
		} else {
			n.setPhase(monitors.Done{}, val)
		}
		n.endLog(err) // after Done/Failed, so a monitor may still log on that transition
	})()
	n.tracker.Snapshot() // process-level monitors registered since New join this run
	n.report()
	if err := n.checkDrift("Train"); err != nil {
		return err
	}
	train, ok := n.data["train"]
	if !ok && n.specOnly() {
		return n.noDataError("train")
	}
	if !ok {
		return fmt.Errorf("Train needs a \"train\" split; BuildData returned %v", sortedKeys(n.data))
	}
	// A RequestStop made before Train is kept: the run trains one epoch, validates and stops.
	n.interrupted.Store(false)
	// Train consumes the stop it ends on: a later Evaluate (the CLI's test split) runs in full.
	defer func() { n.interrupted.Store(false); n.tracker.ClearStop() }()
	n.stopReason = ""
	if path := n.ck.stopped; path != "" {
		// Resuming a run that stopped early would re-satisfy the condition at once.
		n.notice(fmt.Sprintf("%s records an early stop at epoch %d, and the early stopping configured now stops there too: nothing to train (start from its weights with WithCheckpoint, or relax the patience, to train on)", path, n.st.epoch))
		n.stopReason = StopEarly
		return nil
	}
	n.tracker.SetStepsPerEpoch(train.Len() / n.cfg.accum.value)
	first, from := n.st.epoch+1, 0
	if n.partialEpoch() {
		first, from = n.st.data.epoch, n.st.data.batch // an epoch that ended part-way (Interrupt): finish it first
	}
	n.bound.openLog = false
	for ep := first; ep <= n.lastEpoch(); ep++ {
		start := time.Now()
		n.tracker.SetProgress(ep, n.st.step)
		n.setPhase(monitors.TrainStepping{}, val)
		res, err := n.trainEpoch(train, ep, from)
		if err != nil {
			return err
		}
		from = 0
		if src, ok := n.data["val"]; ok {
			n.setPhase(monitors.EvalStepping{}, nil)
			if val, err = n.evaluate("val", src); err != nil {
				return fmt.Errorf("epoch %d: %w", ep, err)
			}
			res.Val = val
		}
		res.Seconds = time.Since(start).Seconds()
		n.endEpoch(res)
		// The stop decision comes before the checkpoint, so the last checkpoint records it.
		reason, err := n.stopDecision(res)
		if err != nil {
			return fmt.Errorf("epoch %d: %w", ep, err)
		}
		if reason == "" && ep == n.cfg.maxEpochs.value && !n.partialEpoch() {
			reason = StopCompleted
		}
		if err := n.saveCheckpoint(res, reason); err != nil {
			return err
		}
		if reason != "" || n.boundReached(ep) { // TrainSteps/TrainEpochs: the call ends, the run goes on
			n.stopReason = cmp.Or(reason, StopCompleted)
			return nil
		}
	}
	n.stopReason = StopCompleted
	return nil
}

// trainEpoch runs one epoch's optimizer steps from train batch from (0, or where an interrupted
// epoch stopped), logging each step's "train" line, and returns its summary (without
// validation). An Interrupt ends the epoch at the next step boundary.
func (n *Nitro) trainEpoch(train Source, ep, from int) (res EpochResult, err error) {
	keys := routed(n.splitAvail["train"], n.trainHooks()...)
	accum := n.cfg.accum.value
	to := from + (train.Len()-from)/accum*accum // whole optimizer steps
	// The stream calls the source's BeginEpoch; Close stops its goroutines and frees every batch
	// it staged, on every way out of the epoch (an Interrupt, a non-finite loss, an error).
	stream, err := n.batchStream(train, ep, keys, 0, from, to)
	if err != nil {
		return EpochResult{}, fmt.Errorf("epoch %d: %w", ep, err)
	}
	defer func() {
		if cerr := stream.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("epoch %d: closing the train stream: %w", ep, cerr)
		}
	}()
	sums := stepSums{train: map[string]float64{}, step: map[string]float64{}}
	steps := 0
	sums.clock.begin()
	for i := from; i < to; i += accum {
		n.st.data = dataPosition{epoch: ep, batch: i}
		sums.read = n.logsStep(n.st.step + 1)
		loss, micro, err := n.optimizationStep(stream, keys, &sums)
		if err != nil {
			return EpochResult{}, fmt.Errorf("epoch %d, step %d: %w", ep, n.st.step+1, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			where := ""
			if n.cfg.accum.value > 1 {
				where = fmt.Sprintf(" (micro-batch %d)", micro)
			}
			return EpochResult{}, fmt.Errorf("non-finite loss %v at epoch %d, step %d%s: stopping; resume from the last checkpoint with a lower learning rate", loss, ep, n.st.step+1, where)
		}
		n.st.step++
		steps++
		n.st.data.batch = i + accum
		n.tracker.SetProgress(ep, n.st.step)
		n.tracker.SetLoss(loss)
		n.tracker.Tick()
		n.logStep(ep, &sums)
		if n.interrupted.Load() || n.atStepBound() {
			break // Interrupt (Ctrl+C) or TrainSteps: stop at this step boundary, then validate as usual
		}
	}
	res = sums.result(ep, steps)
	res.timed(&sums.clock)
	res.DataWaitFrac = stream.WaitFraction()
	return res, nil
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
}

func (s *stepSums) result(ep, steps int) EpochResult {
	res := EpochResult{Epoch: ep, TrainLoss: s.loss / float64(max(s.micro, 1)), Steps: steps}
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

// optimizationStep runs one optimizer step on train batches [i, i+accum) and returns its loss
// (the last micro-batch's) and that micro-batch's 1-based number: the first non-finite loss stops
// there, before the update.
func (n *Nitro) optimizationStep(stream *prefetch.Stream[Batch], keys []string, sums *stepSums) (float64, int, error) {
	if err := n.applyDeviceSchedules(n.st.step + 1); err != nil {
		return 0, 0, err
	}
	if n.opts.fused || n.trainStep != nil { // a manual step is one program too
		it, err := n.next(stream, keys, "train")
		if err != nil {
			return 0, 0, err
		}
		loss, err := n.fusedStep(it.Device, keys, sums)
		return loss, 1, err
	}
	var acc []*tensors.Tensor // nil: the first micro-batch starts the sums on the device
	var loss float64
	for k := 0; k < n.cfg.accum.value; k++ {
		it, err := n.next(stream, keys, "train")
		if err != nil {
			return 0, 0, err
		}
		var grads []*tensors.Tensor
		if loss, grads, err = n.gradientStep(it.Device, keys, acc, sums); err != nil {
			return 0, 0, err
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			// the caller stops on it, before the update
			return loss, k + 1, freeTensors(grads)
		}
		acc = grads
	}
	return loss, n.cfg.accum.value, n.optimizerStep(acc)
}

// endEpoch records a finished epoch: the epoch counter, the history, the logger's "validate" and
// "data" lines and the console's line.
func (n *Nitro) endEpoch(res EpochResult) {
	n.st.epoch = res.Epoch
	n.history = append(n.history, res)
	n.logEpoch(res)
	if n.console != nil {
		n.console.Epoch(res, n.cfg.maxEpochs.value)
	}
}

// gradientStep runs the gradient program on one micro-batch and returns the validated loss and
// the (accumulated) gradients of every parameter array, still on the device. With accum > 1, acc
// holds the step's running sums (donated: the outputs replace them), or nil on the step's first
// micro-batch, whose sums start from zeros in the program (see gradientProgram).
func (n *Nitro) gradientStep(b Batch, keys []string, acc []*tensors.Tensor, sums *stepSums) (float64, []*tensors.Tensor, error) {
	w, err := n.trainBatchWidth(b)
	if err != nil {
		return 0, nil, err
	}
	p, err := n.gradientProgram(w, keys)
	if err != nil {
		return 0, nil, err
	}
	args := n.modelArgs(b, keys, true)
	if n.cfg.accum.value > 1 {
		// Sums are parameter-sized: counted with the parameters, so a test of zero parameter
		// uploads per step also proves that no sums came from the host.
		first := acc == nil
		if first {
			// Read only by a select that discards them: the parameters, already on the device
			// and passed twice (neither use donates them).
			for _, g := range n.st.groups {
				for _, t := range g.params {
					args = append(args, arg{t: t, counter: &n.uploads.Params})
				}
			}
		}
		for _, a := range acc {
			args = append(args, arg{t: a, donate: true, counter: &n.uploads.Params})
		}
		args = append(args, n.firstArg(first))
	}
	outs, err := n.execute(p, args)
	if err = errors.Join(err, freeBatch(b, keys)); err != nil {
		return 0, nil, err
	}
	G, S := n.paramArrays(), len(n.stateVars)
	loss, err := readControlScalar(outs[0], "loss")
	if err != nil {
		return 0, nil, err
	}
	n.st.layer = outs[1+G : 1+G+S]
	sums.add(loss, p.outNames, outs[1+G+S:])
	return loss, outs[1 : 1+G], freeTensors(outs[0:1], outs[1+G+S:])
}

// fusedStep runs the fused train step on one batch: parameters, optimizer state and layer state
// are replaced (donated) in place of the two-program step's gradient and optimizer runs. The
// program keeps the old parameters and state when the loss is non-finite, and the caller stops
// the run on that loss, as the two-program step does before its update.
func (n *Nitro) fusedStep(b Batch, keys []string, sums *stepSums) (float64, error) {
	w, err := n.trainBatchWidth(b)
	if err != nil {
		return 0, err
	}
	p, err := n.stepProgram(w, keys) // manual_step.go: TrainStep's program in manual mode
	if err != nil {
		return 0, err
	}
	step := n.st.step + 1
	args := n.modelArgs(b, keys, true)
	for i := range args[:n.paramArrays()] {
		args[i].donate = true // replaced by the update
	}
	for i := range n.groups {
		more, err := n.stateArgs(i, step)
		if err != nil {
			return 0, err
		}
		args = append(args, more...)
	}
	args = append(args, n.stepArg(step))
	outs, err := n.execute(p, args)
	if err = errors.Join(err, freeBatch(b, keys)); err != nil {
		return 0, err
	}
	loss, err := readControlScalar(outs[0], "loss")
	if err != nil {
		return 0, err
	}
	rest := n.takeOptimizerOutputs(outs[1:])
	S := len(n.stateVars)
	n.st.layer = rest[:S]
	sums.add(loss, p.outNames, rest[S:])
	return loss, freeTensors(outs[0:1], rest[S:])
}

// trainBatchWidth is a train batch's row count, which must be the train split's.
func (n *Nitro) trainBatchWidth(b Batch) (int, error) {
	w, err := batchWidth(b)
	if err == nil && w != n.trainWidth {
		err = fmt.Errorf("train batch has %d rows, the train split's batches have %d: a train source must yield equal batches", w, n.trainWidth)
	}
	return w, err
}

// freeBatch releases the device copies of a batch's transferred fields as soon as the step that
// used them is done: the host GC cannot see device memory, so leaving them to finalizers can run
// the device out of memory while the host looks idle. Host data stays (the source may reuse it).
func freeBatch(b Batch, keys []string) error {
	var errs []error
	for _, k := range keys {
		if t := b[k]; t != nil && t.IsOnAnyDevice() {
			if err := t.InvalidateOnDevice(); err != nil {
				errs = append(errs, fmt.Errorf("freeing batch field %q on the device: %w", k, err))
			}
		}
	}
	return errors.Join(errs...)
}

// add counts one micro-batch: its loss (already read back, by the validated readback the loop
// branches on) and, on a step that is read, its TrainMetrics outputs. Train metrics are logged,
// never branched on, so they skip the validated readback; on the steps LogEvery skips they are
// not read at all (the outputs are freed unread).
func (s *stepSums) add(loss float64, names []string, outs []*tensors.Tensor) {
	s.loss += loss
	s.micro++
	s.stepLoss += loss
	s.stepMicro++
	if !s.read || len(names) == 0 {
		return
	}
	s.trainN++
	for i, name := range names {
		v := scalarValue(outs[i])
		s.train[name] += v
		s.step[name] += v
	}
}

// freeTensors finalizes program outputs already read back.
func freeTensors(groups ...[]*tensors.Tensor) error {
	var errs []error
	for _, ts := range groups {
		for _, t := range ts {
			if t != nil {
				if err := t.FinalizeAll(); err != nil {
					errs = append(errs, fmt.Errorf("freeing a program output: %w", err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// modelArgs lists parameters, layer state (donated when it is replaced), Device fields and batch fields.
func (n *Nitro) modelArgs(b Batch, keys []string, donateState bool) []arg {
	var args []arg
	for _, g := range n.st.groups {
		for _, t := range g.params {
			args = append(args, arg{t: t, counter: &n.uploads.Params})
		}
	}
	for _, s := range n.st.layer {
		args = append(args, arg{t: s, donate: donateState, counter: &n.uploads.LayerState})
	}
	for _, name := range n.devNames {
		args = append(args, arg{t: n.dev[name], counter: &n.uploads.Device})
	}
	for _, k := range keys {
		args = append(args, arg{t: b[k], counter: &n.uploads.Batch})
	}
	return args
}

// readControlScalar is the one validated readback for scalars the driver branches on. A readback
// that returns garbage without raising is a documented failure on PJRT stacks, so the value's
// shape is checked and a failed transfer is an error, never a silent zero.
func readControlScalar(t *tensors.Tensor, what string) (v float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading %s back from the device: %v", what, r)
		}
	}()
	if t == nil || !t.Ok() {
		return 0, fmt.Errorf("reading %s back from the device: the buffer is invalid", what)
	}
	if !t.Shape().IsScalar() {
		return 0, fmt.Errorf("reading %s back: expected a scalar, got %s", what, t.Shape())
	}
	switch x := t.Value().(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	default:
		return 0, fmt.Errorf("reading %s back: expected a float scalar, got %T", what, x)
	}
}
