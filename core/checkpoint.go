package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/runstatus"
)

// Checkpointing, resume and early stopping as core composes them: the training state converted
// to and from a checkpoint.Record, the options, and the calls New and Train make. Storage (the
// format, retention, durable writes, the manifest) is package checkpoint's.

// ResumeAuto is WithResume's argument for "the newest checkpoint the checkpointer has".
const ResumeAuto = "auto"

// The record's tensor names: "param/" + the parameter's scope path ("param/dense_0/weights"),
// "opt/<group>/<state leaf>/<scope path>" for optimizer state ("opt/default/0.radam.mu/
// dense_0/weights"; the constant leaves, Decay's anchor and mask, are rebuilt at setup from
// BuildModel's weights and not stored), "state" + the variable's scope and name for layer state
// ("state/batch_norm/mean", and the RNG state "state/#rngState").
const (
	paramPrefix = "param/"
	optPrefix   = "opt/"
	statePrefix = "state"
)

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
func (n *Nitro) Preset() string { return n.opts.preset }

// setUpCheckpoints ends setup's part in checkpointing: resolve the checkpointer (option, then
// the experiment's, then TopK) and early stopping, check their metrics exist, then resume or load
// weights when asked. It runs after the parameters and optimizer state are on the device and
// before the logger's first record.
func (n *Nitro) setUpCheckpoints() error {
	o := n.opts
	c := o.ckpt
	if !o.ckptSet {
		if ch, ok := n.e.(CheckpointerChooser); ok {
			c = ch.Checkpointer()
			if v := reflect.ValueOf(c); v.IsValid() && v.Kind() == reflect.Pointer && v.IsNil() {
				c = nil
			}
		} else {
			c = must1(checkpoint.NewTopK(3, ValLoss, "min", "", nil))
		}
	}
	if a, ok := c.(checkpoint.Adopter); ok {
		var name checkpoint.NameFunc
		if nm, ok := n.e.(CheckpointNamer); ok {
			name = nm.CheckpointFilename
		}
		a.Adopt(n.RunDir(), name)
	}
	n.ck.c = c
	if r, ok := c.(checkpoint.Ranker); ok {
		n.ck.metric = r.Metric()
	}
	es, err := n.resolveEarlyStop()
	if err != nil {
		return err
	}
	n.ck.es = es
	if err := n.checkControlMetrics(); err != nil {
		return err
	}
	switch {
	case o.resume != "" && o.weights != "":
		return fmt.Errorf("WithResume(%q) and WithCheckpoint(%q) both given: resume continues a run (state, counters), WithCheckpoint starts a new one from weights; pass one", o.resume, o.weights)
	case o.resume != "":
		return n.resume(o.resume)
	case o.weights != "":
		return n.loadWeights(o.weights)
	}
	return nil
}

func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// checkControlMetrics refuses, before training, a checkpoint or early-stopping metric the val
// split does not report, naming the ones it does. With no val split there is nothing to rank by
// (checkpoints are unscored; TopK keeps the newest) and nothing to stop on (refused). With a
// MetricsFinalizer the names are known only after the first validation, where they are checked.
func (n *Nitro) checkControlMetrics() error {
	if n.ck.metric == "" && n.ck.es == nil {
		return nil
	}
	if _, ok := n.data["val"]; !ok {
		if n.ck.es != nil {
			return n.ck.es.checkMetric(false, sortedKeys(n.data), nil)
		}
		return nil
	}
	names, known, err := n.valMetricNames()
	if err != nil || !known {
		return err
	}
	if m := n.ck.metric; m != "" && !slices.Contains(names, m) {
		from := ckptFromDefault
		if n.opts.ckptSet {
			from = ckptFromOption
		} else if _, ok := n.e.(CheckpointerChooser); ok {
			from = ckptFromHook
		}
		return checkpointMetricError(n.typeName, m, from, names)
	}
	if es := n.ck.es; es != nil {
		return es.checkMetric(true, nil, names)
	}
	return nil
}

