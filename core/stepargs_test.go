package core_test

import (
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

// A step uploads only the scalars that changed: the step count every step, a constant
// hyperparameter (Reg's eta) once per run, a scheduled one once per value, and the accum flag's
// two values once each.
func TestStepScalarsUploadOnlyWhatChanged(t *testing.T) {
	const epochs = 2 // 4 batches each
	for _, tc := range []struct {
		name   string
		e      any
		opts   []core.Option
		steps  int
		hyper  int // Hyper uploads over the run
		reason string
	}{
		{"two programs", &coretest.Reg{}, nil, 8, 8 + 1, "8 step counts + eta once"},
		{"fused", &coretest.Reg{}, []core.Option{core.WithFusedStep()}, 8, 8 + 1, "8 step counts + eta once"},
		{"accum 2", &coretest.Reg{}, []core.Option{core.WithAccum(2)}, 4, 4 + 1 + 2, "4 step counts + eta once + the first flag's two values"},
		{"scheduled eta", &Scheduled{}, nil, 8, 8 + 8, "8 step counts + 8 values of eta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := coretest.MustNew(t, tc.e, coretest.Data(t, 0), append([]core.Option{core.WithMaxEpochs(epochs)}, tc.opts...)...)
			before := n.Uploads()
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			if n.Step() != tc.steps {
				t.Fatalf("Step %d, want %d", n.Step(), tc.steps)
			}
			if got := n.Uploads().Hyper - before.Hyper; got != tc.hyper {
				t.Errorf("%d scalar (Hyper) uploads over %d steps, want %d (%s)", got, tc.steps, tc.hyper, tc.reason)
			}
		})
	}
}
