package core_test

import (
	"math"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/logjson"
)

// costed is Groups with a known cost per sample: 5 tokens, each 1000 FLOPs to train.
type costed struct{ Groups }

func (*costed) Throughput() core.Throughput {
	return core.Throughput{TokensPerSample: 5, TrainFLOPsPerToken: 1000}
}

// A model with the Throughput hook reports tokens per second (steps per second times the 8 rows
// of a step times its 5 tokens) and an MFU against the measured peak, in the history and the
// record's data line; a cost that counts nothing is refused at New by name.
func TestThroughputReportsTokensAndMFU(t *testing.T) {
	lg := &logjson.Memory{}
	n := coretest.New(t, &costed{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(2), core.WithLogger(lg))...)
	coretest.Train(t, n)
	for _, r := range n.History() {
		if want := r.StepsPerSecond * 8 * 5; math.Abs(r.TokensPerSecond-want) > 1e-9*want || !(r.MFU > 0 && r.MFU < 1) {
			t.Errorf("epoch %d: %v tokens/s at %v steps/s (want %v), MFU %v (want in (0, 1))", r.Epoch, r.TokensPerSecond, r.StepsPerSecond, want, r.MFU)
		}
	}
	data := lg.Metrics("data")
	if len(data) != 2 || data[1].Values["tokens_per_second"] != n.History()[1].TokensPerSecond || data[1].Values["mfu"] != n.History()[1].MFU {
		t.Errorf("data lines %+v: want tokens_per_second and mfu as the history has them", data)
	}
	plain := coretest.New(t, &Groups{}, coretest.GoOpts(nil, core.WithData(shuffled(t)))...)
	coretest.Train(t, plain)
	if r := plain.History()[0]; r.TokensPerSecond != 0 || r.MFU != 0 {
		t.Errorf("a model without the hook reports %v tokens/s and MFU %v, want none", r.TokensPerSecond, r.MFU)
	}
	coretest.WantErr(t, newErr(t, &badCost{}, shuffled(t)), "Throughput()", "TokensPerSample must be >= 1")
}

type badCost struct{ Groups }

func (*badCost) Throughput() core.Throughput { return core.Throughput{} }
