package core

import (
	"fmt"
	"strings"

	"github.com/nitro-go/nitro/backend"
)

// WithDevices sets n_devs, how many local devices a step runs on, data-parallel: the batch size
// stays GLOBAL (each device takes batch/n rows; it must divide), parameters and optimizer state
// are replicated on every device, and XLA's partitioner sums the gradients across them. It wins
// over an experiment's Devices method or field. The default is 1 on the CPU plugin (its devices
// share the same cores) and on pure Go, and every visible device on an accelerator;
// $NITRO_CPU_DEVICES sets how many CPU devices there are.
func WithDevices(n int) Option { return func(o *options) { o.devices = &n } }

// devices is the resolved n_devs and what the backend shows; the engine runs the mesh when
// n_devs > 1.
type devices struct {
	n       resolved[int]
	visible int
}

// resolveDevices is setup's devices phase (after the splits, whose widths must divide): n_devs by
// the knob rule, checked against the visible devices.
func (bld *builder) resolveDevices() (err error) {
	n := bld.n
	n.spec.devs.visible = n.spec.backend.Backend.NumDevices()
	def, why := 1, "default: CPU devices share the cores"
	if !onCPU(n.spec.backend) {
		def, why = n.spec.devs.visible, "default: every visible accelerator device"
	}
	if n.spec.devs.n, err = resolveKnob(n.spec.e, "Devices", n.spec.opts.devices, def); err != nil {
		return err
	}
	if n.spec.devs.n.source == "default" {
		n.spec.devs.n.source = why
	}
	k, src := n.spec.devs.n.value, n.spec.devs.n.source
	switch {
	case k < 1:
		return fmt.Errorf("Devices = %d from %s: must be >= 1", k, src)
	case k > n.spec.devs.visible && !onCPU(n.spec.backend):
		return fmt.Errorf("Devices = %d from %s, but the backend shows %d devices: visibility is fixed when the process starts its client, by $CUDA_VISIBLE_DEVICES on a CUDA host; widen it or ask for fewer", k, src, n.spec.devs.visible)
	case k > n.spec.devs.visible && n.spec.backend.Name == backend.XLA:
		return fmt.Errorf("Devices = %d from %s, but the backend shows %d devices: set $%s=%d to have the CPU plugin present that many, or ask for fewer", k, src, n.spec.devs.visible, backend.EnvCPUDevices, k)
	case k > n.spec.devs.visible:
		return fmt.Errorf("Devices = %d from %s, but the %s backend has %d device: use the XLA backend (with $%s) for a mesh, or set Devices to 1", k, src, n.spec.backend.Name, n.spec.devs.visible, backend.EnvCPUDevices)
	case k == 1:
		return nil
	}
	for _, split := range sortedKeys(n.spec.splitWidth) {
		w := n.spec.splitWidth[split]
		if n.spec.sharded && split != "train" && w%k != 0 { // shardForCollective's dist.ShardEval
			world := n.Dist().WorldSize
			return fmt.Errorf("split %q: each of the %d processes evaluates up to %d rows of every batch (its share, by samples), not divisible by Devices = %d (%s): choose an evaluation batch size that is a multiple of %d (processes times devices)", split, world, w, k, src, world*k)
		}
		if w%k != 0 {
			return fmt.Errorf("split %q has a batch size of %d, not divisible by Devices = %d (%s): the batch size is global and each device takes an equal share; choose a batch size that is a multiple of %d", split, w, k, src, k)
		}
	}
	return nil
}

// onCPU says whether r runs on the CPU: pure Go, or a PJRT plugin whose description names the
// CPU (an accelerator plugin's, e.g. CUDA's, does not).
func onCPU(r *backend.Resolved) bool {
	return r.Name != backend.XLA || strings.Contains(strings.ToLower(r.Backend.Description()), "cpu")
}

// deviceReport is the config report's devices row: chosen, visible, and why.
func (n *Nitro) deviceReport() string {
	s := fmt.Sprintf("%d of %d visible (%s)", n.spec.devs.n.value, n.spec.devs.visible, n.spec.devs.n.source)
	if n.spec.devs.n.value > 1 {
		s += ", data-parallel: batch sharded, parameters replicated"
	}
	return s
}
