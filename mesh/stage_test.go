package mesh_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/mesh"
)

// TestRunOverTwoDevices: x [8,3] split by rows over 2 CPU devices, w [3,2] replicated, y = x·w
// gathered whole on each device. The batch is staged from another goroutine while a run is in
// flight (the prefetch pattern); w is placed on device 1 once and its copy reused; the output's
// copies are kept for the next run; a batch of 7 rows is refused naming both numbers.
func TestRunOverTwoDevices(t *testing.T) {
	t.Setenv(backend.EnvCPUDevices, "2")
	r, err := backend.Resolve(backend.XLA)
	prereq.XLAPlugin.Need(t, err)
	m, err := mesh.New(r.Backend, 2)
	if err != nil {
		t.Fatal(err)
	}
	g := graph.NewGraph(r.Backend, "mesh_test")
	if err := m.Prepare(g); err != nil {
		t.Fatal(err)
	}
	x := mesh.Parameter(g, "x", shapes.Make(dtypes.Float32, 8, 3), true)
	w := mesh.Parameter(g, "w", shapes.Make(dtypes.Float32, 3, 2), false)
	m.Compile(g, []*graph.Node{graph.Dot(x, w)})

	xs := make([]float32, 24)
	for i := range xs {
		xs[i] = float32(i)
	}
	wt := tensors.FromFlatDataAndDimensions([]float32{1, 0, 0, 1, 1, 1}, 3, 2)
	want := make([]float32, 16)
	for i := range 8 {
		want[2*i] = xs[3*i] + xs[3*i+2]
		want[2*i+1] = xs[3*i+1] + xs[3*i+2]
	}
	batches := []*tensors.Tensor{tensors.FromFlatDataAndDimensions(xs, 8, 3), tensors.FromFlatDataAndDimensions(xs, 8, 3)}
	if err := m.Stage(batches[0]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var stageErr error
	for i, b := range batches {
		if i == 0 {
			wg.Add(1)
			go func() { defer wg.Done(); stageErr = m.Stage(batches[1]) }() // staged while run 0 runs
		}
		outs, err := m.Run(g, []mesh.Input{{T: b, Batch: true}, {T: wt}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if stageErr != nil {
			t.Fatal(stageErr)
		}
		if got := outs[0].Value().([][]float32); len(got) != 8 || got[3][0] != want[6] || got[7][1] != want[15] {
			t.Fatalf("run %d: y = %v, want rows of %v", i, got, want)
		}
	}
	if m.ShardUploads[0] != 2 || m.ShardUploads[1] != 2 || m.ReplicaUploads[1] != 1 {
		t.Errorf("shards %v (want [2 2]), replicated arrays %v (want w once on device 1)", m.ShardUploads, m.ReplicaUploads)
	}
	if m.Copies() != 3 { // w, and each run's output
		t.Errorf("copies kept for %d values, want 3 (w and the two outputs)", m.Copies())
	}
	_, err = m.Run(g, []mesh.Input{{T: tensors.FromShape(shapes.Make(dtypes.Float32, 7, 3)), Batch: true}, {T: wt}})
	if err == nil || !contains(err.Error(), "[7 3]") || !contains(err.Error(), "2 devices") {
		t.Errorf("a batch of 7 rows over 2 devices: err = %v", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
