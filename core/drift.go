package core

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/markers"
)

// Config drift: New resolves the experiment once (the knobs, the data, the model, the Device
// values on the device, the GraphConst key of the programs), so an experiment field assigned
// after New does not reach the run by itself. Each verb (Train, Evaluate/Validate, Predict,
// PredictAll, Export) compares the fields with what New left and says so, per kind, by what is
// safe:
//
//   - GraphConst: refused. The field bakes into the programs and the parameters' shapes, and a
//     program compiled from now on would be traced with the new value under the key and the
//     parameters of the old one: a stale or mismatched program. Nothing can run correctly, so the
//     verb errors until the field is set back or a new Nitro is built.
//   - Host: warned once per new value. A Host field never reaches a program (traced code that
//     reads one is refused), so the run stays self-consistent with the value New used: only the
//     user's intent is lost, and the warning restores it. A Host field may also be state that the
//     experiment's own hooks keep (a FinalizeMetrics that stashes a result for a monitor), so
//     what a verb's hooks write is adopted when the verb returns: only an assignment made between
//     verbs, by the caller, is drift.
//   - Device: warned once per new value. The programs read the device copy New (or SetDevice, or a
//     schedule) uploaded, a valid input of the right dtype and shape, so the run is consistent;
//     the write only bypassed SetDevice, which is the way to change it.

// driftState is the snapshot of the fields, the device copies it was taken against, and the
// warnings already given.
type driftState struct {
	snap   *markers.Snapshot
	dev    map[string]*tensors.Tensor // Device field -> the device copy its snapshot value was uploaded as
	warned map[string]string          // field name -> fingerprint of the value already warned about
}

// snapshotFields records every field's value at the end of New (after Derive wrote its values).
func (bld *builder) snapshotFields() error {
	n := bld.n
	snap, err := markers.TakeSnapshot(n.spec.e)
	if err != nil {
		return err
	}
	n.drift = driftState{snap: snap, dev: map[string]*tensors.Tensor{}, warned: map[string]string{}}
	for _, name := range n.spec.traits.DeviceFields() {
		n.drift.dev[name] = n.eng.DeviceTensor(name)
	}
	return nil
}

// checkDrift is the verb's comparison of the experiment with the snapshot: an error for a
// changed GraphConst field, a warning (once per field and value) for a changed Host or Device one.
func (n *Nitro) checkDrift(verb string) error {
	d := &n.drift
	rewritten := n.rewrittenDevice()
	changes, err := d.snap.Changed(n.spec.e)
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	changed := map[string]bool{}
	var refused []string
	for _, c := range changes {
		changed[c.Name] = true
		if c.Kind == markers.KindGraphConst {
			refused = append(refused, fmt.Sprintf("%s (%s at New, now %s)", c.Name, c.Old, c.New))
			continue
		}
		if d.warned[c.Name] == c.Fingerprint {
			continue
		}
		d.warned[c.Name] = c.Fingerprint
		if c.Kind == markers.KindDevice {
			n.spec.warn(fmt.Sprintf("%s: Device field %s of %s was assigned after core.New (%s on the device, the field now %s); the programs read the device copy, so %s is what runs: write it with n.SetDevice(%q, value), which uploads it and reuses every program",
				verb, c.Name, n.spec.typeName, c.Old, c.New, c.Old, c.Name))
			continue
		}
		n.spec.warn(fmt.Sprintf("%s: Host field %s of %s was assigned after core.New (was %s, now %s); %s",
			verb, c.Name, n.spec.typeName, c.Old, c.New, n.spec.frozenUse(c.Name, c.Old, c.New)))
	}
	for name := range d.warned {
		if !changed[name] && !rewritten[name] {
			delete(d.warned, name) // set back: a later change is news again
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%s refused: GraphConst field %s of %s was assigned after core.New: GraphConst fields are baked into this Nitro's programs and parameter shapes at New, so running now would mix a program of the new value with the key and parameters of the old; set it before core.New (a new Nitro: the compile cache keeps the programs of both values), or set it back",
			verb, strings.Join(refused, ", "), n.spec.typeName)
	}
	return nil
}

// rewrittenDevice re-takes the Device fields whose device copy changed since their snapshot:
// SetDevice or a schedule wrote the field and its device copy together, which is no drift.
func (n *Nitro) rewrittenDevice() map[string]bool {
	d := &n.drift
	out := map[string]bool{}
	for name, dev := range d.dev {
		if n.eng.DeviceTensor(name) != dev {
			out[name] = true
			d.dev[name] = n.eng.DeviceTensor(name)
		}
	}
	if len(out) > 0 {
		_ = d.snap.Update(n.spec.e, func(f markers.Field) bool { return out[f.Name] })
	}
	return out
}

// adoptHostWrites takes in the Host fields as a verb leaves them (see the kinds above); run at
// the end of every entry point.
func (n *Nitro) adoptHostWrites() {
	defer func() { _ = recover() }() // runs after the entry point's own recover: nothing may escape
	if n.drift.snap != nil {
		_ = n.drift.snap.Update(n.spec.e, func(f markers.Field) bool { return f.Kind == markers.KindHost })
	}
}

// frozenUse says what the frozen value of a Host field still drives, and the fix.
func (su *runSpec) frozenUse(name, was, now string) string {
	knobs := map[string]struct {
		v   fmt.Stringer
		opt string
	}{
		"MaxEpochs": {su.cfg.maxEpochs, "core.WithMaxEpochs"}, "Seed": {su.cfg.seed, "core.WithSeed"},
		"MaxSteps": {su.cfg.maxSteps, "core.WithMaxSteps"}, "ValEvery": {su.cfg.valEvery, "core.WithValEvery"},
		"CheckpointEvery": {su.cfg.checkpointEvery, "core.WithCheckpointEvery"},
		"RunDir":          {su.cfg.runDir, "core.WithRunDir"}, "Accum": {su.cfg.accum, "core.WithAccum"},
		"GradientClipNorm": {su.cfg.clip, "core.WithGradientClipNorm"}, "LearningRate": {su.cfg.lr, "core.WithLearningRate"},
		"Lambda": {su.cfg.lambda, ""},
	}
	if k, ok := knobs[name]; ok {
		fix := "set it before core.New"
		if k.opt != "" {
			fix += " or pass " + k.opt + " to core.New"
		}
		return fmt.Sprintf("New resolved the run's %s, which stays %s: %s", name, k.v, fix)
	}
	return fmt.Sprintf("what New built from it (the data, Derive, the model, the optimizer) keeps %s, while host hooks that read it from now on (FinalizeMetrics, CheckpointFilename, ExportProvenance) see %s: set it before core.New", was, now)
}
