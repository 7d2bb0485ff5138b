package core

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/runstatus"
	"github.com/nitro-go/nitro/schedules"
)

// Stop reasons reported by Train: runstatus's, the one type a checkpoint records and the logger
// finishes with.
const (
	StopCompleted = runstatus.Completed
	StopRequested = runstatus.Requested
	StopEarly     = runstatus.EarlyStop // WithEarlyStopping ended the run
)

// Nitro is a set-up experiment: data built, parameters initialized and resident on the device.
// Programs compile lazily on first use through the process-level cache. A Nitro is not safe for
// concurrent use, except RequestStop, Interrupt and the read-only run accessors (Phase,
// ProgressCounter), which any goroutine (a monitor, a signal handler) may call.
//
// Its fields are grouped by lifetime: what New fixed (spec), the engine (compiled programs and
// device-resident values), and the run's observation and control. New's own work is the
// builder's (setup.go), which no verb reaches.
type Nitro struct {
	spec runSpec // fixed by New and read-only afterwards (setup.go)

	eng *engine.Engine // the device side: programs, parameters and state on the device (engine.go)
	st  trainState     // the run's progress: step, epoch, data position

	tracker     *monitors.Tracker // phase, progress, stop flag, monitors
	log         runLog            // the run's logger (nil when none) and its cadence
	ck          runCkpt           // checkpointer and early stopping (checkpoint.go)
	interrupted atomic.Bool       // Interrupt: break at the next step boundary
	reported    bool              // the config and binding reports went out
	drift       driftState        // the experiment's fields as New left them (drift.go)
	stopReason  runstatus.Status
	bound       trainBound // where a TrainSteps/TrainEpochs call stops (trainbound.go)
	history     []EpochResult
}

