package core

import (
	"fmt"
	"github.com/nitro-go/nitro/core/dotgrad"
	"os"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/core/backend"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/runstatus"
	"github.com/nitro-go/nitro/schedules"
)

// ModelBuilder is the required BuildModel hook: configure the context (initializers, scopes) and
// optionally create variables. Variables Forward creates on its first trace are created during
// setup's shape trace, so every parameter exists before the first program is compiled.
type ModelBuilder interface {
	BuildModel(ctx *context.Context) error
}

// DataBuilder is the required BuildData hook. It runs against the real experiment at setup.
type DataBuilder interface {
	BuildData() (Data, error)
}

// Deriver merges host values computed from the data into the experiment, after BuildData and
// before device placement (e.g. class weights from label frequencies).
type Deriver interface {
	Derive(d Data) (map[string]any, error)
}

// MetricsFinalizer post-processes a split's accumulated metrics on the host, once per split.
type MetricsFinalizer interface {
	FinalizeMetrics(acc map[string]float64, split string) map[string]float64
}

// ParamGrouper names the parameter group of a parameter leaf by its keypath.
type ParamGrouper interface {
	ParamGroup(keypath []string) string
}

// Stop reasons reported by Train: runstatus's, the one type a checkpoint records and the logger
// finishes with.
const (
	StopCompleted = runstatus.Completed
	StopRequested = runstatus.Requested
	StopEarly     = runstatus.EarlyStop // WithEarlyStopping ended the run
)

// Uploads counts host-to-device transfers by what was transferred, so tests can assert
// residency (e.g. zero parameter uploads per eval batch).
type Uploads struct {
	Params, OptState, LayerState, Device, Batch, Hyper int
}

// Nitro is a set-up experiment: data built, parameters initialized and resident on the device.
// Programs compile lazily on first use through the process-level cache. A Nitro is not safe for
// concurrent use, except RequestStop, Interrupt and the read-only run accessors (Phase,
// ProgressCounter), which any goroutine (a monitor, a signal handler) may call.
//
// Its fields are grouped by lifetime: what setup fixed, the compiled programs, the device-resident
// values, and the run's observation and control.
type Nitro struct {
	setup // fixed by New and read-only afterwards (setup.go)

	progs map[string]*program        // compiled programs of this Nitro, by kind and width (see memo)
	dev   map[string]*tensors.Tensor // Device fields' device copies (SetDevice and schedules rewrite them)
	st    trainState                 // the training state: what a checkpoint saves and export reads

	tracker     *monitors.Tracker // phase, progress, stop flag, monitors
	console     Console           // human-readable report; nil when Quiet
	log         runLog            // the run's logger (nil when none) and its cadence
	ck          runCkpt           // checkpointer and early stopping (checkpoint.go)
	interrupted atomic.Bool       // Interrupt: break at the next step boundary
	uploads     Uploads
	reported    bool       // the config and binding reports went out
	drift       driftState // the experiment's fields as New left them (drift.go)
	stopReason  runstatus.Status
	history     []EpochResult
}

// EpochResult is one epoch's summary.
type EpochResult struct {
	Epoch     int
	TrainLoss float64 // mean over the epoch's micro-batches
	// Train holds the TrainMetrics, each the mean over the epoch's micro-batches (under
	// WithLogEvery, over the logged steps' micro-batches: the others are not read back).
	Train   map[string]float64
	Val     map[string]float64
	Seconds float64
	Steps   int // optimizer steps in the epoch
	// DataWaitFrac is the fraction of the epoch's training wall time (its steps, without
	// validation) the loop spent waiting on the train batch stream (prefetch's Next): the
	// "data" line's data_wait_frac. Near 0, the device never starved; near 1, data is the limit.
	DataWaitFrac float64
}

