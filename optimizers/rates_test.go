package optimizers_test

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

func TestLRRatios(t *testing.T) {
	r, err := optimizers.LRRatios(1e-3, []optimizers.GroupLR{{Group: "backbone", LR: 1e-4}, {Group: "head", LR: 1e-3}})
	if err != nil {
		t.Fatal(err)
	}
	if r["default"] != 1 || math.Abs(r["backbone"]-0.1) > 1e-15 || r["head"] != 1 {
		t.Errorf("ratios %v", r)
	}
	_, err = optimizers.LRRatios(0, nil)
	mustContain(t, err, "learning_rate of the default group is 0", "ratios", "must be non-zero")
	_, err = optimizers.LRRatios(1e-3, []optimizers.GroupLR{{Group: "head", LR: math.NaN()}})
	mustContain(t, err, `learning_rate of group "head" is NaN`)
	_, err = optimizers.LRRatios(-1, nil)
	mustContain(t, err, "is -1", "positive")
}

func TestEffectiveHyper(t *testing.T) {
	base := map[string]float64{"eta": 0.01, "lambda": 0.5, "rho": 0.9}
	got, err := optimizers.EffectiveHyper(base, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got["eta"]-0.001) > 1e-18 || math.Abs(got["lambda"]-0.0005) > 1e-18 || got["rho"] != 0.9 {
		t.Errorf("effective %v, want eta 0.001 lambda 0.0005 rho 0.9", got)
	}
	if base["eta"] != 0.01 {
		t.Error("EffectiveHyper modified its input")
	}
	_, err = optimizers.EffectiveHyper(map[string]float64{"lambda": 1}, 1)
	mustContain(t, err, `"lambda" given without "eta"`)
}

func TestHyperTensors(t *testing.T) {
	ts, err := optimizers.HyperTensors(map[string]float64{"eta": 0.5, "lambda": 0.25}, []string{"lambda", "eta"}, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].DType() != dtypes.Float32 || !ts[0].Shape().IsScalar() || tensors.ToScalar[float32](ts[0]) != 0.25 || tensors.ToScalar[float32](ts[1]) != 0.5 {
		t.Errorf("tensors %v", ts)
	}
	_, err = optimizers.HyperTensors(map[string]float64{"eta": 1}, []string{"eta", "rho"}, dtypes.Float32)
	mustContain(t, err, `no value for hyperparameter "rho"`, "have [eta]")
	_, err = optimizers.HyperTensors(nil, nil, dtypes.Int32)
	mustContain(t, err, "dtype Int32")
}
