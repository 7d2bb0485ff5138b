package core

import (
	"io"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
)

// Option configures New. Run options win over the experiment's methods and fields.
type Option func(*options)

type options struct {
	maxEpochs, seed, accum *int
	maxSteps, valEvery     *int // WithMaxSteps, WithValEvery (periods.go)
	checkpointEvery        *int // WithCheckpointEvery (periods.go)
	devices                *int // WithDevices (devices.go)
	runDir                 *string
	clip, lr               *float64
	data                   prefetch.Data
	inputSpecs             []prefetch.FieldSpec // WithInputSpecs: no data; nil when not given
	backend                string
	out                    io.Writer
	quiet                  bool
	console                Console
	consoleSet             bool
	cache                  engine.Cache
	fused                  bool
	prefetch               *prefetch.Options
	logger                 logjson.Logger
	loggerSet              bool // WithLogger or WithoutLogger was given: no default logger
	logEvery               *int
	monitors               []monitors.Monitor
	warn                   func(string)
	ckpt                   checkpoint.Checkpointer
	ckptSet                bool   // WithCheckpointer or WithoutCheckpoints was given
	resume                 string // WithResume: "auto" or a checkpoint path
	weights                string // WithCheckpoint: a checkpoint path, weights only
	continueRun            bool   // ContinueRun: NewFromCheckpoint resumes; New refuses it
	early                  *earlySpec
	preset                 string
	residency              Residency      // WithMetricsResidency; "" when not given
	precision              *string        // WithMixedPrecision; nil: f32
	dist                   *dist.Dist     // WithDist; nil: rank 0 of 1
	collective             Collective     // WithCollective (collective.go); nil: no collective
	independent            bool           // WithIndependentRanks (collective.go)
	overwrite              bool           // WithOverwrite (rundir.go)
	schedules              map[string]any // WithSchedules (hyper.go); nil when not given
	compileCache           string         // WithCompileCache: a folder or "off"; "" for $NITRO_COMPILE_CACHE
}

// WithMaxEpochs sets how many epochs Train runs.
func WithMaxEpochs(n int) Option { return func(o *options) { o.maxEpochs = &n } }

// WithSeed sets the RNG seed of the model's context: parameter initialization and in-graph
// randomness such as dropout. Shuffling belongs to the source (prefetch.ArrayOptions.Seed), which BuildData
// builds from the experiment's own fields.
func WithSeed(s int) Option { return func(o *options) { o.seed = &s } }

// WithAccum sets micro-batches per optimizer step.
func WithAccum(n int) Option { return func(o *options) { o.accum = &n } }

// WithRunDir sets the run directory.
func WithRunDir(dir string) Option { return func(o *options) { o.runDir = &dir } }

// WithGradientClipNorm sets the global-norm clip threshold (0 = off, emits no ops).
func WithGradientClipNorm(c float64) Option { return func(o *options) { o.clip = &c } }

// WithLearningRate sets the base learning rate.
func WithLearningRate(lr float64) Option { return func(o *options) { o.lr = &lr } }

// WithData supplies the data directly; BuildData is then not called.
func WithData(d prefetch.Data) Option { return func(o *options) { o.data = d } }

// WithBackend forces a backend ("xla" or "go"); empty resolves automatically.
func WithBackend(name string) Option { return func(o *options) { o.backend = name } }

// WithOutput sends the Nitro's printed lines (config report, epoch lines) to w, through
// TextConsole(w).
func WithOutput(w io.Writer) Option { return func(o *options) { o.out = w } }

// Quiet runs with no console: nothing is printed.
func Quiet() Option { return func(o *options) { o.quiet = true } }

// WithMonitor registers m on the run from its start, after the process-level monitors (see
// package monitors for the order and the failure rules). Monitors registered later with
// Nitro.RegisterMonitor reach the live run at once.
func WithMonitor(m monitors.Monitor) Option {
	return func(o *options) { o.monitors = append(o.monitors, m) }
}

// WithWarn receives the run's warnings (a failing monitor, reported once per monitor; a logger
// write that failed). The default prints them on the console, or on stderr when Quiet.
func WithWarn(warn func(msg string)) Option { return func(o *options) { o.warn = warn } }

// WithCompileCache chooses the persistent compile cache on disk: a folder, or "off". Without it,
// $NITRO_COMPILE_CACHE decides, else os.UserCacheDir()/nitro/compile. The disk cache belongs to
// the process (the last Nitro to choose wins) and is keyed by everything a compiled executable
// depends on, so sharing a folder never serves a wrong program; docs/compilecache.md.
func WithCompileCache(dir string) Option { return func(o *options) { o.compileCache = dir } }

// WithCache uses c (a *compilecache.Cache) instead of the process-level compile cache (tests).
func WithCache(c engine.Cache) Option { return func(o *options) { o.cache = c } }

// WithPrefetch sets the prefetch settings every split is declared with, unless BuildData already
// declared it (prefetch.Prefetch, or prefetch.NoPrefetch to feed it inline). The default is
// prefetch.Defaults(): min(4, GOMAXPROCS) workers, 1 device batch staged, 2 host batches per
// worker. The resolved settings are in the binding report.
func WithPrefetch(o prefetch.Options) Option { return func(opts *options) { opts.prefetch = &o } }

// WithFusedStep compiles each training step as ONE program (gradient and optimizer update
// together) instead of the default two. It saves a program launch and a round trip of the
// gradients through device memory per step; the price is that a change of the clip threshold
// recompiles the whole step instead of only the cheap optimizer program. Accum must be 1: a fused
// step has no place to accumulate micro-batches (New refuses otherwise). Compile-cache counts:
// 1 program train-only and 2 with validation, where the default step has 2 and 3.
func WithFusedStep() Option { return func(o *options) { o.fused = true } }
