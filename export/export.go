package export

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/exportbundle"
)

// ExportSpec says what Export writes: the wire contract (inputs, outputs), the batch sizes, the
// client side of an optional postprocess, and the caller's half of the provenance.
//
// Export never reads a checkpoint: it exports the Nitro it is given, with the weights it holds
// (trained, restored with core.WithCheckpoint or core.WithResume, or as initialized).
type ExportSpec struct {
	// Name is the bundle's name, recorded in its manifest. Required.
	Name string
	// BatchSizes lists the batch sizes to compile, one program each (default {1}). Each is a
	// separate program, so each costs a compile and its share of the artifact.
	BatchSizes []int
	// Inputs are the batch fields the program takes, in argument order: the wire contract, so
	// reordering them changes what a client must send. Default: the fields Forward declares
	// (its required fields and those optional ones the data has). Each must be a field Forward
	// declares and one the Nitro's data contract has (its data, or WithInputSpecs: the dtype and
	// per-row shape come from there); every required Forward field must be listed. Every input
	// has the batch on axis 0. Empty when a Preprocess is given (see WireInputs).
	Inputs []string
	// WireInputs and Preprocess, given together, put a traced conversion between what a client
	// sends and the batch Forward reads (e.g. uint8 pixels to normalized float32), inside the
	// program. The program then takes the WireInputs, in this order (the wire contract; each
	// batch-first, with its dtype and per-row shape), and they are the bundle's inputs; Inputs
	// must be empty.
	WireInputs []core.InputSpec
	// Preprocess receives the wire inputs by name, at the batch size being compiled, and returns
	// the batch fields Forward reads. It obeys every rule a traced hook obeys: graph operations
	// only, no data-dependent control flow; a panic in it is an error. It is given no view of
	// the experiment (Device fields are Forward's, frozen in the export view): a value it needs
	// is a Go constant it closes over.
	//
	// It is also called eagerly: before anything is captured, Export runs it once on zero wire
	// inputs at the first batch size, on the Nitro's own backend, and checks that it returns every
	// field Forward requires (and none Forward does not declare), each batch-first, with the dtype
	// and per-row shape of the Nitro's data contract (its data or WithInputSpecs); an error names
	// the field. An echo output (ExportOutput.From naming an input) returns the wire tensor as sent.
	Preprocess func(wire map[string]*graph.Node) map[string]*graph.Node
	// Outputs are the tensors the program returns, in order. Default: every Forward output, by
	// name, sorted.
	Outputs []ExportOutput
	// Postprocess is client-side source the bundle carries as text (postprocess.txt); nitro never
	// runs it. "" for none.
	Postprocess string
	// ClientInputs and ClientOutputs declare what a client sends and receives around the
	// Postprocess, when that differs from the program's own tensors. Only with a Postprocess.
	// They are declarations nitro cannot check against anything, so their batch axis is free.
	ClientInputs, ClientOutputs []exportbundle.TensorSpec
	// Provenance is the explicit provenance: merged last, it wins over every other source.
	Provenance map[string]string
	// ProvenanceRoot is a directory inside the git repository the model's code lives in. When
	// set, the bundle records the repository state there (see exportbundle.SiteProvenance): the
	// commit, its tree hash, whether the working tree is dirty, and the working-tree patch as its
	// own file.
	// When empty, the bundle carries no repository keys at all (nitro never guesses which
	// repository produced a model).
	ProvenanceRoot string
	// Writer is the export backend the finished bundle goes to: nil is exportbundle.Files (the
	// on-disk bundle at dir); exportbundle.Memory keeps it in memory (tests).
	Writer exportbundle.Writer
}

// ExportOutput is one output of the exported program.
type ExportOutput struct {
	// Name is what the bundle calls the tensor.
	Name string
	// From names its source when that is not Name: a Forward output (a rename), or one of the
	// declared inputs, returned as sent (an echo, for a postprocess that needs a wire tensor). An
	// output whose Name is a declared input must say From: an echo is never inferred from a name.
	From string
	// DType and Shape, when set, are assertions the export checks against the traced output:
	// the export fails rather than writing a bundle whose contract drifted. Shape is batch-first:
	// -1 at axis 0, the batch.
	DType exportbundle.DType
	Shape []int
	// AxisLetters optionally names each non-batch axis, one ASCII letter each.
	AxisLetters string
}

// PatchFile is the bundle file that holds the working-tree patch of a dirty ProvenanceRoot.
const PatchFile = "working_tree.patch"

