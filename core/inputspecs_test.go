package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// TestInputSpecsNoData: WithInputSpecs builds a Nitro without data (BuildData is not called):
// with the same seed it holds the weights a data-built Nitro initializes, and with WithCheckpoint
// a trained run's weights; its Predict equals the trained Nitro's. It has no splits (Train and
// Evaluate say so), and the specs are checked against Forward.
func TestInputSpecsNoData(t *testing.T) {
	dir := t.TempDir()
	trained := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(2))...)
	coretest.Train(t, trained)
	x, _ := coretest.Synthetic(8, 5)
	want := must(trained.Predict(prefetch.Batch{"x": x}))

	spec := prefetch.FieldSpec{Name: "x", DType: dtypes.Float32, Shape: []int{coretest.Features}}
	fresh := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0))
	bare := coretest.New(t, &coretest.Reg{}, coretest.GoOpts(nil, core.WithInputSpecs(spec))...)
	sameBits(t, "initial weights", flatParams(t, bare), flatParams(t, fresh))

	n := coretest.New(t, &coretest.Reg{}, coretest.GoOpts(nil, core.WithInputSpecs(spec), core.WithCheckpoint(dir))...)
	sameBits(t, "weights from the checkpoint", flatParams(t, n), flatParams(t, trained))
	got := must(n.Predict(prefetch.Batch{"x": x}))
	sameBits(t, "Predict", flatF32(got["pred"]), flatF32(want["pred"]))

	err := n.Train()
	coretest.WantErr(t, err, "train: this Nitro was built with core.WithInputSpecs, from no data, so it has no splits")
	if !errors.Is(err, core.ErrNoSplit) {
		t.Errorf("Train's error does not match ErrNoSplit: %v", err)
	}
	_, err = n.Evaluate("val")
	coretest.WantErr(t, err, "evaluate: this Nitro was built with core.WithInputSpecs")
	if !errors.Is(err, core.ErrNoSplit) {
		t.Errorf("Evaluate's error does not match ErrNoSplit: %v", err)
	}

	opts := func(more ...core.Option) []core.Option { return coretest.GoOpts(nil, more...) }
	for _, c := range []struct {
		name string
		opts []core.Option
		want []string
	}{
		{"no specs", opts(core.WithInputSpecs()), []string{"WithInputSpecs: no specs given"}},
		{"required field missing", opts(core.WithInputSpecs(prefetch.FieldSpec{Name: "y", DType: dtypes.Float32, Shape: []int{1}})),
			[]string{`WithInputSpecs declares [y], but Forward requires batch field "x"`}},
		{"name twice", opts(core.WithInputSpecs(spec, spec)), []string{`WithInputSpecs[1] "x": declared twice`}},
		{"bad dtype", opts(core.WithInputSpecs(prefetch.FieldSpec{Name: "x", Shape: []int{coretest.Features}})), []string{`WithInputSpecs[0] "x": dtype InvalidDType`}},
		{"dimension 0", opts(core.WithInputSpecs(prefetch.FieldSpec{Name: "x", DType: dtypes.Float32, Shape: []int{0}})), []string{`WithInputSpecs[0] "x": Shape [0]`}},
		{"with data", opts(core.WithInputSpecs(spec), core.WithData(coretest.Data(t, 0))), []string{"WithInputSpecs and WithData both given"}},
		{"with resume", opts(core.WithInputSpecs(spec), core.WithResume(dir)), []string{"WithInputSpecs and WithResume", "WithCheckpoint"}},
		{"wrong row shape for the checkpoint", opts(core.WithInputSpecs(prefetch.FieldSpec{Name: "x", DType: dtypes.Float32, Shape: []int{3}}), core.WithCheckpoint(dir)),
			[]string{"does not fit this model"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := core.New(&coretest.Reg{}, c.opts...)
			coretest.WantErr(t, err, c.want...)
		})
	}

	// Derive has no data to derive from: it is not called, and New says so.
	var warned []string
	d := coretest.New(t, &Derived{}, coretest.GoOpts(nil, core.WithInputSpecs(spec), core.WithWarn(func(m string) { warned = append(warned, m) }))...)
	if len(warned) != 1 || !strings.Contains(warned[0], "experiment Derived has a Derive hook, which is not called under WithInputSpecs") {
		t.Errorf("warnings %q", warned)
	}
	if e := d.Experiment().(*Derived); e.YMean != 0 {
		t.Errorf("Derive ran: YMean %v", e.YMean)
	}
}

func flatF32(t *tensors.Tensor) []float64 {
	var out []float64
	for _, v := range tensors.MustCopyFlatData[float32](t) {
		out = append(out, float64(v))
	}
	return out
}
