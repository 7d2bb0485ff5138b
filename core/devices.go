package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/mesh"
)

// WithDevices sets n_devs, how many local devices a step runs on, data-parallel: the batch size
// stays GLOBAL (each device takes batch/n rows; it must divide), parameters and optimizer state
// are replicated on every device, and XLA's partitioner sums the gradients across them. It wins
// over an experiment's Devices method or field. The default is 1 on the CPU plugin (its devices
// share the same cores) and on pure Go, and every visible device on an accelerator;
// $NITRO_CPU_DEVICES sets how many CPU devices there are.
func WithDevices(n int) Option { return func(o *options) { o.devices = &n } }

// devices is the resolved n_devs, what the backend shows, and the mesh when n_devs > 1.
type devices struct {
	n       resolved[int]
	visible int
	mesh    *mesh.Mesh
}

// resolveDevices is setup's devices phase (after the splits, whose widths must divide): n_devs by
// the knob rule, checked against the visible devices, and the mesh when it is more than one.
func (n *Nitro) resolveDevices() (err error) {
	n.devs.visible = n.backend.Backend.NumDevices()
	def, why := 1, "default: CPU devices share the cores"
	if !onCPU(n.backend) {
		def, why = n.devs.visible, "default: every visible accelerator device"
	}
	if n.devs.n, err = resolveKnob(n.e, "Devices", n.opts.devices, def); err != nil {
		return err
	}
	if n.devs.n.source == "default" {
		n.devs.n.source = why
	}
	k, src := n.devs.n.value, n.devs.n.source
	switch {
	case k < 1:
		return fmt.Errorf("Devices = %d from %s: must be >= 1", k, src)
	case k > n.devs.visible && !onCPU(n.backend):
		return fmt.Errorf("Devices = %d from %s, but the backend shows %d devices: visibility is fixed when the process starts its client, by $CUDA_VISIBLE_DEVICES on a CUDA host; widen it or ask for fewer", k, src, n.devs.visible)
	case k > n.devs.visible && n.backend.Name == backend.XLA:
		return fmt.Errorf("Devices = %d from %s, but the backend shows %d devices: set $%s=%d to have the CPU plugin present that many, or ask for fewer", k, src, n.devs.visible, backend.EnvCPUDevices, k)
	case k > n.devs.visible:
		return fmt.Errorf("Devices = %d from %s, but the %s backend has %d device: use the XLA backend (with $%s) for a mesh, or set Devices to 1", k, src, n.backend.Name, n.devs.visible, backend.EnvCPUDevices)
	case k == 1:
		return nil
	}
	for _, split := range sortedKeys(n.splitWidth) {
		if w := n.splitWidth[split]; w%k != 0 {
			return fmt.Errorf("split %q has a batch size of %d, not divisible by Devices = %d (%s): the batch size is global and each device takes an equal share; choose a batch size that is a multiple of %d", split, w, k, src, k)
		}
	}
	n.devs.mesh, err = mesh.New(n.backend.Backend, k)
	return err
}

// onCPU says whether r runs on the CPU: pure Go, or a PJRT plugin whose description names the
// CPU (an accelerator plugin's, e.g. CUDA's, does not).
func onCPU(r *backend.Resolved) bool {
	return r.Name != backend.XLA || strings.Contains(strings.ToLower(r.Backend.Description()), "cpu")
}

// deviceReport is the config report's devices row: chosen, visible, and why.
func (n *Nitro) deviceReport() string {
	s := fmt.Sprintf("%d of %d visible (%s)", n.devs.n.value, n.devs.visible, n.devs.n.source)
	if n.devs.n.value > 1 {
		s += ", data-parallel: batch sharded, parameters replicated"
	}
	return s
}

// deviceCount is the program's device count, in its cache key.
func (n *Nitro) deviceCount() int {
	if n.devs.mesh == nil {
		return 1
	}
	return n.devs.mesh.N()
}

// newProgramGraph starts a program's graph, over the mesh when there is one.
func (n *Nitro) newProgramGraph(kind string) *graph.Graph {
	g := graph.NewGraph(n.backend.Backend, "nitro_"+kind)
	if m := n.devs.mesh; m != nil {
		if err := m.Prepare(g); err != nil {
			panic(err)
		}
	}
	return g
}

// compileOutputs compiles g, with every output replicated over the mesh when there is one.
func (n *Nitro) compileOutputs(g *graph.Graph, outs []*graph.Node) {
	if m := n.devs.mesh; m != nil {
		m.Compile(g, outs)
		return
	}
	g.Compile(outs...)
}

// executeMesh is execute over the mesh: batch inputs split by rows, the rest replicated. The
// device-0 copy of each input is counted as execute counts it; the mesh counts the others.
func (n *Nitro) executeMesh(p *program, args []arg) ([]*tensors.Tensor, error) {
	in := make([]mesh.Input, len(args))
	for i, a := range args {
		batch := strings.HasPrefix(p.inputs[i].Name, "batch/")
		if !batch && !a.t.IsOnDevice(0) && a.counter != nil { // the mesh counts a batch's shards
			*a.counter++
		}
		in[i] = mesh.Input{T: a.t, Donate: a.donate, Batch: batch, Temp: a.temp}
	}
	outs, err := n.devs.mesh.Run(p.g, in)
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
func (n *Nitro) MeshUploads() MeshUploads {
	m := n.devs.mesh
	if m == nil {
		return MeshUploads{}
	}
	return MeshUploads{Arrays: slices.Clone(m.ReplicaUploads), Scalars: slices.Clone(m.ScalarUploads), Shards: slices.Clone(m.ShardUploads)}
}

// MeshUploads counts transfers per device (index = device number).
type MeshUploads struct{ Arrays, Scalars, Shards []int }

// meshWidth is w rounded up to a multiple of the device count: Predict and PredictAll pad a batch
// to it, so that every device takes an equal share (the padding rows are sliced away).
func (n *Nitro) meshWidth(w int) int {
	k := n.deviceCount()
	return (w + k - 1) / k * k
}
