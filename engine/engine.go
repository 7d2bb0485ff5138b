package engine

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/dotgrad"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/mesh"
	"github.com/nitro-go/nitro/monitors"
)

// Hooks are the experiment's traced hooks as plain functions, bound once by the caller. view is
// the experiment with its Device fields bound to the program's inputs (BindView); batch holds the
// routed batch fields of the hook. An absent optional hook is nil.
type Hooks struct {
	Forward      func(view any, ctx *context.Context, batch map[string]*graph.Node) map[string]*graph.Node
	Loss         func(view any, out, batch map[string]*graph.Node) *graph.Node
	Metrics      func(view any, out, batch map[string]*graph.Node) map[string]hooks.Metric
	TrainMetrics func(view any, out, batch map[string]*graph.Node) map[string]*graph.Node
	TrainStep    func(view any, s hooks.ManualStep, batch map[string]*graph.Node) hooks.StepResult
	// Route lists the batch keys hook ("Forward", "Loss", ...) reads of keys, sorted.
	Route func(hook string, keys []string) []string
}

// Cache keeps compiled programs across engines, by key (a *compilecache.Cache): a program one
// engine compiled, another with an equal key reuses.
type Cache interface {
	Get(key compilecache.Key, compile func() (any, error)) (any, compilecache.Lookup, error)
}

var _ Cache = (*compilecache.Cache)(nil)

// BuildIdentity is the build the programs' cache keys name (compilecache's): a checkpoint and
// an export's provenance record it.
func BuildIdentity() string { return compilecache.BuildIdentity() }

// FieldShape is a batch field's dtype and per-row dimensions.
type FieldShape struct {
	DType string
	Row   []int
}

// Config is what an Engine is built from: all of it fixed for the engine's life, so every
// compile-cache key can be built from it.
type Config struct {
	Experiment any // *E, the real experiment: the Host-independence check and the Device fields read it
	TypeName   string
	Backend    *backend.Resolved
	Cache      Cache // nil: compilecache.Default()
	Ctx        *context.Context
	Devices    int // data-parallel devices; above 1 the programs run over a mesh
	Precision  Precision
	Accum      int
	Clip       float64
	Fused      bool // one program per step (gradient and update); without TrainStep, Accum must be 1
	TrainWidth int  // the train split's batch rows

	GraphConstHash string
	GraphConst     [][2]string
	FieldShapes    map[string]FieldShape
	Hooks          Hooks
	MetricsOnHost  bool // the eval program returns Forward's outputs alone

	// Grouper names a parameter's group by keypath; nil puts every parameter in "default".
	Grouper func(keypath []string) string
	// Hyper gives a group's hyperparameter values at a 1-based optimizer step.
	Hyper func(group string, step int) (map[string]float64, error)
	// Compiling runs a cache miss's compilation in its phase (the caller's tracker publishes it).
	Compiling func(phase monitors.Compiling, fn func() error) error
	// Notice and Warn report to the caller's console.
	Notice, Warn func(string)
	// Reducer sums each step's gradients over the processes of a multi-process run (nil, or a
	// Size of 1: this process alone). Above 1 the step must be two programs: the sum runs
	// between them (allreduce.go). A Reducer that is also a DeviceAllReducer takes the gradients
	// on the device; any other, through one host buffer.
	Reducer AllReducer
	// StopVote is this process's vote, taken in each step's sum, to stop after the step; every
	// process learns whether any voted (StepValues.Stop), so all stop at the same step.
	StopVote func() bool
}

