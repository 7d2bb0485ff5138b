package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

// Padded pads its input before the Dense layer: an operation the pure-Go backend lacks.
type Padded struct{ coretest.Base }

func (*Padded) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), pad(in.X), true, 1)}
}

// PaddedGradient pads only in its gradient program (the loss's), so setup passes and the first
// step's compile is what fails.
type PaddedGradient struct{ coretest.Base }

func (*PaddedGradient) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(pad(out["pred"]), pad(in.Y))
}

func pad(x *graph.Node) *graph.Node {
	return graph.Pad(x, graph.ScalarZero(x.Graph(), x.DType()), backends.PadAxis{}, backends.PadAxis{End: 1})
}

// A model that needs an operation the pure-Go backend does not have fails with the way to the
// XLA plugin, which has it, whether Forward (at setup) or a step's program (at its compile) needs
// it; the backend's own words stay in the error.
func TestMissingOpOnPureGoNamesThePlugin(t *testing.T) {
	want := []string{"not implemented", "pure-Go backend, which lacks that operation", backend.SetupHint}
	_, err := core.New(&Padded{}, coretest.GoOpts(nil, core.WithData(coretest.Data(t, 0)))...)
	coretest.WantErr(t, err, append([]string{"tracing Forward"}, want...)...)

	n := coretest.MustNew(t, &PaddedGradient{}, coretest.Data(t, 0), core.WithMaxEpochs(1))
	coretest.WantErr(t, n.Train(), append([]string{"compiling gradient program"}, want...)...)
}
