package core

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/nitro-go/nitro/runstatus"
)

// A run is reported in periods: validation, the console's line, the record's "validate" and
// "data" lines, the stop decision and the checkpoint come at the end of each. By default a period
// is an epoch. A language model is trained by steps instead, for a budget of steps over data
// whose epochs mean little, and a lost epoch can be hours: ValEvery makes a period that many
// optimizer steps, crossing epoch boundaries as the data needs (the batch stream of each epoch is
// opened and closed as before), and MaxSteps makes the horizon a step count. A checkpoint taken
// inside an epoch records its data position, so a resume continues at the next batch exactly as
// after an Interrupt: the same machinery, reached on a schedule.

// WithMaxSteps sets the run's horizon in optimizer steps (0: MaxEpochs sets it). The last epoch
// ends part-way when the steps run out inside it; schedules are defined over exactly MaxSteps.
func WithMaxSteps(n int) Option { return func(o *options) { o.maxSteps = &n } }

// WithValEvery makes a period ValEvery optimizer steps (0: an epoch): validation, the report,
// early stopping (its patience then counts validations) and checkpoints come every that many
// steps and at the horizon, not at epoch ends.
func WithValEvery(n int) Option { return func(o *options) { o.valEvery = &n } }

// WithCheckpointEvery saves a checkpoint every n optimizer steps, a multiple of ValEvery (0: at
// every validation); the horizon and a stop are always checkpointed.
func WithCheckpointEvery(n int) Option { return func(o *options) { o.checkpointEvery = &n } }

// droppedHorizon starts the source of a MaxEpochs that a MaxSteps run option overrides.
const droppedHorizon = "not used: run option MaxSteps sets the horizon (was "

// oneHorizon lets a run option for MaxSteps or MaxEpochs win over the other knob's field or
// method, as run options win over fields: the CLI's --max-epochs on an experiment whose field
// sets MaxSteps trains epochs. Two of the same rank are left for periodError to refuse.
func (c *config) oneHorizon() {
	const opt = "run option"
	if c.maxSteps.value == 0 || c.maxEpochs.source == "default" || (c.maxSteps.source == opt) == (c.maxEpochs.source == opt) {
		return
	}
	if c.maxEpochs.source == opt {
		c.maxSteps = resolved[int]{0, "run option MaxEpochs wins over " + c.maxSteps.source}
	} else {
		c.maxEpochs.source = droppedHorizon + c.maxEpochs.source + ")"
	}
}

// periodError checks the step-based knobs together, each error naming the knob, its value, where
// it came from and the fix.
func (c *config) periodError() error {
	for _, k := range []struct {
		name string
		v    resolved[int]
	}{{"MaxSteps", c.maxSteps}, {"ValEvery", c.valEvery}, {"CheckpointEvery", c.checkpointEvery}} {
		if k.v.value < 0 {
			return fmt.Errorf("%s = %d from %s: must be >= 0 (0 turns it off)", k.name, k.v.value, k.v.source)
		}
	}
	ms, ve, ce := c.maxSteps, c.valEvery, c.checkpointEvery
	switch {
	case ms.value > 0 && c.maxEpochs.source != "default" && !strings.HasPrefix(c.maxEpochs.source, droppedHorizon):
		return fmt.Errorf("MaxSteps = %d from %s and MaxEpochs = %d from %s: a run has one horizon; keep MaxSteps for a step budget (the epochs it spans follow from the data) or MaxEpochs, not both",
			ms.value, ms.source, c.maxEpochs.value, c.maxEpochs.source)
	case ce.value > 0 && ve.value == 0:
		return fmt.Errorf("CheckpointEvery = %d from %s without ValEvery: checkpoints are ranked by validation, which comes at epoch ends unless ValEvery sets a step period; set ValEvery to %d (or a divisor of it)",
			ce.value, ce.source, ce.value)
	case ce.value > 0 && ce.value%ve.value != 0:
		return fmt.Errorf("CheckpointEvery = %d from %s is not a multiple of ValEvery = %d from %s: a checkpoint is ranked by the validation taken at its step; set CheckpointEvery to a multiple of %d",
			ce.value, ce.source, ve.value, ve.source, ve.value)
	}
	return nil
}

// stepPeriods says periods are counted in steps (ValEvery) rather than epochs.
func (su *runSpec) stepPeriods() bool { return su.cfg.valEvery.value > 0 }

// horizonEpochs is the last epoch of the run: MaxEpochs, or the epoch MaxSteps ends in.
func (su *runSpec) horizonEpochs() int {
	ms := su.cfg.maxSteps.value
	if ms == 0 {
		return su.cfg.maxEpochs.value
	}
	per := su.stepsPerEpoch()
	if per == 0 {
		return 0
	}
	return (ms + per - 1) / per
}