// Engine owns the device side of a run. See doc.go.
type Engine struct {
	exp         any
	typeName    string
	backend     *backend.Resolved
	cache       Cache
	ctx         *context.Context
	mesh        *mesh.Mesh
	precision   Precision
	accum       int
	clip        float64
	fused       bool
	trainWidth  int
	gcHash      string
	gcValues    [][2]string
	fieldShapes map[string]FieldShape
	hooks       Hooks
	onHost      bool
	grouper     func([]string) string
	hyper       func(string, int) (map[string]float64, error)
	compiling   func(monitors.Compiling, func() error) error
	notice      func(string)
	warn        func(string)
	zeroWarned  map[string]bool // hook and group already warned of parameters with no gradient

	groups    []*paramGroup                // parameter groups: variables, layout, chain
	stateVars []*context.Variable          // layer state variables (non-trainable), by name
	varInputs map[string]*context.Variable // program input name -> variable
	devNames  []string                     // Device fields, in program-input order

	progs   map[string]*program        // compiled programs, by kind and width (see memo)
	dev     map[string]*tensors.Tensor // Device fields' device copies
	st      state                      // parameters, optimizer and layer state on the device
	uploads Uploads
	scratch stepScratch
	reducer AllReducer // nil: one process
	vote    func() bool
	reduce  reduceScratch
}

// Uploads counts host-to-device transfers by what was transferred, so tests can assert
// residency (e.g. zero parameter uploads per eval batch).
type Uploads struct {
	Params, OptState, LayerState, Device, Batch, Hyper int
	// Offsets counts the offsets of the arrays that share a buffer (flat.go): once per such
	// array at setup, the views' start indices every model program reads.
	Offsets int
}

// New builds an engine on cfg: the mesh when cfg.Devices is above 1, and nothing on the device
// yet (PlaceDeviceFields, then PlaceParameters and InitOptimizer, do that).
func New(cfg Config) (*Engine, error) {
	// Matrix-product gradients for Dot/DotGeneral before any graph is built (see dotgrad).
	dotgrad.Install()
	if cfg.Hooks.Forward == nil || cfg.Hooks.Route == nil {
		return nil, fmt.Errorf("engine.New: Config.Hooks needs Forward and Route")
	}
	e := &Engine{
		exp: cfg.Experiment, typeName: cfg.TypeName, backend: cfg.Backend, cache: cfg.Cache, ctx: cfg.Ctx,
		precision: cfg.Precision, accum: max(cfg.Accum, 1), clip: cfg.Clip, fused: cfg.Fused, trainWidth: cfg.TrainWidth,
		gcHash: cfg.GraphConstHash, gcValues: cfg.GraphConst, fieldShapes: cfg.FieldShapes,
		hooks: cfg.Hooks, onHost: cfg.MetricsOnHost, grouper: cfg.Grouper, hyper: cfg.Hyper,
		compiling: cfg.Compiling, notice: cfg.Notice, warn: cfg.Warn,
	}
	if e.cache == nil {
		e.cache = compilecache.Default()
	}
	if e.compiling == nil {
		e.compiling = func(_ monitors.Compiling, fn func() error) error { return fn() }
	}
	if e.notice == nil {
		e.notice = func(string) {}
	}
	if e.warn == nil {
		e.warn = func(string) {}
	}
	if r := cfg.Reducer; r != nil && r.Size() > 1 {
		switch {
		case cfg.Hooks.TrainStep != nil:
			return nil, fmt.Errorf("engine.New: a manual TrainStep is one program, with no point between the gradients and the update for the sum over %d processes: train it as one process", r.Size())
		case cfg.Fused:
			return nil, fmt.Errorf("engine.New: Config.Fused (WithFusedStep, --fused) is one program, with no point between the gradients and the update for the sum over %d processes: drop it for a multi-process run", r.Size())
		}
		e.reducer, e.vote = r, cfg.StopVote
	}
	if cfg.Devices > 1 {
		m, err := mesh.New(cfg.Backend.Backend, cfg.Devices)
		if err != nil {
			return nil, err
		}
		e.mesh = m
	}
	return e, nil
}

// Uploads returns the host-to-device transfer counters.
func (e *Engine) Uploads() Uploads { return e.uploads }

// CountBatchUploads counts fields a batch stream placed on the device.
func (e *Engine) CountBatchUploads(k int) { e.uploads.Batch += k }

// Context is the model context the programs trace.
func (e *Engine) Context() *context.Context { return e.ctx }
