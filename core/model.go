package core

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
)

// ModelView is a read-only view of a Nitro's model, for code outside core that ships it (the
// export module): the named weights, the Device values, Forward's batch contract, and a tracer of
// Forward as an exported program sees it. It changes nothing on the Nitro, and is valid only
// inside the ViewModel call that made it.
type ModelView struct {
	n      *Nitro
	zeroed any // the experiment with its Host fields zeroed: what every trace reads
}

// ExportProvenancer is the optional model-layer provenance hook: what a consumer of this model
// needs to know that no tensor shape says (class names, the labeling variant, a crop geometry).
// An export merges it over the framework's and the site's keys; its caller's explicit provenance
// still wins over it. It runs on the real experiment, on the host.
type ExportProvenancer interface {
	ExportProvenance() map[string]string
}

// ViewModel runs f on a view of the model as one entry point named verb ("Export"): a
// GraphConst field assigned since New refuses it first, as it refuses every verb, and a panic in f
// is returned as an error naming verb.
func (n *Nitro) ViewModel(verb string, f func(m *ModelView) error) (err error) {
	if n == nil {
		return fmt.Errorf("%s: nil *Nitro", verb)
	}
	if err := n.writerOnly(verb); err != nil { // dist.go: only rank 0 exports
		return err
	}
	defer n.enter(strings.ToLower(verb), &err, nil)()
	if err := n.checkDrift(verb); err != nil {
		return err
	}
	zeroed, err := markers.ZeroHost(n.spec.e)
	if err != nil {
		return err
	}
	return f(&ModelView{n: n, zeroed: zeroed})
}

// TypeName is the experiment's type name, as errors name it.
func (m *ModelView) TypeName() string { return m.n.spec.typeName }

// Experiment is the experiment itself (not the Host-zeroed view), for host-side hooks.
func (m *ModelView) Experiment() any { return m.n.spec.e }

// Backend is the backend the Nitro runs on, its name, and its PJRT plugin ("" on pure Go).
func (m *ModelView) Backend() (be backends.Backend, name, plugin string) {
	return m.n.spec.backend.Backend, m.n.spec.backend.Name, m.n.spec.backend.Plugin
}

// ForwardField is one batch field Forward declares.
type ForwardField struct {
	Name     string
	Optional bool
}

// ForwardFields are the batch fields Forward declares, in order; whole reports a Forward that
// takes the whole batch (map[string]*graph.Node), which declares none.
func (m *ModelView) ForwardFields() (fields []ForwardField, whole bool) {
	for _, f := range m.n.spec.forward.fields {
		fields = append(fields, ForwardField{Name: f.name, Optional: f.optional})
	}
	return fields, m.n.spec.forward.whole
}

// FieldSpec is a batch field's dtype and per-row shape in the data contract: the data's, or
// WithInputSpecs'. ok is false for a field the contract does not have.
func (m *ModelView) FieldSpec(name string) (s prefetch.FieldSpec, ok bool) {
	fs, ok := m.n.spec.fieldShapes[name]
	if !ok {
		return prefetch.FieldSpec{}, false
	}
	return prefetch.FieldSpec{Name: name, DType: dtypes.MapOfNames[fs.dtype], Shape: slices.Clone(fs.row)}, true
}

// FromInputSpecs reports whether the data contract is WithInputSpecs' (the Nitro has no data).
func (m *ModelView) FromInputSpecs() bool { return m.n.spec.specOnly() }

// WithCompiling publishes monitors.ExportCompiling, runs fn, and restores the previous phase
// (also when fn fails).
func (m *ModelView) WithCompiling(fn func() error) error {
	return m.n.tracker.WithCompiling(monitors.ExportCompiling{}, fn)
}

// Weight is one parameter or layer-state variable, read back to the host.
type Weight struct {
	Name  string            // the checkpoint's name: "param/<keypath>" or "state<scope>/<name>"
	Var   *context.Variable // what a trace reads it through: Var.InUseByGraph(g) says whether it does
	DType dtypes.DType
	Shape []int
	Data  []byte // the host's native byte order
}

// Weights reads every parameter, then every layer-state variable, back to the host, in the
// order a checkpoint records them and under its names (the same conversion as the record's).
func (m *ModelView) Weights() ([]Weight, error) {
	ts, err := m.n.eng.StateTensors(engine.ModelPart)
	if err != nil {
		return nil, err
	}
	out := make([]Weight, len(ts))
	for i, t := range ts {
		out[i] = Weight{Name: t.Name, Var: t.Var, DType: t.DType, Shape: t.Shape, Data: t.Data}
	}
	return out, nil
}

// DeviceValue is a Device field's current value, as a fresh host tensor the caller owns.
type DeviceValue struct {
	Name  string
	Value *tensors.Tensor
}