// EpochResult is one epoch's summary.
type EpochResult struct {
	Epoch int // the epoch the period ended in (a step period's may have ended part-way)
	// Step is the run's optimizer step at the period's end; TotalSteps is the run's horizon when
	// periods are counted in steps (ValEvery), else 0: the console then says "step 500/2000".
	Step, TotalSteps int
	TrainLoss        float64 // mean over the epoch's micro-batches
	// Train holds the TrainMetrics, each the mean over the epoch's micro-batches (under
	// WithLogEvery, over the logged steps' micro-batches: the others are not read back).
	Train map[string]float64
	// Val holds the val split's metrics named as the record, the console and the board name
	// them: val_loss, val_accuracy (a Metrics key "accuracy" gains the prefix).
	Val map[string]float64
	// Headline is the metrics the console's epoch line shows beside the train loss (record
	// names: val_accuracy), HeadlineMetrics's or the default; HeadlineValues pairs them.
	Headline []string
	Seconds  float64 // the epoch's wall time, validation included
	Steps    int     // optimizer steps in the epoch
	// TrainSeconds is the wall time of the epoch's optimizer steps alone (no validation, no
	// checkpoint); StepSeconds (TrainSeconds/Steps) and StepsPerSecond (Steps/TrainSeconds) are
	// the per-step figures a JAX or PyTorch loop reports.
	TrainSeconds, StepSeconds, StepsPerSecond float64
	// TokensPerSecond (over every process) and MFU, the model FLOPs utilization in [0, 1], are
	// set for a model with the Throughput hook (throughput.go); MFU needs a measured peak.
	TokensPerSecond, MFU float64
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
	o := options{out: os.Stdout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.continueRun {
		return nil, fmt.Errorf("core.New: ContinueRun is an option of NewFromCheckpoint; with New, resume a checkpoint with WithResume(path)")
	}
	v := reflect.ValueOf(e)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct || v.IsNil() {
		return nil, fmt.Errorf("core.New takes a pointer to an experiment struct, got %T", e)
	}
	if err := checkDefaults(e); err != nil {
		return nil, err
	}
	h := newNitro(e, v.Elem().Type().Name(), o)
	// New is an entry point: setup can be minutes of work (BuildData), so it publishes Starting
	// and, when it returns, Repl; a failed setup ends in Failed.
	defer h.enter("setup of "+h.spec.typeName, &err, func(err error) {
		if err != nil {
			n = nil
			h.setPhase(monitors.Failed{Err: err}, nil)
		}
	})()
	bld := &builder{n: h}
	if err := bld.setUp(); err != nil {
		return nil, err
	}
	if err := bld.snapshotFields(); err != nil {
		return nil, err
	}
	return h, nil
}

// Experiment returns the real experiment.
func (n *Nitro) Experiment() any { return n.spec.e }

// Backend says which backend the Nitro runs on and why.
func (n *Nitro) Backend() *backend.Resolved { return n.spec.backend }

// Step is the number of optimizer steps taken; Epoch the number of epochs completed.
func (n *Nitro) Step() int  { return n.st.step }
func (n *Nitro) Epoch() int { return n.st.epoch }

// StopReason is why the last Train returned ("completed", "early_stop" or "requested").
func (n *Nitro) StopReason() runstatus.Status { return n.stopReason }

// History lists the epochs trained by this Nitro.
func (n *Nitro) History() []EpochResult { return n.history }

// RunDir is the run's output directory as this Nitro resolved it (run option, RunDir method or
// field, else runs/<Experiment>): checkpoints, the manifest and the metrics file live there.
func (n *Nitro) RunDir() string { return n.spec.cfg.runDir.value }

// TotalSteps is the run's horizon in optimizer steps: MaxSteps when set, else max_epochs *
// (batches_per_epoch / accum), as schedules computes it (schedules are defined over exactly this
// horizon).
func (n *Nitro) TotalSteps() int {
	tr, ok := n.spec.data["train"]
	if !ok {
		return 0
	}
	if ms := n.spec.cfg.maxSteps.value; ms > 0 {
		return ms
	}
	total, err := schedules.TotalSteps(n.spec.cfg.maxEpochs.value, tr.Len(), n.spec.cfg.accum.value)
	if err != nil {
		return 0 // setup already refused a train split that does not divide by accum
	}
	return total
}

// ConfigReport is the text of the values fixed at construction.
func (n *Nitro) ConfigReport() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nitro %s: fixed at construction\n", n.spec.typeName)
	row := func(k, v string) { fmt.Fprintf(&b, "  %-20s %s\n", k, v) }
	row("seed", n.spec.cfg.seed.String())
	row("accum", n.spec.cfg.accum.String())
	if n.spec.trainStep != nil {
		row("step programs", "1, manual (TrainStep owns the step)")
	} else if n.spec.opts.fused {
		row("step programs", "1, fused (gradient and update in one program; WithFusedStep)")
	} else {
		row("step programs", "2 (gradient, optimizer; the default)")
	}
	if n.spec.cfg.maxSteps.value > 0 {
		row("max steps", n.spec.cfg.maxSteps.String())
	} else {
		row("max epochs", n.spec.cfg.maxEpochs.String())
	}
	if n.spec.stepPeriods() {
		every := n.spec.cfg.checkpointEvery
		if every.value == 0 {
			every = n.spec.cfg.valEvery
		}
		row("validate every", n.spec.cfg.valEvery.String()+" steps")
		row("checkpoint every", every.String()+" steps")
	}
	row("total opt steps", fmt.Sprint(n.TotalSteps()))
	clip := n.spec.cfg.clip.String()
	if n.spec.cfg.clip.value == 0 {
		clip += ", off"
	}
	row("gradient clip norm", clip)
	row("learning rate", n.spec.cfg.lr.String())
	row("mixed precision", n.spec.cfg.precision.String())
	row("run dir", n.spec.cfg.runDir.String())
	row("backend", n.spec.backend.Reason)
	row("compile cache", n.spec.backend.CompileCache.String())
	row("host allocator", n.spec.backend.HostAlloc)
	row("devices", n.deviceReport())
	procs := n.Dist().Describe() // the rank and world size, and the launcher they came from
	if c := n.spec.multi(); c != nil {
		procs += fmt.Sprintf(", gradients and validation summed over %d processes (%s)", c.Size(), collectiveVia(c))
	} else if n.Dist().WorldSize > 1 {
		procs += ", no collective: each process trains its own model"
	}
	row("processes", procs)
	names := n.eng.GroupNames()
	arrays, values := n.eng.GroupSizes()
	groups := make([]string, len(names))
	for i, name := range names {
		groups[i] = fmt.Sprintf("%s (%d arrays, %d values)", name, arrays[i], values[i])
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
	if n.spec.console != nil {
		n.spec.console.Reports(n.ConfigReport(), n.BindingReport())
	}
	n.log.other("config_report", n.ConfigReport())
	n.log.other("binding_report", n.BindingReport())
	if notices := n.spec.opt.Notices(); len(notices) > 0 {
		n.log.other("binding_notices", notices)
	}
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