// valMetricNames lists the val split's metrics as the record names them (val_loss, val_accuracy):
// val_loss with no Metrics hook, else the keys the Metrics hook returns, learned by tracing
// Forward and Metrics once on the val split's first batch (nothing is compiled). known is false
// when a MetricsFinalizer may rename them.
func (n *Nitro) valMetricNames() (names []string, known bool, err error) {
	if n.acc.finalizer != nil {
		return nil, false, nil
	}
	if n.metrics == nil {
		return []string{ValLoss}, true, nil
	}
	b, err := n.data["val"].BatchAt(0)
	if err != nil {
		return nil, false, fmt.Errorf("split \"val\", batch 0: %w", err)
	}
	width, err := batchWidth(b)
	if err != nil {
		return nil, false, err
	}
	keys := routed(keySet(b), n.forward, n.metrics)
	err = tryGraph("tracing Metrics to learn the names of the validation metrics", func() {
		g := graph.NewGraph(n.backend.Backend, "nitro_metric_names")
		defer g.Finalize()
		nodes := n.traceInputs(g, width, keys)
		view := n.bindModel(g, nodes, n.e)
		n.ctx.SetTraining(g, false)
		out := n.callForward(view, batchNodes(nodes, routed(setOf(keys), n.forward)), width)
		ms := n.metrics.call(view, valueOfOutputs(out), batchNodes(nodes, routed(setOf(keys), n.metrics))).Interface().(map[string]Metric)
		for _, name := range sortedKeys(ms) {
			names = append(names, withPrefixName("val_", name))
		}
	})
	return names, err == nil, err
}

// withPrefixName is one name as withPrefix names it.
func withPrefixName(prefix, name string) string {
	if strings.HasPrefix(name, prefix) {
		return name
	}
	return prefix + name
}

// isControl reports whether a val split metric (named as the Metrics hook names it) is one the
// run branches on: the checkpoint ranking metric or the early-stopping metric. Those are read
// back through the validated readback.
func (c *runCkpt) isControl(split, name string) bool {
	if split != "val" {
		return false
	}
	full := withPrefixName("val_", name)
	return (c.metric != "" && full == c.metric) || (c.es != nil && c.es.reads(full))
}

// controlValue is the validated value of a metric the run branches on: present among the
// epoch's validation metrics and finite, else an error naming it (a non-finite value would
// rank a checkpoint or decide a stop on garbage, so the run stops instead).
func controlValue(val map[string]float64, metric, what string) (float64, error) {
	m := withPrefix("val_", val)
	v, ok := m[metric]
	if !ok {
		return 0, fmt.Errorf("%s %q is not among the validation metrics (%s)", what, metric, strings.Join(sortedKeys(m), ", "))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s %q is %v: a non-finite value cannot rank a checkpoint or decide a stop; stopping (resume from the last checkpoint, e.g. with a lower learning rate)", what, metric, v)
	}
	return v, nil
}

// stopDecision is the once-per-epoch decision after validation: the control metrics are
// validated, early stopping observes the epoch, and the reason to stop is returned ("" to go
// on): requested (RequestStop, Interrupt) before early_stop.
func (n *Nitro) stopDecision(res EpochResult) (runstatus.Status, error) {
	if res.Val != nil && n.ck.metric != "" && n.ck.c != nil {
		if _, err := controlValue(res.Val, n.ck.metric, "checkpoint metric"); err != nil {
			return "", err
		}
	}
	early, err := n.observeEarlyStop(res)
	if err != nil {
		return "", err
	}
	switch {
	case n.tracker.StopRequested():
		return StopRequested, nil
	case early:
		return StopEarly, nil
	}
	return "", nil
}

// saveCheckpoint writes the epoch's checkpoint through the checkpointer, if any. A failed save
// stops the run (a run that cannot checkpoint loses its work at the next crash); a save whose
// only failure was removing a displaced file is a warning. The read-back of the state and the
// write run in the Checkpointing phase, so a stall watchdog gives a slow disk the patience of a
// long phase instead of a step's; the phase it interrupted is restored afterwards.
func (n *Nitro) saveCheckpoint(res EpochResult, reason runstatus.Status) error {
	if n.ck.c == nil {
		return nil
	}
	return n.tracker.WithCheckpointing(func() error { return n.writeCheckpoint(res, reason) })
}

