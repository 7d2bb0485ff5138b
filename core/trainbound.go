package core

import "fmt"

// trainBound is where a TrainSteps or TrainEpochs call stops, as totals of the run (a resumed
// run's steps and epochs included); zero means the run's horizon (MaxEpochs). openLog is set when
// the call stopped at its bound before the horizon: the run goes on, so its record stays open.
type trainBound struct {
	steps, epochs int
	openLog       bool
}

// TrainSteps trains until the run has taken total optimizer steps (Step() == total), stopping
// mid-epoch at that step boundary if need be; n.TrainSteps(n.Step()+k) takes k more. The count
// is the run's, so after a crash the same call on a Nitro built WithResume trains only the
// remaining steps, and the run ends bit for bit where an uninterrupted one does. An epoch cut
// short at the bound is validated and checkpointed as an Interrupt's is (the checkpoint records
// the data position) and the next call finishes it from the next batch; early stopping judges
// the epoch only then (its patience counts whole epochs). total beyond the horizon
// (TotalSteps: schedules are defined over exactly it) is refused, as is a negative total; total <=
// Step() trains nothing and warns (even when Quiet), since reading total as a count of more steps
// is the usual slip, while a resumed run replaying its calls needs the earlier ones to pass.
// Unless the call reaches the horizon (or stops early, on request or on an error), the run's log
// record stays open for the next call; EndRun finishes it.
func (n *Nitro) TrainSteps(total int) error {
	if total < 0 {
		return fmt.Errorf("TrainSteps(%d): total is the run's optimizer step to train up to, so it must be >= 0; n.TrainSteps(n.Step()+k) takes k more steps", total)
	}
	if total > n.TotalSteps() {
		return fmt.Errorf("TrainSteps(%d): the run's horizon is %d optimizer steps (%s): raise it, since schedules are defined over the horizon",
			total, n.TotalSteps(), n.spec.horizonKnob())
	}
	if total <= n.st.step {
		n.spec.warn(fmt.Sprintf("TrainSteps(%d): the run has taken %d steps already: nothing to train (total is the step to train up to, not a count: n.TrainSteps(n.Step()+k) takes k more)", total, n.st.step))
		return nil
	}
	return n.trainBounded(trainBound{steps: total})
}

// TrainEpochs trains until the run has completed total epochs (Epoch() == total, an epoch an
// Interrupt or TrainSteps cut short finished first); n.TrainEpochs(n.Epoch()+1) trains one more.
// Like TrainSteps it counts the run's epochs, so a resumed run trains the remaining ones, and it
// keeps the log record open unless it reaches the horizon. total beyond MaxEpochs is refused, as
// is a negative total; one already reached trains nothing and warns, as for TrainSteps.
func (n *Nitro) TrainEpochs(total int) error {
	if total < 0 {
		return fmt.Errorf("TrainEpochs(%d): total is the run's epoch to train up to, so it must be >= 0; n.TrainEpochs(n.Epoch()+1) trains one more", total)
	}
	if total > n.spec.horizonEpochs() {
		return fmt.Errorf("TrainEpochs(%d): the run's horizon ends in epoch %d (%s): raise it, since schedules are defined over the horizon",
			total, n.spec.horizonEpochs(), n.spec.horizonKnob())
	}
	if total < n.st.epoch || total == n.st.epoch && !n.partialEpoch() {
		n.spec.warn(fmt.Sprintf("TrainEpochs(%d): the run has completed %d epochs already: nothing to train (total is the epoch to train up to, not a count: n.TrainEpochs(n.Epoch()+1) trains one more)", total, n.st.epoch))
		return nil
	}
	return n.trainBounded(trainBound{epochs: total})
}

// EndRun finishes the run's log record when a TrainSteps or TrainEpochs call left it open (the
// run stopped before its horizon), with status requested: the run was ended by its caller. It
// does nothing otherwise. Later training on this Nitro logs to a finished record.
func (n *Nitro) EndRun() error {
	if !n.bound.openLog {
		return nil
	}
	n.bound.openLog = false
	n.stopReason = StopRequested
	n.finishRun(nil)
	return nil
}

func (n *Nitro) trainBounded(b trainBound) error {
	n.bound = b
	defer func() { n.bound.steps, n.bound.epochs = 0, 0 }()
	return n.Train()
}

// lastEpoch is the last epoch the current call trains, of a run of maxEpochs.
func (b *trainBound) lastEpoch(maxEpochs int) int {
	if b.epochs > 0 {
		return b.epochs
	}
	return maxEpochs
}

// atStep says the current call has taken its last step, the run having taken step.
func (b *trainBound) atStep(step int) bool { return b.steps > 0 && step >= b.steps }

// reached says the current call stops after epoch ep (the run at step), before the run's
// horizon: the run goes on, so Train leaves the log record open.
func (b *trainBound) reached(ep, step int) bool {
	if b.atStep(step) || b.epochs > 0 && ep >= b.epochs {
		b.openLog = true
		return true
	}
	return false
}

// judgesEpoch says early stopping sees the epoch just validated: patience counts whole epochs,
// so an epoch a TrainSteps bound cut short is validated and checkpointed but judged only when a
// later call finishes it (else a loop of one-step calls would spend the patience in a few steps).
// With step periods every validation at a ValEvery multiple is judged, and one a bound cut short
// is not.
func (n *Nitro) judgesEpoch() bool {
	if n.spec.stepPeriods() {
		return !n.bound.atStep(n.st.step) || n.periodEnds(n.st.step)
	}
	return !(n.bound.atStep(n.st.step) && n.partialEpoch())
}

// endLog finishes the record unless the call stopped at its bound with the run to go on.
func (n *Nitro) endLog(err error) {
	if err == nil && n.bound.openLog {
		return
	}
	n.bound.openLog = false
	n.finishRun(err)
}

// partialEpoch says the last epoch ended part-way (an Interrupt, a TrainSteps bound).
func (n *Nitro) partialEpoch() bool {
	tr, ok := n.spec.data["train"]
	return ok && n.st.partial(tr.Len())
}

// partial says the last epoch ended part-way through its train batches.
func (st *trainState) partial(batches int) bool {
	p := st.data
	return p.epoch > 0 && p.epoch == st.epoch && p.batch > 0 && p.batch < batches
}
