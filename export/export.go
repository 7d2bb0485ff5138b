package export

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/tensorfile"
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
	WireInputs []prefetch.FieldSpec
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
	DType tensorfile.DType
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
// The experiment's ExportContract method, when it has one and spec sets no contract field, gives
// the contract fields (see Contract). In order: the ExportSpec is checked against the hooks (names, the batch-first rule, echoes declared
// with From, client specs only with a Postprocess), and what the manifest will hold against the
// bundle's own rules (exportbundle.CheckSpec), before anything is traced; a Preprocess is
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
	if spec, err = withContract(m, spec); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
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