// New runs setup and nothing else: resolve the hooks and knobs, build (or take) the data, derive,
// build the model, initialize its parameters and place them on the device. No training and no
// compilation of nitro programs happens here. What New resolved from the experiment stays: a
// field assigned afterwards is refused by the next verb when it is GraphConst (the programs would
// be stale) and warned about once when it is Host or Device (the frozen value runs; SetDevice
// changes a Device field).
func New(e any, opts ...Option) (n *Nitro, err error) {
	// Matrix-product gradients for Dot/DotGeneral before any graph is built (see dotgrad).
	dotgrad.Install()
	o := options{out: os.Stdout}
	for _, opt := range opts {
		opt(&o)
	}
	v := reflect.ValueOf(e)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct || v.IsNil() {
		return nil, fmt.Errorf("core.New takes a pointer to an experiment struct, got %T", e)
	}
	run := newRun(e, v.Elem().Type().Name(), o)
	// New is an entry point: setup can be minutes of work (BuildData), so it publishes Starting
	// and, when it returns, Repl; a failed setup ends in Failed.
	defer run.enter("setup of "+run.typeName, &err, func(err error) {
		if err != nil {
			n = nil
			run.setPhase(monitors.Failed{Err: err}, nil)
		}
	})()
	if err := run.setUp(); err != nil {
		return nil, err
	}
	if err := run.snapshotFields(); err != nil {
		return nil, err
	}
	return run, nil
}

// setUp is New's sequence: hooks, knobs, backend, data, Derive, model, parameters on the device.
func (n *Nitro) setUp() (err error) {
	e, o, v := n.e, n.opts, reflect.ValueOf(n.e)
	if n.traits, err = markers.TraitsOf(e); err != nil {
		return err
	}
	if err = markers.AssertGraphConstHashable(e); err != nil {
		return err
	}
	n.acc = resolveAccessors(e)
	et := v.Type()
	if n.forward, err = findHook(et, "Forward", true); err != nil {
		return err
	}
	if n.loss, err = findHook(et, "Loss", true); err != nil {
		return err
	}
	if n.metrics, err = findHook(et, "Metrics", false); err != nil {
		return err
	}
	if n.trainMetrics, err = findHook(et, "TrainMetrics", false); err != nil {
		return err
	}
	mb, ok := e.(ModelBuilder)
	if !ok {
		return fmt.Errorf("experiment %s has no BuildModel hook: define func (e *%s) BuildModel(ctx *context.Context) error", n.typeName, n.typeName)
	}
	if n.cfg, err = resolveConfig(e, n.typeName, &o); err != nil {
		return err
	}
	if err := n.checkRunDir(); err != nil {
		return err
	}
	if n.backend, err = backend.Resolve(o.backend); err != nil {
		return err
	}

	// Data: supplied, or built against the real experiment; with WithInputSpecs, none at all.
	switch {
	case n.specOnly() && o.data != nil:
		return fmt.Errorf("WithInputSpecs and WithData both given: the specs stand in for data; pass one")
	case n.specOnly() && o.resume != "":
		return fmt.Errorf("WithInputSpecs and WithResume(%q) both given: a resume continues training, which needs data; load weights without data with WithCheckpoint", o.resume)
	case n.specOnly():
		n.data = Data{}
	case o.data != nil:
		n.data = o.data
	default:
		db, ok := e.(DataBuilder)
		if !ok {
			return fmt.Errorf("experiment %s has no BuildData hook and no data was supplied: define func (e *%s) BuildData() (core.Data, error) or pass core.WithData", n.typeName, n.typeName)
		}
		if n.data, err = db.BuildData(); err != nil {
			return fmt.Errorf("BuildData: %w", err)
		}
	}
	if len(n.data) == 0 && !n.specOnly() {
		return fmt.Errorf("BuildData returned no splits: return at least a \"train\" or \"val\" split")
	}
	if _, ok := e.(Deriver); ok && n.specOnly() {
		n.warn(fmt.Sprintf("experiment %s has a Derive hook, which is not called under WithInputSpecs (there is no data to derive from): the fields it sets keep their values as constructed", n.typeName))
	} else if d, ok := e.(Deriver); ok {
		vals, err := d.Derive(n.data)
		if err != nil {
			return fmt.Errorf("Derive: %w", err)
		}
		if err := markers.Apply(e, vals); err != nil {
			return fmt.Errorf("Derive returned values that do not fit the experiment: %w", err)
		}
		n.derived = map[string]string{}
		for k, v := range vals {
			if s, ok := valueText(reflect.ValueOf(v)); ok {
				n.derived[k] = s
			}
		}
	}
	check := n.checkData
	if n.specOnly() {
		check = n.checkInputSpecs
	}
	if err := check(); err != nil {
		return err
	}
	if err := n.wrapData(); err != nil {
		return err
	}
	if n.gcHash, err = markers.GraphConstHash(e); err != nil {
		return err
	}
	if n.gcValues, err = markers.GraphConstValues(e); err != nil {
		return err
	}

	// Model: BuildModel configures the context; one shape trace of Forward creates the variables.
	n.ctx = context.New()
	if err := n.ctx.SetRNGStateFromSeed(int64(n.cfg.seed.value)); err != nil {
		return fmt.Errorf("seeding the model's RNG with Seed = %d: %w", n.cfg.seed.value, err)
	}
	if err := mb.BuildModel(n.ctx); err != nil {
		return fmt.Errorf("BuildModel: %w", err)
	}
	if err := n.placeDeviceFields(); err != nil {
		return err
	}
	if err := n.traceShapes(); err != nil {
		return err
	}
	if err := n.checkForwardHostIndependent(); err != nil {
		return err
	}
	if err := n.ctx.InitializeVariables(n.backend.Backend, nil); err != nil {
		return fmt.Errorf("initializing parameters: %w", err)
	}
	if err := n.placeParameters(); err != nil {
		return err
	}
	// The checkpointer, early stopping and a resume come before the logger's first record: a
	// resumed logger is reattached before anything is logged.
	if err := n.setUpCheckpoints(); err != nil {
		return err
	}
	n.startLog() // the params go on record before the first compile
	return nil
}

