package core

import (
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core/backend"
	"github.com/nitro-go/nitro/markers"
)

// setup is what New fixes for a Nitro's life: the experiment and its resolved hooks, knobs and
// accessors, the backend and compile cache, the data contract, the model's variables and layout,
// and the resolved optimization. Nothing here changes after New returns (the optimization's
// per-step schedule evaluation is a memo, not state), so every compile-cache key can be built
// from it alone.
type setup struct {
	e        any // *E, the real experiment
	typeName string
	traits   *markers.Traits
	opts     options
	cfg      config
	acc      accessors // the optional experiment accessors, resolved once (hyper.go)
	backend  *backend.Resolved
	cache    *compilecache.Cache

	forward, loss, metrics, trainMetrics *hook

	data         Data
	trainWidth   int
	splitWidth   map[string]int             // per split: batch 0's rows, the compiled width
	prefetchFrom map[string]string          // per split: where its prefetch settings came from
	fieldShapes  map[string]fieldShape      // per batch key: dtype and per-row dims
	splitAvail   map[string]map[string]bool // per split: the keys its batches carry

	ctx       *context.Context
	groups    []*paramGroup                // parameter groups: variables, layout, chain
	stateVars []*context.Variable          // layer state variables (non-trainable), by name
	varInputs map[string]*context.Variable // program input name -> variable
	devNames  []string                     // Device fields, in program-input order
	opt       *optSetup

	gcHash   string
	gcValues [][2]string
	derived  map[string]string // what Derive returned, as plain text (a checkpoint records it)
}

type fieldShape struct {
	dtype string
	row   []int
}