// Export writes n as an export bundle at dir (which must not exist, or be empty) and returns the
// bundle as written. The bundle holds one StableHLO program per batch size, exactly as XLA
// compiled it (exportbundle.Capture), taking the declared inputs and then the weights, and
// nothing else: the export view freezes every Device field to its current value (a constant in
// the program if the shipped outputs depend on it; if not, no constant of its value, only a dead
// zero of its shape that XLA drops), Host fields are stripped as in every
// trace, and the weights are the parameters and layer state Forward reads, read back from the
// device, named as a checkpoint names them ("param/dense_0/weights"), in argument order.
//
// In order: the spec is checked against the hooks (names, the batch-first rule, echoes declared
// with From, client specs only with a Postprocess) before anything is traced; a Preprocess is
// called eagerly once and what it returns checked against Forward's fields; the provenance is
// resolved (framework, then site, then the model hook, then the explicit argument, each winning
// over the one before); then, in the ExportCompiling phase, Forward is traced once to find what
// it reads, each batch size is compiled on a capturing backend, and the first one is run once on
// example inputs to confirm the output shapes; last the bundle is written, atomically, and the
// previous phase restored (also when the export fails).
//
// Export needs no data: it reads the weights and traces Forward. A Nitro built with
// core.WithInputSpecs (the fields' dtypes and shapes, no data) and core.WithCheckpoint (the trained
// weights) exports as the trained Nitro does.
//
// The programs are compiled through the XLA PJRT plugin the Nitro runs on (or, on the pure-Go
// backend, the one backend.FindPlugin finds); without a plugin Export is an error. Export never
// touches the compile cache. Like every entry point it returns errors, never panics.
func Export(n *core.Nitro, dir string, spec ExportSpec) (*exportbundle.Bundle, error) {
	if n == nil {
		return nil, errors.New("export.Export: nil *Nitro")
	}
	var b *exportbundle.Bundle
	err := n.ViewModel("Export", func(m *core.ModelView) (err error) {
		b, err = export(m, dir, spec)
		return err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// export is Export inside the Nitro's ViewModel: m stays valid throughout.
func export(m *core.ModelView, dir string, spec ExportSpec) (b *exportbundle.Bundle, err error) {
	plan, err := planExport(m, spec)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	writer := spec.Writer
	if writer == nil {
		writer = exportbundle.Files{}
		if err := checkExportDir(dir); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	if err := checkPreprocess(m, plan); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if plan.plugin, err = exportPlugin(m); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	prov, extra, err := exportProvenance(m, spec, plan)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if err := plan.preflight(spec, prov); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	// The phase covers the capture and the write, and the previous phase is restored when the
	// bundle is written or the export fails.
	err = m.WithCompiling(func() error {
		res, err := captureExport(m, plan)
		if err != nil {
			return err
		}
		b = &exportbundle.Bundle{
			Name:          spec.Name,
			Inputs:        plan.inputSpecs(),
			Outputs:       res.outputs,
			Weights:       res.weights,
			Programs:      res.programs,
			Postprocess:   spec.Postprocess,
			ClientInputs:  spec.ClientInputs,
			ClientOutputs: spec.ClientOutputs,
			Provenance:    prov,
		}
		if len(extra) > 0 {
			b.Extra = extra
		}
		return writer.WriteBundle(dir, b)
	})
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return b, nil
}

// exportPlan is a checked ExportSpec resolved against the hooks and the data contract.
type exportPlan struct {
	name    string
	batches []int // ascending
	inputs  []exportInput
	outputs []ExportOutput // as given, or nil for "every Forward output"
	plugin  string
	// pre is ExportSpec.Preprocess: inputs are then the wire inputs, and pre maps them to the
	// batch Forward reads. nil: the inputs are batch fields, passed to Forward as they are.
	pre func(wire map[string]*graph.Node) map[string]*graph.Node
}

type exportInput struct {
	name  string
	dtype dtypes.DType
	row   []int // per-row shape (the batch axis, 0, excluded)
}

func (p *exportPlan) inputSpecs() []exportbundle.TensorSpec {
	out := make([]exportbundle.TensorSpec, len(p.inputs))
	for i, in := range p.inputs {
		out[i] = exportbundle.TensorSpec{Name: in.name, DType: exportbundle.DTypeOf(in.dtype), Shape: append([]int{-1}, in.row...), BatchAxis: 0}
	}
	return out
}

func (p *exportPlan) isInput(name string) bool {
	return slices.ContainsFunc(p.inputs, func(in exportInput) bool { return in.name == name })
}

// planExport checks everything about the spec that needs no trace, naming the field at fault.
func planExport(m *core.ModelView, spec ExportSpec) (*exportPlan, error) {
	p := &exportPlan{name: spec.Name, outputs: spec.Outputs}
	if err := checkExportName("ExportSpec.Name", spec.Name); err != nil {
		return nil, fmt.Errorf("%w (the bundle's name, recorded in its manifest)", err)
	}

	// Batch sizes: positive, distinct; compiled in ascending order.
	sizes := spec.BatchSizes
	if len(sizes) == 0 {
		sizes = []int{1}
	}
	for i, b := range sizes {
		if b < 1 {
			return nil, fmt.Errorf("ExportSpec.BatchSizes[%d] is %d: a batch size is at least 1", i, b)
		}
		if j := slices.Index(sizes[:i], b); j >= 0 {
			return nil, fmt.Errorf("ExportSpec.BatchSizes[%d] is %d, as BatchSizes[%d] is: list each batch size once", i, b, j)
		}
	}
	p.batches = slices.Sorted(slices.Values(sizes))

	// Inputs: the wire inputs of a Preprocess (checked here by form; what Preprocess returns is
	// checked against Forward by running it, in checkPreprocess), else batch fields Forward
	// declares and the data contract has, every required one listed.
	switch {
	case spec.Preprocess != nil && spec.Inputs != nil:
		return nil, fmt.Errorf("ExportSpec.Inputs %v and a Preprocess both given: with a Preprocess the program takes the WireInputs, and Preprocess makes Forward's batch fields from them; drop Inputs", spec.Inputs)
	case spec.Preprocess != nil:
		if err := core.CheckInputSpecs("ExportSpec.WireInputs", spec.WireInputs); err != nil {
			return nil, fmt.Errorf("%w (with a Preprocess, WireInputs declare what a client sends: name, dtype, per-row shape)", err)
		}
		for _, w := range spec.WireInputs {
			p.inputs = append(p.inputs, exportInput{name: w.Name, dtype: w.DType, row: slices.Clone(w.Shape)})
		}
		p.pre = spec.Preprocess
	case spec.WireInputs != nil:
		return nil, errors.New("ExportSpec.WireInputs given without a Preprocess: wire inputs are what a Preprocess converts into Forward's batch fields; add the Preprocess, or list the batch fields the program takes in Inputs")
	default:
		if err := planBatchInputs(m, spec, p); err != nil {
			return nil, err
		}
	}

	// Outputs: names, echoes declared with From, assertions batch-first.
	for i, o := range spec.Outputs {
		what := fmt.Sprintf("ExportSpec.Outputs[%d]", i)
		if err := checkExportName(what+".Name", o.Name); err != nil {
			return nil, err
		}
		what = fmt.Sprintf("%s %q", what, o.Name)
		if j := slices.IndexFunc(spec.Outputs[:i], func(x ExportOutput) bool { return x.Name == o.Name }); j >= 0 {
			return nil, fmt.Errorf("%s: the name appears twice (also Outputs[%d])", what, j)
		}
		if o.From == "" && p.isInput(o.Name) {
			return nil, fmt.Errorf("%s: the name is a declared input, and an echo must be declared: set From: %q to return the input as sent, or name the output otherwise", what, o.Name)
		}
		if o.DType != "" && !o.DType.Valid() {
			return nil, fmt.Errorf("%s: DType %q is not a bundle dtype", what, o.DType)
		}
		if len(o.Shape) > 0 && o.Shape[0] != -1 {
			return nil, fmt.Errorf("%s: Shape %v: the batch leads (batch-first rule), so write -1 at axis 0", what, o.Shape)
		}
		for k, c := range []byte(o.AxisLetters) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') || strings.IndexByte(o.AxisLetters[:k], c) >= 0 {
				return nil, fmt.Errorf("%s: AxisLetters %q: one distinct ASCII letter per non-batch axis", what, o.AxisLetters)
			}
		}
	}

	// The client side only around a postprocess.
	if spec.Postprocess == "" {
		if len(spec.ClientInputs) > 0 {
			return nil, errors.New("ExportSpec.ClientInputs given without a Postprocess: client-side specs describe what a postprocess changes, and with none the program's own inputs are the client's; drop ClientInputs or add the Postprocess")
		}
		if len(spec.ClientOutputs) > 0 {
			return nil, errors.New("ExportSpec.ClientOutputs given without a Postprocess: client-side specs describe what a postprocess changes, and with none the program's own outputs are the client's; drop ClientOutputs or add the Postprocess")
		}
	}
	for k := range spec.Provenance {
		if err := checkExportName("ExportSpec.Provenance key", k); err != nil {
			return nil, err
		}
	}
	if meth, ok := reflect.TypeOf(m.Experiment()).MethodByName("ExportProvenance"); ok {
		if _, hook := m.Experiment().(core.ExportProvenancer); !hook {
			return nil, fmt.Errorf("experiment %s has an ExportProvenance method of type %s, which export would ignore: define func (e *%s) ExportProvenance() map[string]string", m.TypeName(), meth.Type, m.TypeName())
		}
	}
	return p, nil
}

// planBatchInputs resolves ExportSpec.Inputs (no Preprocess): batch fields Forward declares, each
// with the dtype and per-row shape of the data contract, every field Forward requires listed.
func planBatchInputs(m *core.ModelView, spec ExportSpec, p *exportPlan) error {
	fields, whole := m.ForwardFields()
	names := spec.Inputs
	if names == nil {
		if whole {
			return fmt.Errorf("ExportSpec.Inputs is empty and Forward takes the whole batch (map[string]*graph.Node), so export cannot tell its inputs from its targets: list the batch fields the program takes")
		}
		for _, f := range fields {
			if _, ok := m.FieldSpec(f.Name); ok || !f.Optional {
				names = append(names, f.Name)
			}
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("ExportSpec.Inputs: the program would take no input: list the batch fields Forward reads")
	}
	for i, name := range names {
		what := fmt.Sprintf("ExportSpec.Inputs[%d] %q", i, name)
		if err := checkExportName(fmt.Sprintf("ExportSpec.Inputs[%d]", i), name); err != nil {
			return err
		}
		if j := slices.Index(names[:i], name); j >= 0 {
			return fmt.Errorf("%s: listed twice (also Inputs[%d])", what, j)
		}
		if !whole && !slices.ContainsFunc(fields, func(f core.ForwardField) bool { return f.Name == name }) {
			return fmt.Errorf("%s: not a batch field Forward declares (it declares %v): the program takes only what Forward reads", what, fieldNames(fields))
		}
		fs, ok := m.FieldSpec(name)
		if !ok && m.FromInputSpecs() {
			return fmt.Errorf("%s: WithInputSpecs declares no such field, so its dtype and shape are unknown: add its spec", what)
		}
		if !ok {
			return fmt.Errorf("%s: no split of the data has this field, so its dtype and shape are unknown: export takes each input's dtype and per-row shape from the data contract", what)
		}
		p.inputs = append(p.inputs, exportInput{name: name, dtype: fs.DType, row: fs.Shape})
	}
	if !whole {
		for _, f := range fields {
			if !f.Optional && !slices.Contains(names, f.Name) {
				return fmt.Errorf("ExportSpec.Inputs %v: Forward requires batch field %q: add it (the program cannot run Forward without it)", names, f.Name)
			}
		}
	}
	return nil
}

// exportPlugin is the PJRT plugin the programs are compiled through: the Nitro's own, else (on
// the pure-Go backend) the one backend.FindPlugin finds.
func exportPlugin(m *core.ModelView) (string, error) {
	_, name, plugin := m.Backend()
	if plugin != "" {
		return plugin, nil
	}
	found, searched, err := backend.FindPlugin()
	if err != nil {
		return "", fmt.Errorf("export compiles StableHLO through the XLA PJRT plugin: %w", err)
	}
	if found == "" {
		return "", fmt.Errorf("export compiles StableHLO through the XLA PJRT plugin, and this Nitro runs on %s with no plugin found (searched %s): %s", name, strings.Join(searched, ", "), backend.SetupHint)
	}
	return found, nil
}

// checkExportName applies the bundle's name rules (non-empty UTF-8, at most 256 bytes, no
// control characters) before anything is traced.
func checkExportName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s is empty", what)
	case len(name) > 256:
		return fmt.Errorf("%s is %d bytes long (at most 256)", what, len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("%s %q is not UTF-8", what, name)
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%s %q holds a control character", what, name)
	}
	return nil
}

// checkExportDir refuses, before the long part, a dir exportbundle.Write would refuse.
func checkExportDir(dir string) error {
	if dir == "" {
		return errors.New("no directory given to write the bundle to")
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("bundle directory %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("bundle directory %s exists and is not empty: export into a new directory", dir)
	}
	return nil
}

// preflight validates what the manifest will say that is known before the trace (name, inputs,
// client specs, batch sizes, provenance keys) with exportbundle's own rules, so that a spec the
// bundle would refuse fails now rather than after minutes of compiling.
func (p *exportPlan) preflight(spec ExportSpec, prov map[string]string) error {
	zero := strings.Repeat("0", 64)
	m := exportbundle.Manifest{
		Format:        exportbundle.FormatName,
		FormatVersion: exportbundle.FormatVersion,
		Name:          spec.Name,
		Inputs:        p.inputSpecs(),
		Outputs:       []exportbundle.TensorSpec{{Name: "out", DType: exportbundle.F32, Shape: []int{-1}}},
		WeightsFile:   exportbundle.WeightsFile,
		BatchSizes:    p.batches,
		ClientInputs:  batchPlaceholder(spec.ClientInputs),
		ClientOutputs: batchPlaceholder(spec.ClientOutputs),
		Provenance:    prov,
		Files:         []exportbundle.FileEntry{{Name: exportbundle.WeightsFile, SHA256: zero}},
	}
	for _, b := range p.batches {
		file := "program-b" + strconv.Itoa(b) + ".mlir"
		m.Programs = append(m.Programs, exportbundle.ProgramEntry{BatchSize: b, Format: "mlir", File: file})
		m.Files = append(m.Files, exportbundle.FileEntry{Name: file, SHA256: zero})
	}
	if spec.Postprocess != "" {
		m.PostprocessFile = exportbundle.PostprocessFile
		m.Files = append(m.Files, exportbundle.FileEntry{Name: exportbundle.PostprocessFile, SHA256: zero})
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := exportbundle.ParseManifest(data); err != nil {
		var fe *exportbundle.FormatError
		if errors.As(err, &fe) {
			return fmt.Errorf("the bundle would be invalid: %s", fe.Msg)
		}
		return err
	}
	return nil
}

// batchPlaceholder writes -1 at each client spec's batch axis, the manifest's spelling.
func batchPlaceholder(specs []exportbundle.TensorSpec) []exportbundle.TensorSpec {
	out := slices.Clone(specs)
	for i := range out {
		out[i].Shape = slices.Clone(out[i].Shape)
		if a := out[i].BatchAxis; a >= 0 && a < len(out[i].Shape) {
			out[i].Shape[a] = -1
		}
	}
	return out
}

// exportResult is what the capture produced.
type exportResult struct {
	programs map[int]exportbundle.Program
	outputs  []exportbundle.TensorSpec
	weights  []exportbundle.Weight
}

// exportWeight is one weight candidate: a parameter or layer-state variable and its value, read
// back from the device.
type exportWeight struct {
	name string // the checkpoint's name: "param/<keypath>" or "state<scope>/<name>"
	v    *context.Variable
	t    exportbundle.Tensor
}

// captureExport reads the weights and Device values back to the host, then, on a capturing
// backend: traces Forward once to learn what it reads (variables, Device fields) and what it
// returns, compiles one program per batch size, and runs the first once on example inputs.
func captureExport(m *core.ModelView, p *exportPlan) (*exportResult, error) {
	ws, err := m.Weights()
	if err != nil {
		return nil, err
	}
	var cands []exportWeight
	for _, w := range ws {
		t, err := bundleTensor(w.Name, w.DType, w.Shape, w.Data)
		if err != nil {
			return nil, err
		}
		cands = append(cands, exportWeight{name: w.Name, v: w.Var, t: t})
	}
	devs, err := m.Device() // each Device field's current value, on the host
	if err != nil {
		return nil, err
	}
	frozen := map[string]*tensors.Tensor{}
	for _, d := range devs {
		if !exportbundle.DTypeOf(d.Value.DType()).Valid() {
			return nil, fmt.Errorf("Device field %s: dtype %s cannot be held in a bundle", d.Name, d.Value.DType())
		}
		frozen[d.Name] = d.Value
	}
	if err := checkHostIndependent(m, p, frozen); err != nil {
		return nil, err
	}

	fz := &frozenDevice{names: make([]string, len(devs)), values: frozen}
	for i, d := range devs {
		fz.names[i] = d.Name
	}
	res := &exportResult{programs: map[int]exportbundle.Program{}}
	progs, err := exportbundle.Capture(p.plugin, func(be backends.Backend) error {
		probe, err := probeExport(m, be, p, fz, cands)
		if err != nil {
			return err
		}
		var used []exportWeight
		for _, c := range cands {
			if probe.vars[c.v] {
				used = append(used, c)
				res.weights = append(res.weights, exportbundle.Weight{Name: c.name, Tensor: c.t})
			}
		}
		for i, b := range p.batches {
			outs, err := compileExport(m, be, p, probe, fz, used, b, i == 0)
			if err != nil {
				return err
			}
			if i == 0 {
				res.outputs = outs
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(progs) != len(p.batches) {
		return nil, fmt.Errorf("internal: the capture recorded %d programs for batch sizes %v", len(progs), p.batches)
	}
	for i, b := range p.batches {
		res.programs[b] = exportbundle.Program{Format: progs[i].Format, Code: progs[i].Code}
	}
	return res, nil
}

// checkHostIndependent traces the export's Forward at every batch size from the experiment as
// it is and from its Host-zeroed view, and refuses a difference naming the Host fields: the
// export program is built from the zeroed view, so a Host read there (for instance one that
// matters only at a batch size the training check never saw) would ship the zero value.
func checkHostIndependent(m *core.ModelView, p *exportPlan, frozen map[string]*tensors.Tensor) error {
	for _, b := range p.batches {
		err := m.CheckHostIndependent(b, frozen, func(g *graph.Graph) map[string]*graph.Node {
			return p.batch(p.inputParams(g, b))
		})
		if err != nil {
			return fmt.Errorf("export at batch size %d: %w", b, err)
		}
	}
	return nil
}

// frozenDevice is the Device fields' values on the host, in declaration order (the order their
// constants enter a program, which keeps the program text deterministic).
type frozenDevice struct {
	names  []string
	values map[string]*tensors.Tensor
}

// consts makes each Device field a node of g: read[name] false makes a zero of its shape (so no
// array of its value is emitted), else a constant of its value (read nil: every field).
func (fz *frozenDevice) consts(g *graph.Graph, read map[string]bool) map[string]*graph.Node {
	out := make(map[string]*graph.Node, len(fz.names))
	for _, name := range fz.names {
		if read == nil || read[name] {
			out[name] = graph.ConstTensor(g, fz.values[name])
		} else {
			out[name] = graph.Zeros(g, fz.values[name].Shape())
		}
	}
	return out
}

// exportProbe is what one trace of Forward at the first batch size says: the variables it reads
// (they become the weights), the Device fields the shipped outputs depend on (they become
// constants), and each shipped output's source.
type exportProbe struct {
	vars    map[*context.Variable]bool
	devRead map[string]bool
	sources []exportSource
}

type exportSource struct {
	spec   ExportOutput // From resolved (never empty)
	output string       // a Forward output, or "" for an echo
	input  int          // the echoed input's index, when output is ""
}

// probeExport traces Forward once, never compiled, to resolve the outputs and learn what the
// program reads.
func probeExport(m *core.ModelView, be backends.Backend, p *exportPlan, fz *frozenDevice, cands []exportWeight) (probe *exportProbe, err error) {
	b := p.batches[0]
	err = tryGraph("tracing Forward for export", func() {
		g := graph.NewGraph(be, "nitro_export_probe")
		defer g.Finalize()
		wire := p.inputParams(g, b)
		consts := fz.consts(g, nil)
		out, err := m.Forward(g, consts, p.batch(wire), b)
		if err != nil {
			panic(err)
		}
		srcs, err := resolveOutputs(p, out)
		if err != nil {
			panic(err)
		}
		probe = &exportProbe{vars: map[*context.Variable]bool{}, devRead: map[string]bool{}, sources: srcs}
		var roots []*graph.Node
		for _, s := range srcs {
			if s.output != "" {
				roots = append(roots, out[s.output])
			}
		}
		reached := reachable(roots)
		for name, c := range consts {
			probe.devRead[name] = reached[c]
		}
		for _, c := range cands {
			probe.vars[c.v] = c.v.InUseByGraph(g)
		}
	})
	return probe, err
}

// inputParams creates the program's input parameters at batch size b, in argument order: the
// batch fields, or with a Preprocess the wire inputs.
func (p *exportPlan) inputParams(g *graph.Graph, b int) map[string]*graph.Node {
	prefix := "batch/"
	if p.pre != nil {
		prefix = "wire/"
	}
	nodes := make(map[string]*graph.Node, len(p.inputs))
	for _, in := range p.inputs {
		nodes[in.name] = graph.Parameter(g, prefix+in.name, shapes.Make(in.dtype, append([]int{b}, in.row...)...))
	}
	return nodes
}

// batch is what the exported program passes to Forward: the input parameters as they are, or
// what the Preprocess makes of them (the view routes it to the fields Forward declares).
func (p *exportPlan) batch(wire map[string]*graph.Node) map[string]*graph.Node {
	if p.pre == nil {
		return wire
	}
	return callPreprocess(p.pre, wire)
}

// callPreprocess calls the Preprocess on a copy of wire, naming it in a panic that escapes it.
func callPreprocess(pre func(map[string]*graph.Node) map[string]*graph.Node, wire map[string]*graph.Node) map[string]*graph.Node {
	defer func() {
		if r := recover(); r != nil {
			panic(panicError("ExportSpec.Preprocess", r))
		}
	}()
	return pre(maps.Clone(wire))
}

// checkPreprocess calls the Preprocess eagerly, before anything is captured: once, on zero wire
// inputs at the first batch size, on the Nitro's own backend. It must return every batch field
// Forward requires and none Forward does not declare, each batch-first with the dtype and
// per-row shape of the data contract; an error names the field.
func checkPreprocess(m *core.ModelView, p *exportPlan) (err error) {
	if p.pre == nil {
		return nil
	}
	b := p.batches[0]
	what := fmt.Sprintf("ExportSpec.Preprocess (called eagerly on zero wire inputs at batch size %d)", b)
	var names []string
	var owned, results []*tensors.Tensor
	defer func() {
		for _, t := range owned {
			t.FinalizeAll()
		}
	}()
	err = tryGraph(what, func() {
		be, _, _ := m.Backend()
		g := graph.NewGraph(be, "nitro_export_preprocess")
		defer g.Finalize()
		out := callPreprocess(p.pre, p.inputParams(g, b))
		if err := checkPreprocessFields(m, out); err != nil {
			panic(err)
		}
		names = sortedKeys(out)
		nodes := make([]*graph.Node, len(names))
		for i, k := range names {
			nodes[i] = out[k]
		}
		g.Compile(nodes...)
		args := make([]any, len(p.inputs))
		for i, in := range p.inputs {
			t := tensors.FromShape(shapes.Make(in.dtype, append([]int{b}, in.row...)...))
			owned = append(owned, t)
			args[i] = t
		}
		results = g.Run(args...)
		owned = append(owned, results...)
	})
	if err != nil {
		return err
	}
	for i, name := range names {
		t := results[i]
		dims := t.Shape().Dimensions
		if len(dims) == 0 || dims[0] != b {
			return fmt.Errorf("%s: batch field %q has shape %v for %d rows of wire input: the batch must lead (batch-first rule), one row per wire row", what, name, dims, b)
		}
		fs, ok := m.FieldSpec(name)
		if ok && (t.DType() != fs.DType || !slices.Equal(dims[1:], fs.Shape)) {
			return fmt.Errorf("%s: batch field %q is %s%v per row, and Forward's data contract (%s) has it as %s%v per row", what, name, t.DType(), dims[1:], contractName(m), fs.DType, fs.Shape)
		}
	}
	return nil
}

// checkPreprocessFields checks the names of what the Preprocess returned against Forward's.
func checkPreprocessFields(m *core.ModelView, out map[string]*graph.Node) error {
	fields, whole := m.ForwardFields()
	if len(out) == 0 {
		return errors.New("it returned no batch field: return the fields Forward reads, by name")
	}
	for _, k := range sortedKeys(out) {
		if out[k] == nil {
			return fmt.Errorf("batch field %q is nil", k)
		}
		if !whole && !slices.ContainsFunc(fields, func(f core.ForwardField) bool { return f.Name == k }) {
			return fmt.Errorf("it returned batch field %q, which Forward does not declare (it declares %v)", k, fieldNames(fields))
		}
	}
	if !whole {
		for _, f := range fields {
			if _, ok := out[f.Name]; !ok && !f.Optional {
				return fmt.Errorf("it returned %v, without batch field %q, which Forward requires", sortedKeys(out), f.Name)
			}
		}
	}
	return nil
}

// contractName says where the Nitro's field dtypes and shapes came from.
func contractName(m *core.ModelView) string {
	if m.FromInputSpecs() {
		return "WithInputSpecs"
	}
	return "the data"
}

// resolveOutputs maps each shipped output to its source: a Forward output or an echoed input.
func resolveOutputs(p *exportPlan, out core.Outputs) ([]exportSource, error) {
	specs := p.outputs
	if specs == nil {
		for _, name := range sortedKeys(out) {
			if p.isInput(name) {
				return nil, fmt.Errorf("Forward output %q has the name of a declared input: list ExportSpec.Outputs, giving it another name (Name: \"...\", From: %q)", name, name)
			}
			specs = append(specs, ExportOutput{Name: name})
		}
	}
	srcs := make([]exportSource, len(specs))
	for i, o := range specs {
		what := fmt.Sprintf("ExportSpec.Outputs[%d] %q", i, o.Name)
		from := o.From
		if from == "" {
			from = o.Name
		}
		_, isOut := out[from]
		in := slices.IndexFunc(p.inputs, func(x exportInput) bool { return x.name == from })
		switch {
		case isOut && in >= 0 && o.From != "":
			return nil, fmt.Errorf("%s: From %q is both a Forward output and a declared input: it cannot say which to return; rename the output in Forward", what, from)
		case isOut:
			o.From = from
			srcs[i] = exportSource{spec: o, output: from}
		case in >= 0:
			o.From = from
			srcs[i] = exportSource{spec: o, input: in}
		case o.From != "":
			return nil, fmt.Errorf("%s: From %q is neither a Forward output (Forward returns %v) nor a declared input (%v)", what, from, sortedKeys(out), inputNames(p))
		default:
			return nil, fmt.Errorf("%s: Forward returns no output %q (it returns %v): name one of them, or set From to rename one", what, from, sortedKeys(out))
		}
	}
	return srcs, nil
}

func inputNames(p *exportPlan) []string {
	out := make([]string, len(p.inputs))
	for i, in := range p.inputs {
		out[i] = in.name
	}
	return out
}

// reachable is the set of nodes the roots depend on.
func reachable(roots []*graph.Node) map[*graph.Node]bool {
	seen := map[*graph.Node]bool{}
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		nd := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if nd == nil || seen[nd] {
			continue
		}
		seen[nd] = true
		stack = append(stack, nd.Inputs()...)
	}
	return seen
}

// compileExport builds and compiles the program for batch size b: its parameters are the inputs,
// then the weights, in that order and nothing else; a Device field Forward reads is a constant
// holding its frozen value, one it does not read is a dead zero of its shape (so no array of its
// value is emitted). With run set it also runs the program once on zero inputs and returns the
// output specs, checked against the trace and the spec's assertions.
func compileExport(m *core.ModelView, be backends.Backend, p *exportPlan, probe *exportProbe, fz *frozenDevice, used []exportWeight, b int, run bool) (specs []exportbundle.TensorSpec, err error) {
	err = tryGraph(fmt.Sprintf("compiling the export program for batch size %d", b), func() {
		g := graph.NewGraph(be, fmt.Sprintf("nitro_export_b%d", b))
		defer g.Finalize()
		wire := p.inputParams(g, b)
		inNodes := make([]*graph.Node, len(p.inputs))
		for i, in := range p.inputs {
			inNodes[i] = wire[in.name]
		}
		for _, w := range used {
			w.v.ValueGraph(g) // the weights' parameters, after the inputs, in weight order
		}
		out, err := m.Forward(g, fz.consts(g, probe.devRead), p.batch(wire), b)
		if err != nil {
			panic(err)
		}
		if got, want := g.NumParameters(), len(p.inputs)+len(used); got != want {
			panic(fmt.Errorf("the program has %d arguments, expected %d (%d inputs, %d weights): Forward read a variable at batch size %d that it did not read at batch size %d; read every variable unconditionally", got, want, len(p.inputs), len(used), b, p.batches[0]))
		}
		outs := make([]*graph.Node, len(probe.sources))
		for i, s := range probe.sources {
			if s.output != "" {
				outs[i] = out[s.output]
				if outs[i] == nil {
					panic(fmt.Errorf("Forward returned no %q at batch size %d", s.output, b))
				}
			} else {
				outs[i] = inNodes[s.input]
			}
		}
		g.Compile(outs...)
		if !run {
			return
		}
		for i, s := range probe.sources {
			spec, err := outputSpec(s.spec, outs[i].Shape(), b)
			if err != nil {
				panic(err)
			}
			specs = append(specs, spec)
		}
		if err := runExportOnce(g, p, used, specs, b); err != nil {
			panic(err)
		}
	})
	return specs, err
}

// outputSpec is an output's bundle spec from its traced shape, checked against the assertions.
func outputSpec(o ExportOutput, s shapes.Shape, b int) (exportbundle.TensorSpec, error) {
	what := fmt.Sprintf("ExportSpec.Outputs %q (from %q)", o.Name, o.From)
	dt := exportbundle.DTypeOf(s.DType)
	ok := dt.Valid()
	if !ok {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s: dtype %s cannot be held in a bundle", what, s.DType)
	}
	dims := s.Dimensions
	if len(dims) == 0 || dims[0] != b {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s has shape %v at batch size %d: the batch must lead (batch-first rule)", what, dims, b)
	}
	if o.DType != "" && o.DType != dt {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s: the program returns %s, ExportOutput.DType asserts %s", what, dt, o.DType)
	}
	if o.AxisLetters != "" && len(o.AxisLetters) != len(dims)-1 {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s: AxisLetters %q names %d axes, the output has %d besides the batch", what, o.AxisLetters, len(o.AxisLetters), len(dims)-1)
	}
	shape := append([]int{-1}, dims[1:]...)
	if len(o.Shape) > 0 && !slices.Equal(o.Shape, shape) {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s: the program returns shape %v, ExportOutput.Shape asserts %v", what, shape, o.Shape)
	}
	return exportbundle.TensorSpec{Name: o.Name, DType: dt, Shape: shape, BatchAxis: 0, AxisLetters: o.AxisLetters}, nil
}

// runExportOnce runs the compiled program on zero inputs and the weights, and checks that what
// it returns is what the specs say: the verification the runner's own checks will rely on.
func runExportOnce(g *graph.Graph, p *exportPlan, used []exportWeight, specs []exportbundle.TensorSpec, b int) error {
	var args []any
	var owned []*tensors.Tensor
	defer func() {
		for _, t := range owned {
			t.FinalizeAll()
		}
	}()
	for _, in := range p.inputs {
		t := tensors.FromShape(shapes.Make(in.dtype, append([]int{b}, in.row...)...))
		owned = append(owned, t)
		args = append(args, t)
	}
	for _, w := range used {
		t, err := gomlxTensor(w.t, w.v.Shape())
		if err != nil {
			return fmt.Errorf("weight %s: %w", w.name, err)
		}
		owned = append(owned, t)
		args = append(args, t)
	}
	outs := g.Run(args...)
	owned = append(owned, outs...)
	if len(outs) != len(specs) {
		return fmt.Errorf("the program returned %d outputs, %d expected", len(outs), len(specs))
	}
	for i, t := range outs {
		want := specs[i].ShapeAt(b)
		if dt := exportbundle.DTypeOf(t.DType()); dt != specs[i].DType || !slices.Equal(t.Shape().Dimensions, want) {
			return fmt.Errorf("output %q: the program returned %s%v, the trace said %s%v", specs[i].Name, dt, t.Shape().Dimensions, specs[i].DType, want)
		}
	}
	return nil
}

// bundleTensor is a weight read back to the host, as a bundle tensor.
func bundleTensor(name string, dtype dtypes.DType, shape []int, data []byte) (exportbundle.Tensor, error) {
	dt := exportbundle.DTypeOf(dtype)
	if !dt.Valid() {
		return exportbundle.Tensor{}, fmt.Errorf("%s: dtype %s cannot be held in a bundle", name, dtype)
	}
	if !littleEndian {
		return exportbundle.Tensor{}, errors.New("bundles hold little-endian data and this host is big-endian")
	}
	return exportbundle.Tensor{DType: dt, Shape: shape, Data: data}, nil
}

// littleEndian: a bundle's data is little-endian and the view's weights hold native bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// gomlxTensor makes a fresh host tensor of shape s holding t's bytes.
func gomlxTensor(t exportbundle.Tensor, s shapes.Shape) (*tensors.Tensor, error) {
	h := tensors.FromShape(s)
	if s.Size() == 0 {
		return h, nil
	}
	var short bool
	err := h.MutableBytes(func(b []byte) {
		short = len(b) != len(t.Data)
		copy(b, t.Data)
	})
	if err == nil && short {
		err = fmt.Errorf("%d bytes for %s", len(t.Data), s)
	}
	return h, err
}

// exportProvenance assembles the provenance, lowest precedence first: the framework's facts (the
// view's, and the plugin the programs are compiled through), the site's repository state (only
// with a ProvenanceRoot), the model's hook, the explicit argument. It returns the extra files
// (the working-tree patch) too.
func exportProvenance(m *core.ModelView, spec ExportSpec, p *exportPlan) (map[string]string, map[string][]byte, error) {
	prov := m.Provenance()
	prov["pjrt_plugin"] = filepath.Base(p.plugin)
	var extra map[string][]byte
	if spec.ProvenanceRoot != "" {
		site, patch, err := exportbundle.SiteProvenance(spec.ProvenanceRoot)
		if err != nil {
			return nil, nil, fmt.Errorf("ExportSpec.ProvenanceRoot: %w", err)
		}
		if len(patch) > 0 {
			site["git_patch"] = PatchFile
			extra = map[string][]byte{PatchFile: patch}
		}
		for k, v := range site {
			prov[k] = v
		}
	}
	if h, ok := m.Experiment().(core.ExportProvenancer); ok {
		hook, err := callProvenanceHook(h)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range hook {
			if err := checkExportName("ExportProvenance key", k); err != nil {
				return nil, nil, err
			}
			prov[k] = v
		}
	}
	for k, v := range spec.Provenance {
		prov[k] = v
	}
	return prov, extra, nil
}

func callProvenanceHook(h core.ExportProvenancer) (m map[string]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError("ExportProvenance", r)
		}
	}()
	return h.ExportProvenance(), nil
}

// tryGraph turns a graph-building panic into an error naming what was being built.
func tryGraph(what string, fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError(what, r)
		}
	}()
	fn()
	return nil
}

func panicError(what string, r any) error {
	if e, ok := r.(error); ok {
		return fmt.Errorf("%s: %w", what, e)
	}
	return fmt.Errorf("%s: %v", what, r)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func fieldNames(fields []core.ForwardField) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}