// stepsPerEpoch is the optimizer steps of a whole epoch (0 without a train split).
func (su *runSpec) stepsPerEpoch() int {
	tr, ok := su.data["train"]
	if !ok {
		return 0
	}
	return tr.Len() / su.cfg.accum.value
}

// nextPosition is the epoch and train batch the next optimizer step reads: where an epoch cut
// short stopped, else the next epoch's start.
func (n *Nitro) nextPosition() (epoch, batch int) {
	if n.partialEpoch() {
		return n.st.data.epoch, n.st.data.batch
	}
	return n.st.epoch + 1, 0
}

// hasMore says the current call has steps left: before the run's horizon and the call's bound.
func (n *Nitro) hasMore() bool {
	if ms := n.spec.cfg.maxSteps.value; ms > 0 && n.st.step >= ms {
		return false
	}
	if n.bound.steps > 0 && n.st.step >= n.bound.steps {
		return false
	}
	ep, _ := n.nextPosition()
	return ep <= n.bound.lastEpoch(n.spec.horizonEpochs())
}

// atHorizon says the run has trained all it was set to: MaxSteps steps, or MaxEpochs whole epochs.
func (n *Nitro) atHorizon() bool {
	if ms := n.spec.cfg.maxSteps.value; ms > 0 {
		return n.st.step >= ms
	}
	return n.st.epoch >= n.spec.cfg.maxEpochs.value && !n.partialEpoch()
}

// periodEnds says the step just taken ends the period by the schedule: a ValEvery multiple or
// the MaxSteps horizon (an epoch's end ends an epoch period where its batches run out).
func (n *Nitro) periodEnds(step int) bool {
	if ms := n.spec.cfg.maxSteps.value; ms > 0 && step >= ms {
		return true
	}
	ve := n.spec.cfg.valEvery.value
	return ve > 0 && step%ve == 0
}

// checkpointDue says the period just reported is checkpointed: every period by default, every
// CheckpointEvery steps when set, and always at a stop or the horizon (nothing trained is lost
// when the run ends).
func (n *Nitro) checkpointDue(reason runstatus.Status) bool {
	ce := n.spec.cfg.checkpointEvery.value
	return ce == 0 || reason != "" || n.st.step%ce == 0 || n.bound.atStep(n.st.step)
}

// validationIndex is what early stopping counts: the epoch, or with step periods the validation's
// number (ValEvery steps each), so its patience counts validations.
func (n *Nitro) validationIndex(res EpochResult) int {
	if ve := n.spec.cfg.valEvery.value; ve > 0 {
		return (n.st.step + ve - 1) / ve
	}
	return res.Epoch
}

// horizonKnob names the knob that sets the horizon, its value and source, for errors.
func (su *runSpec) horizonKnob() string {
	if ms := su.cfg.maxSteps; ms.value > 0 {
		return fmt.Sprintf("MaxSteps %d from %s; the field or core.WithMaxSteps", ms.value, ms.source)
	}
	me := su.cfg.maxEpochs
	return fmt.Sprintf("MaxEpochs %d from %s; the field or core.WithMaxEpochs", me.value, me.source)
}

// horizonKey is the control-state key a record keeps its run's horizon under, in optimizer steps.
const horizonKey = "total_steps"

// recordHorizon adds the run's horizon to a record's control state.
func (n *Nitro) recordHorizon(control json.RawMessage) (json.RawMessage, error) {
	ctl := map[string]json.RawMessage{}
	if len(control) > 0 {
		if err := json.Unmarshal(control, &ctl); err != nil {
			return nil, err
		}
	}
	ctl[horizonKey] = json.RawMessage(strconv.Itoa(n.TotalSteps()))
	return json.Marshal(ctl)
}

// checkHorizon compares a resumed record's horizon with this run's. Schedules defined over the
// horizon (warmup, cosine) take other values at the same step under another one, so the resumed
// run does not continue the recorded one; training on past a finished run is a use of it, so
// this is said (even when Quiet), not refused. A record without the key predates it; one whose
// value is not a positive integer is damaged and refused by name.
func (bld *builder) checkHorizon(ctl map[string]json.RawMessage, path string) error {
	raw, ok := ctl[horizonKey]
	if !ok {
		return nil
	}
	var was int
	if err := json.Unmarshal(raw, &was); err != nil || was < 1 {
		return fmt.Errorf("checkpoint %s: control state: %s is %s: want an integer >= 1", path, horizonKey, raw)
	}
	n := bld.n
	if now := n.TotalSteps(); now != was {
		n.spec.warn(fmt.Sprintf("resume from %s: its run's horizon was %d optimizer steps, this one's is %d (%s): schedules defined over the horizon (warmup, decay) take other values from here on, so this run does not continue that one as it was; to continue it exactly, give the same horizon (--max-steps %d, or the MaxEpochs that makes it)",
			path, was, now, n.spec.horizonKnob(), was))
	}
	return nil
}
