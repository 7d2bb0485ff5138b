package core

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/prefetch"
)

// SetParameters touches the parameters alone: every optimizer state leaf and the layer state
// read back byte for byte as before (after training, so the moments are not zeros).
func TestSetParametersLeavesTheOptimizerState(t *testing.T) {
	n, err := New(&evalShare{}, WithBackend("go"), Quiet(), WithoutLogger(), WithoutCheckpoints(),
		WithData(prefetch.Data{"train": evalShareBatches(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true})}), WithMaxEpochs(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	before, err := n.eng.StateTensors(engine.WholePart)
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	zeros := map[string]any{}
	for k, v := range p {
		zeros[k] = tensors.FromShape(v.Shape())
	}
	if err := n.SetParameters(zeros); err != nil {
		t.Fatal(err)
	}
	after, err := n.eng.StateTensors(engine.WholePart)
	if err != nil {
		t.Fatal(err)
	}
	opt := 0
	for i, b := range before {
		a := after[i]
		isParam := strings.HasPrefix(b.Name, "param/")
		if same := bytes.Equal(a.Data, b.Data); same == isParam {
			t.Errorf("%s: same bytes %v after SetParameters; want changed only for parameters", b.Name, same)
		}
		if strings.HasPrefix(b.Name, "opt/") {
			opt++
		}
	}
	if opt == 0 {
		t.Fatal("no optimizer state: the test shows nothing")
	}
}
