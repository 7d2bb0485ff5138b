package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

func asAny(m map[string]*tensors.Tensor) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Parameters copied from a trained Nitro into a fresh one: the next program run reads them (its
// validation equals the trained one's, bit for bit, where before it did not), nothing
// recompiles, and each array is uploaded once.
func TestSetParametersNextRunUsesThem(t *testing.T) {
	onBackends(t, func(t *testing.T, on []core.Option) {
		a := coretest.New(t, &Deep{}, append(coretest.GoOpts(nil, core.WithData(coretest.Data(t, 32)), core.WithMaxEpochs(2)), on...)...)
		coretest.Train(t, a)
		want, err := a.Validate()
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Parameters()
		if err != nil {
			t.Fatal(err)
		}
		c := newCache()
		b := coretest.New(t, &Deep{}, append(coretest.GoOpts(c, core.WithData(coretest.Data(t, 32))), on...)...)
		fresh, err := b.Validate()
		if err != nil {
			t.Fatal(err)
		}
		if fresh[core.ValLoss] == want[core.ValLoss] {
			t.Fatalf("a fresh model validates as the trained one (%v): the test shows nothing", fresh)
		}
		entries, uploads := c.Stats().Entries, b.Uploads().Params
		if err := b.SetParameters(asAny(p)); err != nil {
			t.Fatal(err)
		}
		got, err := b.Validate()
		if err != nil {
			t.Fatal(err)
		}
		if got[core.ValLoss] != want[core.ValLoss] {
			t.Errorf("after SetParameters val_loss %v, the trained model's %v", got[core.ValLoss], want[core.ValLoss])
		}
		if c.Stats().Entries != entries || b.Uploads().Params != uploads+len(p) {
			t.Errorf("SetParameters: %d programs compiled (want 0), %d parameter uploads (want %d)", c.Stats().Entries-entries, b.Uploads().Params-uploads, len(p))
		}
		back, err := b.Parameters()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range p {
			if !back[k].Equal(v) {
				t.Errorf("parameter %s reads back %v, was set to %v", k, back[k], v)
			}
		}
		// The caller's tensors are copied, not consumed by the upload.
		if !p["head/dense/weights"].IsLocal() {
			t.Error("SetParameters dropped the host copy of the caller's tensor")
		}
	})
}

// A typed Go array sets a parameter; with the regression's true weights the loss is ~0, and one
// step of training from there moves nothing measurable (the gradient is ~0).
func TestSetParametersFromGoArrays(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32))
	w := make([][]float32, coretest.Features)
	for i := range w {
		w[i] = []float32{coretest.TrueW[i]}
	}
	if err := n.SetParameters(map[string]any{"dense_0/dense/weights": w, "dense_0/dense/biases": []float32{0.5}}); err != nil {
		t.Fatal(err)
	}
	m, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if m[core.ValLoss] > 1e-10 {
		t.Errorf("val_loss %v with the true weights set, want ~0", m[core.ValLoss])
	}
}

// Refusals name the parameter and both shapes (or the valid names), and change nothing, even
// for the entries that were fine.
func TestSetParametersRefusals(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0))
	before, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	err = n.SetParameters(map[string]any{"dense_0/dense/biases": []float32{9}, "dense_0/dense/weights": []float32{1, 2, 3, 4}})
	coretest.WantErr(t, err, "parameter dense_0/dense/weights is (Float32)[4 1], the value given is (Float32)[4]")
	coretest.WantErr(t, n.SetParameters(map[string]any{"dense_0/dense/biases": []float64{1}}), "dense_0/dense/biases is (Float32)[1], the value given is (Float64)[1]")
	coretest.WantErr(t, n.SetParameters(map[string]any{"dense_0/dense/weight": nil}), `no parameter "dense_0/dense/weight"`, "dense_0/dense/biases, dense_0/dense/weights")
	coretest.WantErr(t, n.SetParameters(map[string]any{"dense_0/dense/biases": nil}), "dense_0/dense/biases: the value is nil")
	coretest.WantErr(t, n.SetParameters(map[string]any{"dense_0/dense/biases": "x"}), "dense_0/dense/biases", "string")
	after, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range before {
		if !after[k].Equal(v) {
			t.Errorf("a refused SetParameters changed %s: %v -> %v", k, v, after[k])
		}
	}
}