// writeCheckpoint is saveCheckpoint's work: the record, then the checkpointer's Save.
func (n *Nitro) writeCheckpoint(res EpochResult, reason runstatus.Status) error {
	rec, err := n.record(res, reason)
	if err != nil {
		return fmt.Errorf("epoch %d: checkpoint: %w", res.Epoch, err)
	}
	path, err := n.ck.c.Save(rec)
	switch {
	case errors.Is(err, checkpoint.ErrNotRotated):
		n.warn(err.Error())
	case err != nil:
		return fmt.Errorf("epoch %d: %w", res.Epoch, err)
	}
	n.ck.last = path
	return nil
}

// slotKind says which part of the training state a slot is.
type slotKind int

const (
	slotParam slotKind = iota
	slotOpt
	slotLayer
)

// stateSlot is one tensor of the training state under its record name: where it lives in n.st
// (so a restore can replace it) and the upload counter of its kind.
type stateSlot struct {
	name    string
	t       **tensors.Tensor
	counter *int
	kind    slotKind
	rng     bool // the context's RNG state
}

// stateSlots lists the training state's tensors in record order: parameters by group, then the
// optimizer's non-constant state leaves by group, leaf and parameter, then the layer state.
func (n *Nitro) stateSlots() []stateSlot {
	var out []stateSlot
	for gi, g := range n.groups {
		st := &n.st.groups[gi]
		for j := range g.vars {
			out = append(out, stateSlot{name: paramPrefix + strings.Join(g.keypaths[j], "/"), t: &st.params[j], counter: &n.uploads.Params, kind: slotParam})
		}
	}
	for gi, g := range n.groups {
		st := &n.st.groups[gi]
		leaves := g.opt.StateNames()
		for s := range st.opt {
			if g.constLeaf(s) {
				continue
			}
			for j := range g.vars {
				name := optPrefix + g.name + "/" + leaves[s] + "/" + strings.Join(g.keypaths[j], "/")
				out = append(out, stateSlot{name: name, t: &st.opt[s][j], counter: &n.uploads.OptState, kind: slotOpt})
			}
		}
	}
	for i, v := range n.stateVars {
		rng := v.Name() == context.RNGStateVariableName && v.Scope() == context.RootScope
		out = append(out, stateSlot{name: statePrefix + v.ScopeAndName(), t: &n.st.layer[i], counter: &n.uploads.LayerState, kind: slotLayer, rng: rng})
	}
	return out
}

// The checkpoint dtype of each GoMLX dtype a training state may hold.
var checkpointDTypes = map[dtypes.DType]checkpoint.DType{
	dtypes.Bool: checkpoint.BOOL, dtypes.Uint8: checkpoint.U8, dtypes.Int8: checkpoint.I8,
	dtypes.Int16: checkpoint.I16, dtypes.Uint16: checkpoint.U16, dtypes.Float16: checkpoint.F16,
	dtypes.BFloat16: checkpoint.BF16, dtypes.Int32: checkpoint.I32, dtypes.Uint32: checkpoint.U32,
	dtypes.Float32: checkpoint.F32, dtypes.Float64: checkpoint.F64, dtypes.Int64: checkpoint.I64,
	dtypes.Uint64: checkpoint.U64,
}

// littleEndian: a record's data is little-endian and tensors hold native bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// readBack copies a device tensor's bytes to the host, leaving no host copy on the tensor.
func readBack(t *tensors.Tensor) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading %s back from the device: %v", t.Shape(), r)
		}
	}()
	if t.Shape().Size() == 0 {
		return []byte{}, nil
	}
	if err := t.ConstBytes(func(b []byte) { data = bytes.Clone(b) }); err != nil {
		return nil, fmt.Errorf("reading %s back from the device: %w", t.Shape(), err)
	}
	if t.IsOnAnyDevice() {
		t.FinalizeLocal() // the device copy stays the value; keep no second copy on the host
	}
	return data, nil
}

// checkpointTensor reads one slot's tensor into the record's form.
func checkpointTensor(name string, t *tensors.Tensor) (checkpoint.Tensor, error) {
	dt, ok := checkpointDTypes[t.DType()]
	if !ok {
		return checkpoint.Tensor{}, fmt.Errorf("%s: dtype %s has no checkpoint dtype", name, t.DType())
	}
	data, err := readBack(t)
	if err != nil {
		return checkpoint.Tensor{}, fmt.Errorf("%s: %w", name, err)
	}
	return checkpoint.Tensor{Name: name, DType: dt, Shape: slices.Clone(t.Shape().Dimensions), Data: data}, nil
}

