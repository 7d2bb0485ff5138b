package engine

import (
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/mesh"
)

// DeviceCount is the programs' device count, in their cache keys.
func (e *Engine) DeviceCount() int {
	if e.mesh == nil {
		return 1
	}
	return e.mesh.N()
}

// newProgramGraph starts a program's graph, over the mesh when there is one.
func (e *Engine) newProgramGraph(kind string) *graph.Graph {
	g := graph.NewGraph(e.backend.Backend, "nitro_"+kind)
	if m := e.mesh; m != nil {
		if err := m.Prepare(g); err != nil {
			panic(err)
		}
	}
	return g
}

// compileOutputs compiles g, with every output replicated over the mesh when there is one.
func (e *Engine) compileOutputs(g *graph.Graph, outs []*graph.Node) {
	if m := e.mesh; m != nil {
		m.Compile(g, outs)
		return
	}
	g.Compile(outs...)
}

// executeMesh is execute over the mesh: batch inputs split by rows, the rest replicated. The
// device-0 copy of each input is counted as execute counts it; the mesh counts the others.
func (e *Engine) executeMesh(p *program, args []arg) ([]*tensors.Tensor, error) {
	in := make([]mesh.Input, len(args))
	for i, a := range args {
		batch := strings.HasPrefix(p.inputs[i].Name, "batch/")
		if !batch && !a.t.IsOnDevice(0) && a.counter != nil { // the mesh counts a batch's shards
			*a.counter++
		}
		in[i] = mesh.Input{T: a.t, Donate: a.donate, Batch: batch, Temp: a.temp}
	}
	outs, err := e.mesh.Run(p.g, in)
	for _, a := range args {
		if a.temp {
			_ = a.t.FinalizeAll()
		}
	}
	return outs, err
}

// MeshUploads is what the mesh has placed on each device: replicated arrays (parameters, layer
// and optimizer state, Device fields), replicated scalars (the step count, hyperparameters) and
// batch shards. Device 0's replicated values are counted by Uploads, as on one device. Without a
// mesh it is the zero value.
func (e *Engine) MeshUploads() MeshUploads {
	m := e.mesh
	if m == nil {
		return MeshUploads{}
	}
	return MeshUploads{Arrays: slices.Clone(m.ReplicaUploads), Scalars: slices.Clone(m.ScalarUploads), Shards: slices.Clone(m.ShardUploads)}
}

// MeshUploads counts transfers per device (index = device number).
type MeshUploads struct{ Arrays, Scalars, Shards []int }

// MeshWidth is w rounded up to a multiple of the device count: a prediction pads a batch to it,
// so that every device takes an equal share (the padding rows are sliced away).
func (e *Engine) MeshWidth(w int) int {
	k := e.DeviceCount()
	return (w + k - 1) / k * k
}
