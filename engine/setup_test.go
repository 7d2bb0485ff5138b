package engine

import (
	"bytes"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/prefetch"
)

// After setup the parameters live once, in the groups' segments: the trainable variables' first
// values are freed (a variable keeps its shape), and handing setup's host copies back to the system
// changes no value: three steps give the same parameters and moments bit for bit with and without.
func TestSetupKeepsOneCopyOfTheParameters(t *testing.T) {
	src := rampBatches(t, 16, 13)
	forward := func(_ any, ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
		return map[string]*graph.Node{"y": layers.Dense(ctx.In("out"), in["x"], true, 1)}
	}
	trained := func(release int) []StateTensor {
		t.Helper()
		defer func(old int) { hostCopyRelease = old }(hostCopyRelease)
		hostCopyRelease = release
		e := newTestEngine(t, testRun{exp: &accumMLP{}, forward: forward, loss: accumLoss, data: src, backend: "go", cache: compilecache.New()})
		for _, g := range e.groups {
			for _, v := range g.vars {
				if v.HasValue() {
					t.Errorf("release %d: variable %s still holds its first value after setup", release, v.ScopeAndName())
				}
				if v.Shape().Size() == 0 {
					t.Errorf("release %d: variable %s lost its shape", release, v.ScopeAndName())
				}
			}
		}
		runSteps(t, e, src, 1, 3)
		st, err := e.StateTensors(WholePart)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	kept, released := trained(1<<62), trained(0)
	if len(kept) != len(released) {
		t.Fatalf("%d tensors, %d with the host copies released", len(kept), len(released))
	}
	for i := range kept {
		if kept[i].Name != released[i].Name || !bytes.Equal(kept[i].Data, released[i].Data) {
			t.Errorf("%s differs when setup's host copies are released", kept[i].Name)
		}
	}
}

// rampBatches is 4 batches of 8 rows: x of the given width, each value (i mod m)/m over the flat
// index i, and y zeros.
func rampBatches(t testing.TB, width, m int) *prefetch.ArrayBatches {
	t.Helper()
	const rows = 8
	xs := make([]float32, 4*rows*width)
	for i := range xs {
		xs[i] = float32(i%m) / float32(m)
	}
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(xs, 4*rows, width),
		"y": tensors.FromFlatDataAndDimensions(make([]float32, 4*rows), 4*rows, 1),
	}, rows, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	return src
}
