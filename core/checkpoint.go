package core

import (
	"reflect"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/markers"
)

// Checkpointing as core composes it, in four files: this one (the options, the experiment's
// hooks, the run's checkpoint state), checkpoint_control.go (setup and the once-per-epoch stop
// decision), checkpoint_record.go (the training state and the epoch into a checkpoint.Record)
// and checkpoint_restore.go (resume and WithCheckpoint). The tensors go through the engine (engine/statetensors.go);
// early stopping's policy is package earlystop's. Storage (the format, retention, durable
// writes, the manifest) is package checkpoint's.

// ResumeAuto is WithResume's argument for "the newest checkpoint the checkpointer has".
const ResumeAuto = "auto"

// WithCheckpointer saves a checkpoint through c once per epoch, after validation and the stop
// decision (so the last one records the stop reason). nil turns checkpointing off
// (WithoutCheckpoints). A checkpoint.Adopter (TopK, EveryN) left without a directory adopts
// RunDir, and the experiment's CheckpointFilename when it has one. A checkpoint.Ranker's metric
// must be one the val split reports (checked at setup; a run with no val split saves unscored
// checkpoints) and finite each epoch. The default, without this option or a Checkpointer method
// on the experiment, is checkpoint.NewTopK(3, "val_loss", "min", RunDir, nil).
func WithCheckpointer(c checkpoint.Checkpointer) Option {
	return func(o *options) {
		if v := reflect.ValueOf(c); v.IsValid() && v.Kind() == reflect.Pointer && v.IsNil() {
			c = nil // a typed nil pointer is "none" too
		}
		o.ckpt, o.ckptSet = c, true
	}
}

// WithoutCheckpoints turns checkpointing off: Train writes no checkpoint.
func WithoutCheckpoints() Option { return WithCheckpointer(nil) }

// WithResume continues a run from a checkpoint: ResumeAuto ("auto") takes the newest one the
// checkpointer's manifest lists (none: a fresh run, said on the console), a path takes that file
// (a directory: its newest). The parameters, optimizer and layer state (the RNG state with them),
// step, epoch, data position, early-stopping state and logger state are restored, so the resumed
// run trains exactly as the uninterrupted one would have. New refuses a GraphConst field that
// differs from the checkpoint (naming each, with both values) and a w0-anchored group whose
// anchor differs; Device and Host changes are allowed and reported on the console.
func WithResume(from string) Option { return func(o *options) { o.resume = from } }

// WithCheckpoint starts from a checkpoint's weights only (a file, or a run directory's newest):
// the parameters and the layer state but its RNG state; the optimizer starts fresh and the epoch
// and step counters at zero. This is how a trained model is evaluated (nitro evaluate
// --checkpoint) or fine-tuned.
func WithCheckpoint(path string) Option { return func(o *options) { o.weights = path } }

// WithPreset records the name of the preset the experiment was built from (markers.FromPreset
// records none): it goes into every checkpoint and the logged params.
func WithPreset(name string) Option { return func(o *options) { o.preset = name } }

// NewFromPreset is the recorded-preset form of New: it builds E from its named preset with the
// field overrides (markers.FromPreset; an unknown preset or field is an error naming the valid
// ones) and records the preset's name, so it reaches the checkpoint record and the logged params.
// Run options stay options: a knob that is both a field and an option (MaxEpochs, Seed, ...) is
// set as an option here, acting at run level, while overrides act on the recipe.
func NewFromPreset[E any](preset string, overrides map[string]any, opts ...Option) (*Nitro, error) {
	e, err := markers.FromPreset[E](preset, overrides)
	if err != nil {
		return nil, err
	}
	return New(e, append([]Option{WithPreset(preset)}, opts...)...)
}

// CheckpointerChooser is an experiment that picks its own checkpointer (e.g. TopK by its own
// metric), so every run of it checkpoints the same way; nil turns checkpointing off. A run's
// WithCheckpointer wins.
type CheckpointerChooser interface {
	Checkpointer() checkpoint.Checkpointer
}

// CheckpointNamer is an experiment that names its checkpoint files; an Adopter checkpointer
// constructed without a name adopts it.
type CheckpointNamer interface {
	CheckpointFilename(a checkpoint.NameArgs) string
}

// runCkpt is the run's checkpointing and early stopping: the checkpointer (nil: none), the metric
// it ranks by, the early-stopping policy, and what setup learned for them.
type runCkpt struct {
	// weightsAt is the epoch and step of the checkpoint WithCheckpoint loaded (nil: none): the
	// run's own counters start at 0, and an export names what trained the weights.
	weightsAt *[2]int

	c       checkpoint.Checkpointer
	metric  string            // the Ranker's metric; "" when the checkpointer ranks by none
	es      *runEarlyStop     // nil: no early stopping
	anchors map[string]string // per w0- or array-anchored group, its anchor's checksum (memo)
	stopped string            // the early stop a resumed checkpoint records, still in force
	last    string            // the newest checkpoint written or restored
	source  *ckptSource       // the checkpoint New restored from (WithCheckpoint, WithResume); nil: none
}

// ckptSource is the checkpoint file New restored, as export provenance records it: the argument
// given (a run directory is resolved to its newest file), the file, and the sha256 of its bytes.
type ckptSource struct {
	arg, path, sha256 string
	resumed           bool // WithResume; else WithCheckpoint (weights only)
}

// Checkpointer is the run's checkpointer, nil when checkpointing is off.
func (n *Nitro) Checkpointer() checkpoint.Checkpointer { return n.ck.c }

// LastCheckpoint is the path of the newest checkpoint this Nitro wrote or resumed from ("" if
// none).
func (n *Nitro) LastCheckpoint() string { return n.ck.last }

// Preset is the preset name WithPreset recorded ("" if none).
func (n *Nitro) Preset() string { return n.spec.opts.preset }