// Device reads every Device field's value back to the host, in declaration order.
func (m *ModelView) Device() ([]DeviceValue, error) {
	var out []DeviceValue
	for _, name := range m.n.eng.DeviceNames() {
		t := m.n.eng.DeviceTensor(name)
		data, err := engine.ReadBack(t)
		if err == nil {
			h := tensors.FromShape(t.Shape())
			if len(data) > 0 {
				err = h.MutableBytes(func(b []byte) { copy(b, data) })
			}
			out = append(out, DeviceValue{Name: name, Value: h})
		}
		if err != nil {
			return nil, fmt.Errorf("Device field %s: %w", name, err)
		}
	}
	return out, nil
}

// Forward traces Forward in eval mode on g from the Host-zeroed experiment, with each Device
// field bound to device[name] (every Device field must be given) and the batch routed to the
// fields Forward declares. Every output must have the batch, width, on axis 0. A graph-building
// panic is returned as the error, unwrapped.
func (m *ModelView) Forward(g *graph.Graph, device, batch map[string]*graph.Node, width int) (Outputs, error) {
	return m.forward(g, m.zeroed, device, batch, width)
}

func (m *ModelView) forward(g *graph.Graph, src any, device, batch map[string]*graph.Node, width int) (out Outputs, err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	bound, err := markers.BindDevice(src, device)
	if err != nil {
		return nil, err
	}
	return m.n.eng.Forward(g, bound, batch, width), nil
}

// CheckHostIndependent traces Forward at batch size b from the experiment as it is and from its
// Host-zeroed view, and refuses a difference with a *markers.HostReadError naming the Host
// fields: a program built from the zeroed view would ship a Host read (one that matters only at a
// batch size training never traced) as its zero value. Device fields are bound to constants of
// device (host tensors by name); batch makes the batch on a graph (a panic in it is the error).
func (m *ModelView) CheckHostIndependent(b int, device map[string]*tensors.Tensor, batch func(g *graph.Graph) map[string]*graph.Node) error {
	n := m.n
	return markers.CheckHostIndependent(n.spec.e, func(src any) (string, error) {
		var fp string
		err := engine.TryGraph(fmt.Sprintf("tracing Forward for export at batch size %d", b), func() {
			g := markers.NewTraceGraph(n.spec.backend.Backend, "nitro_export_check")
			defer g.Finalize()
			consts := map[string]*graph.Node{}
			for _, name := range n.eng.DeviceNames() {
				consts[name] = graph.ConstTensor(g, device[name])
			}
			_, err := m.forward(g, src, consts, batch(g), b)
			if err == nil {
				fp, err = markers.Fingerprint(g)
			}
			if err != nil {
				panic(err)
			}
		})
		return fp, err
	})
}

// Provenance is what nitro knows about how the weights came to exist: the framework and build,
// the backend, the experiment, seed, counters, GraphConst values, and the checkpoint restored.
func (m *ModelView) Provenance() map[string]string {
	n := m.n
	// Weights from WithCheckpoint carry that checkpoint's epoch and step; the run's own counters
	// count only what it trained since (nothing: the weights are the checkpoint's as they were).
	epoch, step := n.st.epoch, n.st.step
	if w := n.ck.weightsAt; w != nil && step == 0 {
		epoch, step = w[0], w[1]
	}
	prov := map[string]string{
		"framework":        "nitro",
		"nitro_build":      engine.BuildIdentity(),
		"go_version":       runtime.Version(),
		"backend":          n.spec.backend.Name,
		"experiment":       n.spec.typeName,
		"seed":             strconv.Itoa(n.spec.cfg.seed.value),
		"step":             strconv.Itoa(step),
		"epoch":            strconv.Itoa(epoch),
		"graph_const_hash": n.spec.gcHash,
	}
	if n.spec.opts.preset != "" {
		prov["preset"] = n.spec.opts.preset
	}
	// The checkpoint the weights came from is named as the file restored, with the sha256 of its
	// bytes, never as the argument: a run directory names whichever file is its newest today.
	if src := n.ck.source; src != nil {
		key := "checkpoint"
		if src.resumed {
			key = "resumed_from"
		}
		prov[key] = absOr(src.path)
		if src.sha256 != "" {
			prov[key+"_sha256"] = src.sha256
		}
		if a := absOr(src.arg); a != prov[key] && src.arg != ResumeAuto {
			prov[key+"_arg"] = a
		}
	}
	if n.ck.last != "" {
		prov["last_checkpoint"] = absOr(n.ck.last)
	}
	if w := n.ck.weightsAt; w != nil {
		prov["checkpoint_epoch"], prov["checkpoint_step"] = strconv.Itoa(w[0]), strconv.Itoa(w[1])
	}
	for _, kv := range n.spec.gcValues {
		prov["graphconst."+kv[0]] = kv[1]
	}
	return prov
}

func absOr(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}
