package core

import (
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

// setup is what New fixes for a Nitro's life: the experiment and its resolved hooks, knobs and
// accessors, the backend and compile cache, the data contract, the model's variables and layout,
// and the resolved optimization. Nothing here changes after New returns (the optimization's
// per-step schedule evaluation is a memo, not state), so every compile-cache key can be built
// from it alone.
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

type fieldShape struct {
	dtype string
	row   []int
}

// setUp is New: its phases in order, each in the file of its name. The config is resolved and
// validated before anything runs the experiment's code, the data is checked before the model is
// built from it, and the record starts only once everything it records is fixed.
func (n *Nitro) setUp() error {
	for _, phase := range []func() error{
		n.spec.resolveHooks,   // hooks.go: markers, traced hooks, BuildModel, optional accessors
		n.spec.resolveConfig,  // config.go: knobs and run options, validated together
		n.checkDist,           // dist.go: the rank in [0, world size)
		n.checkCollective,     // collective.go: the collective's rank and size are the Dist's
		n.spec.manualConfig,   // manual.go: what manual mode refuses (Accum, TrainMetrics)
		n.checkRunDir,         // rundir.go: the run directory is usable
		n.spec.resolveBackend, // config.go: the backend
		n.takeData,            // splits.go: WithData, else BuildData, else none (WithInputSpecs)
		n.spec.derive,         // derive.go: Derive's values into the experiment; the GraphConst hash
		n.spec.checkSplits,    // splits.go: splits against the hooks; each declared for prefetch
		n.resolveDevices,      // devices.go: n_devs, the batch divides over it
		n.agree,               // collective.go: every process runs the same thing
		n.spec.manualSplits,   // manual.go: TrainStep's fields; something to validate with
		n.buildModel,          // buildmodel.go: BuildModel, the engine, Device fields, shape trace, parameters on the device
		n.setupOptimization,   // hyper.go: each group's optimizer, its state on the device
		n.setUpCheckpoints,    // checkpoint.go: checkpointer, early stopping, a resume
		n.spec.clearRunDir,    // rundir.go: WithOverwrite removes the earlier run, setup having succeeded
	} {
		if err := phase(); err != nil {
			return err
		}
	}
	n.startLog() // logger.go: the params go on record before the first compile
	return nil
}