// checkData validates the splits against the hooks' declared fields and the train rules.
func (n *Nitro) checkData() error {
	n.fieldShapes = map[string]fieldShape{}
	n.splitAvail = map[string]map[string]bool{}
	n.splitWidth = map[string]int{}
	for _, split := range sortedKeys(n.data) {
		src := n.data[split]
		if src == nil || src.Len() == 0 {
			return fmt.Errorf("split %q is empty", split)
		}
		b, err := src.BatchAt(0)
		if err != nil {
			return fmt.Errorf("split %q, batch 0: %w", split, err)
		}
		w, err := batchWidth(b)
		if err != nil {
			return fmt.Errorf("split %q: %w", split, err)
		}
		avail := map[string]bool{}
		n.splitAvail[split] = avail
		n.splitWidth[split] = w
		for k, t := range b {
			avail[k] = true
			fs := fieldShape{dtype: t.DType().String(), row: append([]int(nil), t.Shape().Dimensions[1:]...)}
			if old, ok := n.fieldShapes[k]; ok && (old.dtype != fs.dtype || fmt.Sprint(old.row) != fmt.Sprint(fs.row)) {
				return fmt.Errorf("batch field %q is %s%v per sample in one split and %s%v in split %q: splits must agree", k, old.dtype, old.row, fs.dtype, fs.row, split)
			}
			n.fieldShapes[k] = fs
		}
		if err := n.forward.checkAgainst(split, avail); err != nil {
			return err
		}
		if split == "train" {
			if err := n.loss.checkAgainst(split, avail); err != nil {
				return err
			}
			if n.trainMetrics != nil {
				if err := n.trainMetrics.checkAgainst(split, avail); err != nil {
					return err
				}
			}
			pd, ok := src.(PartialDropper)
			if !ok || !pd.DropsPartial() {
				return fmt.Errorf("the train split must drop its partial final batch (a short batch would compile a second gradient program): build it with ArrayOptions{DropPartial: true} or implement DropsPartial() bool")
			}
			if src.Len()%n.cfg.accum.value != 0 {
				return fmt.Errorf("the train split has %d batches, not divisible by Accum = %d (%s): the horizon max_epochs*(batches/accum) must be exact; choose a batch size or accum that divides it", src.Len(), n.cfg.accum.value, n.cfg.accum.source)
			}
			n.trainWidth = w
		} else if n.metrics != nil {
			if err := n.metrics.checkAgainst(split, avail); err != nil {
				return err
			}
		} else if err := n.loss.checkAgainst(split, avail); err != nil {
			return fmt.Errorf("%w (with no Metrics hook, validation reports val_loss through Loss)", err)
		}
		if split != "train" {
			n.warnDroppedEval(split, src, w)
		}
	}
	return nil
}