// hostTensorFrom makes the host tensor a record's tensor holds, refusing another dtype or shape
// than the model's.
func hostTensorFrom(t checkpoint.Tensor, want shapes.Shape) (*tensors.Tensor, error) {
	dt := checkpointDTypes[want.DType]
	if t.DType != dt || !slices.Equal(t.Shape, want.Dimensions) {
		return nil, fmt.Errorf("%s is %s%v in the checkpoint, %s%v in this model", t.Name, t.DType, t.Shape, dt, want.Dimensions)
	}
	h := tensors.FromShape(want)
	if want.Size() == 0 {
		return h, nil
	}
	err := h.MutableBytes(func(b []byte) { copy(b, t.Data) })
	return h, err
}

// record converts the training state and the epoch's summary into a checkpoint record.
func (n *Nitro) record(res EpochResult, reason runstatus.Status) (*checkpoint.Record, error) {
	if !littleEndian {
		return nil, errors.New("checkpoints hold little-endian data and this host is big-endian")
	}
	r := &checkpoint.Record{
		Epoch: n.st.epoch, Step: n.st.step, StopReason: reason, Preset: n.opts.preset,
		Metrics:  epochMetrics(res),
		RunID:    logjson.RunID(n.log.l),
		RunURL:   logjson.RunURL(n.log.l),
		Values:   n.recordValues(),
		Derived:  n.derived,
		Position: checkpoint.Position{Epoch: n.st.data.epoch, Batch: n.st.data.batch},
		Build:    compilecache.BuildIdentity(),
	}
	for _, s := range n.stateSlots() {
		t, err := checkpointTensor(s.name, *s.t)
		if err != nil {
			return nil, err
		}
		r.Tensors = append(r.Tensors, t)
	}
	var err error
	if r.AnchorChecksums, err = n.anchorChecksums(); err != nil {
		return nil, err
	}
	if n.log.l != nil {
		r.LoggerType = logjson.TypeName(n.log.l) // recorded even without state: which logger wrote the run
		if _, st, err := logjson.State(n.log.l); err != nil {
			n.logFailed("state", err) // a logger never stops the run: this checkpoint keeps no logger state
		} else {
			r.LoggerState = st
		}
	}
	if es := n.ck.es; es != nil {
		ctl, err := es.controlState()
		if err != nil {
			return nil, err
		}
		if ctl != nil {
			if r.Control, err = json.Marshal(ctl); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// epochMetrics is what a record keeps of an epoch: train_loss, the TrainMetrics as train_*, the
// validation metrics as val_* (the names the logger and the console use).
func epochMetrics(res EpochResult) map[string]float64 {
	m := withPrefix("train_", res.Train)
	for k, v := range withPrefix("val_", res.Val) {
		m[k] = v
	}
	m["train_loss"] = res.TrainLoss
	return m
}

// recordValues renders the experiment's fields by kind: GraphConst as the compile key prints
// them, Device and Host as plain scalars (other values, which may be whole arrays, left out).
func (n *Nitro) recordValues() checkpoint.Values {
	v := checkpoint.Values{GraphConst: map[string]string{}, Device: map[string]string{}, Host: map[string]string{}}
	for _, kv := range n.gcValues {
		v.GraphConst[kv[0]] = kv[1]
	}
	if dvs, err := markers.DeviceValues(n.e); err == nil {
		for _, dv := range dvs {
			if s, ok := valueText(reflect.ValueOf(dv.Value)); ok {
				v.Device[dv.Name] = s
			}
		}
	}
	fields, _ := markers.ConfigMetadata(n.e)
	s := reflect.ValueOf(n.e).Elem()
	for _, f := range fields {
		if f.Kind == markers.KindHost {
			if t, ok := valueText(s.Field(f.Index)); ok {
				v.Host[f.Name] = t
			}
		}
	}
	return v
}

// valueText is a value as a record stores it: a plain scalar's text; ok false for anything else.
func valueText(v reflect.Value) (string, bool) {
	x, ok := plainParam(v)
	if !ok {
		return "", false
	}
	return fmt.Sprint(x), true
}

// anchorChecksums is, per group decaying toward a non-zero anchor (w0 or an array), a checksum
// of that anchor: the record keeps it instead of the parameter-sized arrays, and a resume
// refuses a group whose anchor differs. Computed once (the anchor is a constant leaf).
func (n *Nitro) anchorChecksums() (map[string]string, error) {
	if n.ck.anchors != nil {
		return n.ck.anchors, nil
	}
	out := map[string]string{}
	for gi, g := range n.groups {
		var h hash.Hash
		for s, name := range g.opt.StateNames() {
			if !g.constLeaf(s) || !strings.HasSuffix(name, "."+optimizers.DecayName+".anchor") {
				continue
			}
			if h == nil {
				h = sha256.New()
			}
			for j, t := range n.st.groups[gi].opt[s] {
				b, err := readBack(t)
				if err != nil {
					return nil, fmt.Errorf("group %q: decay anchor: %w", g.name, err)
				}
				fmt.Fprintf(h, "%s %s %v\n", strings.Join(g.keypaths[j], "/"), t.DType(), t.Shape().Dimensions)
				h.Write(b)
			}
		}
		if h != nil {
			out[g.name] = "sha256:" + hex.EncodeToString(h.Sum(nil))
		}
	}
	n.ck.anchors = out
	return out, nil
}

// loadRecord reads a checkpoint through the checkpointer (Load dispatches on it), else from the
// file; a directory means its newest checkpoint by the manifest.
func (n *Nitro) loadRecord(path string) (*checkpoint.Record, string, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		p, err := NewestCheckpoint(path)
		if err != nil {
			return nil, "", err
		}
		path = p
	}
	var rec *checkpoint.Record
	var err error
	if n.ck.c != nil {
		rec, err = n.ck.c.Load(path)
	} else {
		rec, err = checkpoint.Read(path)
	}
	return rec, path, err
}

// sourceOf hashes the checkpoint file just read, for the provenance of what is exported later:
// the bytes are hashed now, while the file is the one restored (a run directory's newest changes
// as it trains, and retention removes old files). The file's size and modification time must be
// the same before and after the hash, else it was replaced while it was read and the hash could
// name other bytes than the restored ones. A checkpointer on another file system than the
// operating system's (an in-memory one in tests) leaves the hash empty: the file cannot be
// reopened here, and the provenance then names the file alone.
func (n *Nitro) sourceOf(arg, path string, resumed bool) (*ckptSource, error) {
	src := &ckptSource{arg: arg, path: path, resumed: resumed}
	before, err := os.Stat(path)
	if err != nil {
		if n.ck.c != nil && errors.Is(err, os.ErrNotExist) {
			return src, nil // the checkpointer read it through a file system of its own
		}
		return nil, fmt.Errorf("hashing checkpoint %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hashing checkpoint %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("hashing checkpoint %s: %w", path, err)
	}
	after, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("hashing checkpoint %s: %w", path, err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || !os.SameFile(before, after) {
		return nil, fmt.Errorf("checkpoint %s changed while it was read (size %d -> %d, modified %v -> %v): restore from a checkpoint no writer is replacing", path, before.Size(), after.Size(), before.ModTime(), after.ModTime())
	}
	src.sha256 = hex.EncodeToString(h.Sum(nil))
	return src, nil
}

// NewestCheckpoint is the path of the newest checkpoint a run directory's manifest lists; an
// error names the directory when it has none, and the file and the older checkpoints when the
// newest is missing or not a file (a *checkpoint.NewestError).
func NewestCheckpoint(dir string) (string, error) {
	p, ok, err := checkpoint.Newest(dir)
	if err != nil {
		return "", err
	}
	if !ok {
		if listedIn(dir) {
			return "", fmt.Errorf("%s is a directory, and its run dir's %s lists it as a checkpoint file: the file was replaced; pass another checkpoint (nitro ls %s)", dir, checkpoint.ManifestName, filepath.Dir(dir))
		}
		return "", fmt.Errorf("%s holds no checkpoint (no %s listing one)", dir, checkpoint.ManifestName)
	}
	return p, nil
}

// listedIn reports whether the manifest beside path lists it as a checkpoint.
func listedIn(path string) bool {
	entries, _ := checkpoint.ReadManifest(filepath.Dir(path))
	return slices.ContainsFunc(entries, func(e checkpoint.ManifestEntry) bool { return e.File == filepath.Base(path) })
}

// withOlderHint adds how to use one of the older checkpoints a *checkpoint.NewestError names:
// by path, to a resume (resume) or to WithCheckpoint.
func withOlderHint(err error, resume bool) error {
	var ne *checkpoint.NewestError
	if !errors.As(err, &ne) || len(ne.Older) == 0 {
		return err
	}
	if resume {
		return fmt.Errorf("%w: resume from one with --resume PATH (core.WithResume(PATH))", err)
	}
	return fmt.Errorf("%w: load one with --checkpoint PATH (core.WithCheckpoint(PATH))", err)
}

// resume is WithResume: find the checkpoint, check it fits, restore everything.
func (n *Nitro) resume(from string) error {
	path := from
	if from == ResumeAuto {
		if n.ck.c == nil {
			return errors.New(`WithResume("auto") finds the newest checkpoint through the checkpointer, and checkpointing is off (WithoutCheckpoints): pass a checkpoint's path, or a checkpointer`)
		}
		p, ok, err := n.ck.c.Latest()
		if err != nil {
			return fmt.Errorf("resume auto: %w", withOlderHint(err, true))
		}
		if !ok {
			where := n.RunDir()
			if d, isDir := n.ck.c.(interface{ Dir() string }); isDir {
				where = d.Dir()
			}
			n.notice(fmt.Sprintf("resume auto: no checkpoint in %s; starting a fresh run", where))
			return nil
		}
		path = p
	}
	rec, path, err := n.loadRecord(path)
	if err != nil {
		return fmt.Errorf("resume: %w", withOlderHint(err, true))
	}
	if err := n.checkCompatible(rec, path); err != nil {
		return err
	}
	src, err := n.sourceOf(from, path, true)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := n.restore(rec, path, true); err != nil {
		return err
	}
	n.ck.last, n.ck.source = path, src
	n.notice(fmt.Sprintf("resumed from %s: epoch %d, step %d", path, rec.Epoch, rec.Step))
	if rec.StopReason == StopEarly {
		if n.ck.es != nil && n.ck.es.stillStopped() {
			n.ck.stopped = path
		} else {
			n.notice(fmt.Sprintf("the checkpoint records an early stop at epoch %d; the early stopping configured now does not stop there, so training goes on", rec.Epoch))
		}
	}
	return nil
}

// loadWeights is WithCheckpoint: the parameters and layer state, nothing of the run's progress.
func (n *Nitro) loadWeights(path string) error {
	arg := path
	rec, path, err := n.loadRecord(path)
	if err != nil {
		return fmt.Errorf("WithCheckpoint: %w", withOlderHint(err, false))
	}
	for _, d := range checkpoint.DiffValues(rec.Values.GraphConst, n.recordValues().GraphConst) {
		n.notice("checkpoint " + path + ": GraphConst " + d)
	}
	src, err := n.sourceOf(arg, path, false)
	if err != nil {
		return fmt.Errorf("WithCheckpoint: %w", err)
	}
	if err := n.restore(rec, path, false); err != nil {
		return err
	}
	n.ck.source = src
	n.ck.weightsAt = &[2]int{rec.Epoch, rec.Step}
	n.notice(fmt.Sprintf("weights from %s (epoch %d, step %d); the optimizer and the counters start fresh", path, rec.Epoch, rec.Step))
	return nil
}

// checkCompatible is the config half of a resume: GraphConst fields must equal the record's (they
// bake into the programs, so a change would train another program), anchored groups must decay
// toward the same anchor; Device, Host and derived changes are allowed and reported.
func (n *Nitro) checkCompatible(rec *checkpoint.Record, path string) error {
	notes, err := checkpoint.CheckConfigCompatible(path, rec.Values, n.recordValues())
	if err != nil {
		return err
	}
	anchors, err := n.anchorChecksums()
	if err != nil {
		return err
	}
	for _, g := range sortedKeys(rec.AnchorChecksums) {
		if got, ok := anchors[g]; ok && got != rec.AnchorChecksums[g] {
			return fmt.Errorf("resume from %s refused: group %q decays toward its initial weights (w0), and BuildModel's weights now differ from the checkpointed run's (anchor checksum %s, was %s): the resumed run would decay toward another point; make BuildModel deterministic (same Seed, same pretrained weights) or start a new run",
				path, g, got, rec.AnchorChecksums[g])
		}
	}
	for _, d := range append(notes, prefixed("derived ", checkpoint.DiffValues(rec.Derived, n.derived))...) {
		n.notice("resume: " + d)
	}
	return nil
}

func prefixed(p string, lines []string) []string {
	for i := range lines {
		lines[i] = p + lines[i]
	}
	return lines
}

// restore installs a record into the training state, all or nothing: every tensor is checked and
// uploaded (counted in Uploads) before any replaces the state. full is a resume: parameters,
// optimizer and layer state, step, epoch, data position, logger and early-stopping state. Else
// the weights: parameters and layer state but the RNG state, the counters left as they are.
func (n *Nitro) restore(rec *checkpoint.Record, path string, full bool) error {
	byName := make(map[string]checkpoint.Tensor, len(rec.Tensors))
	for _, t := range rec.Tensors {
		byName[t.Name] = t
	}
	type pending struct {
		slot stateSlot
		t    *tensors.Tensor
	}
	var ups []pending
	var missing, wrong []string
	used := map[string]bool{}
	for _, s := range n.stateSlots() {
		if !full && (s.kind == slotOpt || s.rng) {
			continue
		}
		used[s.name] = true
		t, ok := byName[s.name]
		if !ok {
			missing = append(missing, s.name)
			continue
		}
		h, err := hostTensorFrom(t, (*s.t).Shape())
		if err != nil {
			wrong = append(wrong, err.Error())
			continue
		}
		ups = append(ups, pending{s, h})
	}
	var extra []string
	for _, t := range rec.Tensors {
		ignored := !full && (strings.HasPrefix(t.Name, optPrefix) || t.Name == statePrefix+context.RootScope+context.RNGStateVariableName)
		if !used[t.Name] && !ignored {
			extra = append(extra, t.Name)
		}
	}
	if len(missing)+len(wrong)+len(extra) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "checkpoint %s does not fit this model", path)
		if len(missing) > 0 {
			fmt.Fprintf(&b, "; missing: %s", strings.Join(missing, ", "))
		}
		if len(extra) > 0 {
			fmt.Fprintf(&b, "; not in this model: %s", strings.Join(extra, ", "))
		}
		if len(wrong) > 0 {
			fmt.Fprintf(&b, "; %s", strings.Join(wrong, "; "))
		}
		return errors.New(b.String())
	}
	// The control state is checked on every resume, early stopping on or off: a record whose
	// control does not parse is damaged, whatever part of it this run would use.
	if full && len(rec.Control) > 0 {
		var ctl map[string]json.RawMessage
		if err := json.Unmarshal(rec.Control, &ctl); err != nil {
			return fmt.Errorf("checkpoint %s: control state: %w", path, err)
		}
	}
	if full && n.ck.es != nil {
		// Resume runs only in New, so a failure after this leaves no Nitro behind to hold a
		// half-restored policy.
		if err := n.restoreEarlyStop(rec.Control, path); err != nil {
			return err
		}
	}
	if full && n.log.l != nil {
		if err := logjson.Reattach(n.log.l, rec.LoggerType, rec.LoggerState); err != nil {
			return fmt.Errorf("resume from %s: %w", path, err)
		}
	}
	// Upload everything first: a failed transfer leaves the state as it was.
	placed := make([]*tensors.Tensor, 0, len(ups))
	for _, u := range ups {
		t, err := n.upload(u.t, u.slot.counter)
		if err != nil {
			freeTensors(placed)
			return fmt.Errorf("restoring %s from %s: %w", u.slot.name, path, err)
		}
		placed = append(placed, t)
	}
	var errs []error
	for i, u := range ups {
		old := *u.slot.t
		*u.slot.t = placed[i]
		if old != nil {
			if err := old.FinalizeAll(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		n.warn(fmt.Sprintf("restoring from %s: freeing the replaced state: %v", path, errors.Join(errs...)))
	}
	if full {
		n.st.step, n.st.epoch = rec.Step, rec.Epoch
		n.st.data = dataPosition{epoch: rec.Position.Epoch, batch: rec.Position.Batch}
	}
	return nil
}
