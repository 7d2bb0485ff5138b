package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/backend"
	"github.com/nitro-go/nitro/exportbundle"
)

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

func inputNames(p *exportPlan) []string {
	out := make([]string, len(p.inputs))
	for i, in := range p.inputs {
		out[i] = in.name
	}
	return out
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