// warnDroppedEval warns, once at setup, about an evaluation split that drops its partial final
// batch: its metrics silently leave those samples out (padding would keep them).
func (n *Nitro) warnDroppedEval(split string, src Source, width int) {
	pd, ok := src.(PartialDropper)
	if !ok || !pd.DropsPartial() {
		return
	}
	skipped := "some samples"
	if s, ok := src.(interface{ Samples() int }); ok {
		k := s.Samples() - src.Len()*width
		if k <= 0 {
			return
		}
		skipped = fmt.Sprintf("%d of its %d samples", k, s.Samples())
	}
	n.warn(fmt.Sprintf("split %q drops its partial final batch, so its metrics leave out %s: build it without DropPartial (an eval split pads its short final batch instead)", split, skipped))
}

// placeDeviceFields uploads each Device field's host value once.
func (n *Nitro) placeDeviceFields() error {
	vals, err := markers.DeviceValues(n.e)
	if err != nil {
		return err
	}
	n.dev = map[string]*tensors.Tensor{}
	n.devNames = nil
	for _, dv := range vals {
		t, err := hostTensor(dv.Value)
		if err != nil {
			return fmt.Errorf("Device field %s: %w", dv.Name, err)
		}
		n.devNames = append(n.devNames, dv.Name)
		if n.dev[dv.Name], err = n.upload(t, &n.uploads.Device); err != nil {
			return fmt.Errorf("Device field %s: %w", dv.Name, err)
		}
	}
	return nil
}

// hostTensor makes a tensor nitro owns from a host value (a caller's tensor is copied, since
// nitro uploads, donates and frees what it owns).
func hostTensor(v any) (t *tensors.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cannot make a tensor of %T: %v", v, r)
		}
	}()
	if t, ok := v.(*tensors.Tensor); ok {
		return t.LocalClone()
	}
	return tensors.FromAnyValue(v), nil
}

// upload places t (a tensor nitro owns) on device 0, drops its host copy, and counts it. A failed
// transfer (device out of memory, a lost device) is an error, never a panic.
func (n *Nitro) upload(t *tensors.Tensor, counter *int) (_ *tensors.Tensor, err error) {
	if t.IsOnDevice(0) {
		return t, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("uploading %s to the device: %v", t.Shape(), r)
		}
	}()
	if err := t.MaterializeOnDevice(n.backend.Backend, false, 0); err != nil {
		return nil, fmt.Errorf("uploading %s to the device: %w", t.Shape(), err)
	}
	t.FinalizeLocal() // the device copy is the value now; keep no second copy on the host
	*counter++
	return t, nil
}

// Experiment returns the real experiment.
func (n *Nitro) Experiment() any { return n.e }

// Backend says which backend the Nitro runs on and why.
func (n *Nitro) Backend() *backend.Resolved { return n.backend }

