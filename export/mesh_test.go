package export_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/export"
)

// TestExportFromMesh: a Nitro trained on 4 CPU devices exports as one trained on one: the bundle
// holds one copy of each parameter (the replicas' common value, bitwise) and its programs are
// single-device ones.
func TestExportFromMesh(t *testing.T) {
	t.Setenv("NITRO_CPU_DEVICES", "4")
	n := coretest.New(t, &coretest.Reg{}, coretest.GoOpts(nil, core.WithBackend("xla"), core.WithDevices(4), core.WithData(coretest.Data(t, 0)), core.WithMaxEpochs(2))...)
	coretest.Train(t, n)
	b, err := export.Export(n, filepath.Join(t.TempDir(), "bundle"), export.ExportSpec{Name: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	params, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Weights) != len(params) {
		t.Fatalf("bundle has %d weights, the model %d parameters", len(b.Weights), len(params))
	}
	for name, p := range params {
		var want []byte
		if err := p.ConstBytes(func(d []byte) { want = bytes.Clone(d) }); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, w := range b.Weights {
			found = found || bytes.Equal(w.Data, want)
		}
		if !found {
			t.Errorf("parameter %s: no bundle weight holds its bytes", name)
		}
	}
}
