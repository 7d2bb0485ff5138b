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
// recompiles, and the parameters are uploaded once: Deep's one group is one flat buffer.
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
		if c.Stats().Entries != entries || b.Uploads().Params != uploads+1 {
			t.Errorf("SetParameters: %d programs compiled (want 0), %d parameter uploads (want 1, the default group's flat buffer)", c.Stats().Entries-entries, b.Uploads().Params-uploads)
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

// Setting one array of a group changes that array alone: the group's flat buffer is patched, its
// other arrays keep their values bit for bit.
func TestSetParametersSomeKeepsTheRest(t *testing.T) {
	n := coretest.MustNew(t, &Deep{}, coretest.Data(t, 32))
	before, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	const name = "head/dense/weights"
	w := before[name].Shape()
	set := tensors.FromShape(w)
	tensors.MutableFlatData(set, func(f []float32) {
		for i := range f {
			f[i] = float32(i) + 0.5
		}
	})
	if err := n.SetParameters(map[string]any{name: set}); err != nil {
		t.Fatal(err)
	}
	after, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || len(before) < 2 {
		t.Fatalf("%d parameters after, %d before: the test needs a group of several arrays", len(after), len(before))
	}
	for k, v := range before {
		switch {
		case k == name && !after[k].Equal(set):
			t.Errorf("%s reads back %v, was set to %v", k, after[k], set)
		case k != name && !after[k].Equal(v):
			t.Errorf("%s changed from %v to %v: only %s was set", k, v, after[k], name)
		}
	}
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
