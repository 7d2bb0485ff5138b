package export_test

import (
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/export"
)

// HostAtWidthOne reads a Host field in Forward only at batch size 1: setup's check at the
// training width cannot see it; the export check at each exported batch size does.
type HostAtWidthOne struct {
	coretest.Base
	Scale float64
}

func (e *HostAtWidthOne) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	pred := layers.Dense(ctx.In("dense_0"), in.X, true, 1)
	if in.X.Shape().Dimensions[0] == 1 {
		pred = graph.MulScalar(pred, e.Scale)
	}
	return core.Outputs{"pred": pred}
}

func TestExportRefusesHostReadAtAnExportedBatchSize(t *testing.T) {
	for _, be := range coretest.HostCheckBackends(t) {
		n, err := core.New(&HostAtWidthOne{Scale: 2}, append(coretest.GoOpts(nil, core.WithData(coretest.Data(t, 0)), core.WithMaxEpochs(1)), core.WithBackend(be))...)
		if err != nil {
			t.Fatalf("%s: New (training width 16 reads no Host field): %v", be, err)
		}
		_, err = export.Export(n, filepath.Join(t.TempDir(), "bundle"), export.ExportSpec{Name: "w1", BatchSizes: []int{4, 1}})
		coretest.WantHostRead(t, err, "Scale")
		coretest.WantErr(t, err, "export at batch size 1")
	}
}
