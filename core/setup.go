package core

import (
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

// runSpec is what New fixed for a Nitro's life, and the queries on it: the experiment and its
// resolved hooks, knobs and accessors, the backend and compile cache, the data contract, the
// model's variables and layout, and the resolved optimization. The builder's phases fill it;
// nothing here changes after New returns (the optimization's per-step schedule evaluation is a
// memo, not state), so every compile-cache key can be built from it alone.
type runSpec struct {
	e        any // *E, the real experiment
	typeName string
	traits   *markers.Traits
	opts     options
	cfg      config
	acc      accessors // the optional experiment accessors, resolved once (hyper.go)
	backend  *backend.Resolved
	// compiledAt is the process's compile counts (by the plugin, from disk) when the backend
	// was resolved: the run's "compile cache:" line reports what moved since.
	compiledAt    [2]int64
	compileSecsAt float64
	cache         engine.Cache // nil: the process-level one
	devs          devices      // n_devs (devices.go); the engine runs the mesh
	tput          *throughput  // tokens per second and MFU (throughput.go); nil without Throughput

	console Console // human-readable report; nil when Quiet (chosen from the options)

	overwriteDue bool // WithOverwrite found an earlier run to remove at the end of setup (rundir.go)
	archiveDue   bool // resume auto found a record and no checkpoint: keep it aside at the end of setup (rundir.go)

	forward, loss, metrics, trainMetrics *hook
	trainStep                            *hook // manual mode's TrainStep; nil in the automatic loop (manual.go)

	evalm evalMetrics // where the evaluation metrics run, and HostMetrics (hostmetrics.go)

	data         prefetch.Data
	sharded      bool // core cut the splits into this rank's shards (shardForCollective)
	trainWidth   int
	splitWidth   map[string]int             // per split: batch 0's rows, the compiled width
	prefetchFrom map[string]string          // per split: where its prefetch settings came from
	fieldShapes  map[string]fieldShape      // per batch key: dtype and per-row dims
	splitAvail   map[string]map[string]bool // per split: the keys its batches carry

	ctx *context.Context
	opt *optSetup

	gcHash   string
	gcValues [][2]string
	derived  map[string]string // what Derive returned, as plain text (a checkpoint records it)
}

// builder is New's work: its phases, in setUp's order, resolve the experiment and fill the Nitro
// under construction (its runSpec, engine, checkpointer, logger). New drops it on return, so a
// verb of the Nitro never reaches code that only setup runs.
type builder struct {
	n *Nitro
}

type fieldShape struct {
	dtype string
	row   []int
}

// setUp is New: its phases in order, each in the file of its name. The config is resolved and
// validated before anything runs the experiment's code, the data is checked before the model is
// built from it, and the record starts only once everything it records is fixed.
func (bld *builder) setUp() error {
	for _, phase := range []func() error{
		bld.resolveHooks,      // hooks.go: markers, traced hooks, BuildModel, optional accessors
		bld.resolveConfig,     // config.go: knobs and run options, validated together
		bld.checkDist,         // dist.go: the rank in [0, world size)
		bld.checkCollective,   // collective.go: the collective's rank and size are the Dist's
		bld.manualConfig,      // manual.go: what manual mode refuses (Accum, TrainMetrics)
		bld.checkRunDir,       // rundir.go: the run directory is usable
		bld.resolveBackend,    // config.go: the backend
		bld.takeData,          // splits.go: WithData, else BuildData, else none (WithInputSpecs)
		bld.derive,            // derive.go: Derive's values into the experiment; the GraphConst hash
		bld.checkSplits,       // splits.go: splits against the hooks; each declared for prefetch
		bld.resolveDevices,    // devices.go: n_devs, the batch divides over it
		bld.resolveThroughput, // throughput.go: tokens and FLOPs per sample, when the model says
		bld.agree,             // collective.go: every process runs the same thing
		bld.manualSplits,      // manual.go: TrainStep's fields; something to validate with
		bld.buildModel,        // buildmodel.go: BuildModel, the engine, Device fields, shape trace, parameters on the device
		bld.setupOptimization, // hyper.go: each group's optimizer, its state on the device
		bld.setUpCheckpoints,  // checkpoint.go: checkpointer, early stopping, a resume
		bld.clearRunDir,       // rundir.go: WithOverwrite removes the earlier run, setup having succeeded
	} {
		if err := phase(); err != nil {
			return err
		}
	}
	bld.startLog() // logger.go: the params go on record before the first compile
	return nil
}
