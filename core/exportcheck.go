package core

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/markers"
)

// checkExportHostIndependent traces the export's Forward at every batch size from the experiment
// as it is and from its Host-zeroed view, and refuses a difference naming the Host fields: the
// export program is built from the zeroed view, so a Host read there (for instance one that
// matters only at a batch size the training check never saw) would ship the zero value.
func (n *Nitro) checkExportHostIndependent(p *exportPlan, frozen map[string]*tensors.Tensor) error {
	for _, b := range p.batches {
		err := markers.CheckHostIndependent(n.e, func(src any) (string, error) {
			var fp string
			err := tryGraph(fmt.Sprintf("tracing Forward for export at batch size %d", b), func() {
				g := markers.NewTraceGraph(n.backend.Backend, "nitro_export_check")
				defer g.Finalize()
				consts := map[string]*graph.Node{}
				for _, name := range n.devNames {
					consts[name] = graph.ConstTensor(g, frozen[name])
				}
				n.exportForward(g, src, consts, n.exportBatch(p, p.inputParams(g, b)), b)
				var err error
				if fp, err = markers.Fingerprint(g); err != nil {
					panic(err)
				}
			})
			return fp, err
		})
		if err != nil {
			return fmt.Errorf("export at batch size %d: %w", b, err)
		}
	}
	return nil
}