// Uploads returns the host-to-device transfer counters.
func (n *Nitro) Uploads() Uploads { return n.uploads }

// Step is the number of optimizer steps taken; Epoch the number of epochs completed.
func (n *Nitro) Step() int  { return n.st.step }
func (n *Nitro) Epoch() int { return n.st.epoch }

// StopReason is why the last Train returned ("completed", "early_stop" or "requested").
func (n *Nitro) StopReason() runstatus.Status { return n.stopReason }

// History lists the epochs trained by this Nitro.
func (n *Nitro) History() []EpochResult { return n.history }

// RunDir is the run's output directory as this Nitro resolved it (run option, RunDir method or
// field, else runs/<Experiment>): checkpoints, the manifest and the metrics file live there.
func (n *Nitro) RunDir() string { return n.cfg.runDir.value }

// TotalSteps is the run's horizon in optimizer steps: max_epochs * (batches_per_epoch / accum),
// as schedules computes it (schedules are defined over exactly this horizon).
func (n *Nitro) TotalSteps() int {
	tr, ok := n.data["train"]
	if !ok {
		return 0
	}
	total, err := schedules.TotalSteps(n.cfg.maxEpochs.value, tr.Len(), n.cfg.accum.value)
	if err != nil {
		return 0 // setup already refused a train split that does not divide by accum
	}
	return total
}

// ConfigReport is the text of the values fixed at construction.
func (n *Nitro) ConfigReport() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nitro %s: fixed at construction\n", n.typeName)
	row := func(k, v string) { fmt.Fprintf(&b, "  %-20s %s\n", k, v) }
	row("seed", n.cfg.seed.String())
	row("accum", n.cfg.accum.String())
	if n.opts.fused {
		row("step programs", "1, fused (gradient and update in one program; WithFusedStep)")
	} else {
		row("step programs", "2 (gradient, optimizer; the default)")
	}
	row("max epochs", n.cfg.maxEpochs.String())
	row("total opt steps", fmt.Sprint(n.TotalSteps()))
	clip := n.cfg.clip.String()
	if n.cfg.clip.value == 0 {
		clip += ", off"
	}
	row("gradient clip norm", clip)
	row("learning rate", n.cfg.lr.String())
	row("run dir", n.cfg.runDir.String())
	row("backend", n.backend.Reason)
	groups := make([]string, len(n.groups))
	for i, g := range n.groups {
		groups[i] = fmt.Sprintf("%s (%d arrays, %d values)", g.name, len(g.vars), g.size)
	}
	row("parameter groups", strings.Join(groups, ", "))
	return b.String()
}

// report sends the config and binding reports to the console and the logger, once per Nitro,
// before the first entry point that runs programs.
func (n *Nitro) report() {
	if n.reported {
		return
	}
	n.reported = true
	if n.console != nil {
		n.console.Reports(n.ConfigReport(), n.BindingReport())
	}
	n.logOther("config_report", n.ConfigReport())
	n.logOther("binding_report", n.BindingReport())
}

// routed returns the batch keys to transfer for a set of hooks, given the keys a batch (or a
// split's batches) actually has: each hook's declared fields that are present, sorted. Routing is
// per batch source, so an optional field present in one split and absent in another is passed
// where it exists and omitted where it does not, each with its own program.
func routed(avail map[string]bool, hooks ...*hook) []string {
	set := map[string]bool{}
	for _, h := range hooks {
		if h == nil {
			continue
		}
		for _, k := range h.declared(avail) {
			if avail[k] {
				set[k] = true
			}
		}
	}
	return sortedKeys(set)
}

// keySet turns keys into the availability set routed takes.
func keySet[V any](m map[string]V) map[string]bool {
	s := make(map[string]bool, len(m))
	for k := range m {
		s[k] = true
	}
	return s
}

func setOf(keys []string) map[string]bool {
	s := make(map[string]bool, len(keys))
	for _, k := range keys {
		s[k] = true
	}
	return s
}
