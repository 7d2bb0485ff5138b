package export

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/tensorfile"
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
		out[i] = exportbundle.TensorSpec{Name: in.name, DType: tensorfile.DTypeOf(in.dtype), Shape: append([]int{-1}, in.row...), BatchAxis: 0}
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

// planExport checks everything about the ExportSpec that needs no trace, naming the field at fault:
// its own fields first, then, with exportbundle's rules, what the manifest will hold.
func planExport(m *core.ModelView, spec ExportSpec) (*exportPlan, error) {
	p := &exportPlan{name: spec.Name, outputs: spec.Outputs}
	if err := exportbundle.CheckName("ExportSpec.Name", spec.Name); err != nil {
		return nil, fmt.Errorf("%w (the bundle's name, recorded in its manifest)", err)
	}
	var err error
	if p.batches, err = planBatchSizes(spec.BatchSizes); err != nil {
		return nil, err
	}
	if err := planInputs(m, spec, p); err != nil {
		return nil, err
	}
	if err := checkOutputs(p, spec.Outputs); err != nil {
		return nil, err
	}
	for k := range spec.Provenance {
		if err := exportbundle.CheckName("ExportSpec.Provenance key", k); err != nil {
			return nil, err
		}
	}
	if err := checkBundleSpec(spec, p); err != nil {
		return nil, err
	}
	if err := checkProvenanceHook(m); err != nil {
		return nil, err
	}
	return p, nil
}

// planBatchSizes checks ExportSpec.BatchSizes (default {1}): positive, distinct. They are
// compiled in ascending order.
func planBatchSizes(sizes []int) ([]int, error) {
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
	return slices.Sorted(slices.Values(sizes)), nil
}

// planInputs resolves the program's inputs: the wire inputs of a Preprocess (checked here by
// form; what Preprocess returns is checked against Forward by running it, in checkPreprocess),
// else batch fields Forward declares and the data contract has, every required one listed.
func planInputs(m *core.ModelView, spec ExportSpec, p *exportPlan) error {
	switch {
	case spec.Preprocess != nil && spec.Inputs != nil:
		return fmt.Errorf("ExportSpec.Inputs %v and a Preprocess both given: with a Preprocess the program takes the WireInputs, and Preprocess makes Forward's batch fields from them; drop Inputs", spec.Inputs)
	case spec.Preprocess != nil:
		if err := prefetch.CheckFieldSpecs("ExportSpec.WireInputs", spec.WireInputs); err != nil {
			return fmt.Errorf("%w (with a Preprocess, WireInputs declare what a client sends: name, dtype, per-row shape)", err)
		}
		for _, w := range spec.WireInputs {
			p.inputs = append(p.inputs, exportInput{name: w.Name, dtype: w.DType, row: slices.Clone(w.Shape)})
		}
		p.pre = spec.Preprocess
		return nil
	case spec.WireInputs != nil:
		return errors.New("ExportSpec.WireInputs given without a Preprocess: wire inputs are what a Preprocess converts into Forward's batch fields; add the Preprocess, or list the batch fields the program takes in Inputs")
	default:
		return planBatchInputs(m, spec, p)
	}
}

// checkOutputs checks ExportSpec.Outputs by form: names, echoes declared with From, the
// assertions batch-first. What each names is resolved against the trace (resolveOutputs).
func checkOutputs(p *exportPlan, outputs []ExportOutput) error {
	for i, o := range outputs {
		what := fmt.Sprintf("ExportSpec.Outputs[%d]", i)
		if err := exportbundle.CheckName(what+".Name", o.Name); err != nil {
			return err
		}
		what = fmt.Sprintf("%s %q", what, o.Name)
		if j := slices.IndexFunc(outputs[:i], func(x ExportOutput) bool { return x.Name == o.Name }); j >= 0 {
			return fmt.Errorf("%s: the name appears twice (also Outputs[%d])", what, j)
		}
		if o.From == "" && p.isInput(o.Name) {
			return fmt.Errorf("%s: the name is a declared input, and an echo must be declared: set From: %q to return the input as sent, or name the output otherwise", what, o.Name)
		}
		if o.DType != "" && !o.DType.Valid() {
			return fmt.Errorf("%s: DType %q is not a bundle dtype", what, o.DType)
		}
		if len(o.Shape) > 0 && o.Shape[0] != -1 {
			return fmt.Errorf("%s: Shape %v: the batch leads (batch-first rule), so write -1 at axis 0", what, o.Shape)
		}
		if err := exportbundle.CheckAxisLetters(o.AxisLetters); err != nil {
			return fmt.Errorf("%s: AxisLetters %q: %v (one distinct ASCII letter per non-batch axis)", what, o.AxisLetters, err)
		}
	}
	return nil
}

// checkBundleSpec checks what the manifest will hold that is known before the trace (name,
// inputs, batch sizes, client specs, provenance keys) with exportbundle's own rules, so that a
// spec the bundle would refuse fails now rather than after minutes of compiling. Client specs
// without a Postprocess are refused naming ExportSpec's fields, which is where the fix goes.
func checkBundleSpec(spec ExportSpec, p *exportPlan) error {
	err := exportbundle.CheckSpec(exportbundle.Spec{
		Name:          spec.Name,
		Inputs:        p.inputSpecs(),
		BatchSizes:    p.batches,
		Postprocess:   spec.Postprocess,
		ClientInputs:  spec.ClientInputs,
		ClientOutputs: spec.ClientOutputs,
		Provenance:    spec.Provenance,
	})
	var se *exportbundle.SpecError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, exportbundle.ErrClientWithoutPostprocess) && errors.As(err, &se):
		field, side := "ClientInputs", "inputs"
		if se.Field == "client_outputs" {
			field, side = "ClientOutputs", "outputs"
		}
		return fmt.Errorf("ExportSpec.%s given without a Postprocess: client-side specs describe what a postprocess changes, and with none the program's own %s are the client's; drop %s or add the Postprocess", field, side, field)
	}
	return fmt.Errorf("the bundle would be invalid: %w", err)
}

// checkProvenanceHook refuses an ExportProvenance method of the wrong type, which export would
// otherwise silently ignore.
func checkProvenanceHook(m *core.ModelView) error {
	meth, ok := reflect.TypeOf(m.Experiment()).MethodByName("ExportProvenance")
	if !ok {
		return nil
	}
	if _, hook := m.Experiment().(core.ExportProvenancer); !hook {
		return fmt.Errorf("experiment %s has an ExportProvenance method of type %s, which export would ignore: define func (e *%s) ExportProvenance() map[string]string", m.TypeName(), meth.Type, m.TypeName())
	}
	return nil
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
		if err := exportbundle.CheckName(fmt.Sprintf("ExportSpec.Inputs[%d]", i), name); err != nil {
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
