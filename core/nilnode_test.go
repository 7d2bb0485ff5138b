package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/hooks"
)

// TypoLoss reads an output key Forward does not return ("Pred" for "pred"): Go's map read gives
// nil, and GoMLX's op panics "Node is nil".
type TypoLoss struct{ coretest.Base }

func (*TypoLoss) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["Pred"], in.Y)
}

// The error of a nil node names the likely cause, a key that is not there, and what to check.
func TestANilNodeErrorNamesTheMissingKeyCause(t *testing.T) {
	n := coretest.MustNew(t, &TypoLoss{}, coretest.Data(t, 0))
	err := n.Train()
	coretest.WantErr(t, err, "Node is nil", "most often a key that is not there", "Forward's outputs and the batch fields")
}

// NoMetrics has a Metrics hook that returns an empty map.
type NoMetrics struct{ coretest.Base }

func (*NoMetrics) Metrics(out core.Outputs, in coretest.Tgt) map[string]hooks.Metric { return nil }

// An empty Metrics map is refused naming the hook and the two fixes, not left to GoMLX's "no
// outputs selected" at compile time.
func TestEmptyMetricsIsRefused(t *testing.T) {
	var err error
	if n, nerr := core.New(&NoMetrics{}, coretest.GoOpts(nil, core.WithData(coretest.Data(t, 32)))...); nerr != nil {
		err = nerr
	} else {
		_, err = n.Validate()
	}
	coretest.WantErr(t, err, "Metrics returned no metrics", "drop the hook")
}
