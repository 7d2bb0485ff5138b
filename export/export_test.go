package export_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/export"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/tensorfile"
)

// TestExportRefusesSpec: every spec the hooks disagree with is refused before anything is traced
// or compiled (no ExportCompiling phase, no bundle directory), with an error naming the field.
// These checks need no XLA, so they run on the pure-Go backend.
func TestExportRefusesSpec(t *testing.T) {
	var phases []string
	mon := monitors.MonitorFunc(func(p monitors.Phase, _ monitors.Progress, _ monitors.Info) error {
		phases = append(phases, p.String())
		return nil
	})
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithMonitor(mon))
	ok := export.ExportSpec{Name: "reg"}
	with := func(f func(s *export.ExportSpec)) export.ExportSpec {
		s := ok
		f(&s)
		return s
	}
	notGit := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(notGit)) // even if the temp folder is inside a repository
	cases := []struct {
		name string
		spec export.ExportSpec
		want []string
	}{
		{"no name", with(func(s *export.ExportSpec) { s.Name = "" }), []string{"ExportSpec.Name is empty"}},
		{"batch size 0", with(func(s *export.ExportSpec) { s.BatchSizes = []int{1, 0} }), []string{"ExportSpec.BatchSizes[1] is 0", "at least 1"}},
		{"batch size twice", with(func(s *export.ExportSpec) { s.BatchSizes = []int{4, 8, 4} }), []string{"ExportSpec.BatchSizes[2] is 4, as BatchSizes[0] is"}},
		{"input Forward does not declare", with(func(s *export.ExportSpec) { s.Inputs = []string{"x", "y"} }), []string{`ExportSpec.Inputs[1] "y": not a batch field Forward declares`, "[x]"}},
		{"input twice", with(func(s *export.ExportSpec) { s.Inputs = []string{"x", "x"} }), []string{`ExportSpec.Inputs[1] "x": listed twice`}},
		{"no inputs", with(func(s *export.ExportSpec) { s.Inputs = []string{} }), []string{"ExportSpec.Inputs", "no input"}},
		{"undeclared echo", with(func(s *export.ExportSpec) { s.Outputs = []export.ExportOutput{{Name: "pred"}, {Name: "x"}} }),
			[]string{`ExportSpec.Outputs[1] "x": the name is a declared input, and an echo must be declared: set From: "x"`}},
		{"output twice", with(func(s *export.ExportSpec) { s.Outputs = []export.ExportOutput{{Name: "pred"}, {Name: "pred"}} }), []string{`ExportSpec.Outputs[1] "pred": the name appears twice`}},
		{"output shape not batch-first", with(func(s *export.ExportSpec) { s.Outputs = []export.ExportOutput{{Name: "pred", Shape: []int{1, -1}}} }),
			[]string{`ExportSpec.Outputs[0] "pred": Shape [1 -1]`, "batch-first", "-1 at axis 0"}},
		{"output dtype unknown", with(func(s *export.ExportSpec) { s.Outputs = []export.ExportOutput{{Name: "pred", DType: "F31"}} }), []string{`ExportSpec.Outputs[0] "pred": DType "F31"`}},
		{"client outputs without a postprocess", with(func(s *export.ExportSpec) {
			s.ClientOutputs = []exportbundle.TensorSpec{{Name: "prob", DType: tensorfile.F32, Shape: []int{1, 1}}}
		}), []string{"ExportSpec.ClientOutputs given without a Postprocess"}},
		{"client inputs without a postprocess", with(func(s *export.ExportSpec) {
			s.ClientInputs = []exportbundle.TensorSpec{{Name: "x", DType: tensorfile.U8, Shape: []int{1, 4}}}
		}), []string{"ExportSpec.ClientInputs given without a Postprocess"}},
		{"client spec the bundle refuses", with(func(s *export.ExportSpec) {
			s.Postprocess = "softmax"
			s.ClientOutputs = []exportbundle.TensorSpec{{Name: "prob", DType: tensorfile.F32, Shape: []int{1, 3}, AxisLetters: "ab"}}
		}), []string{"the bundle would be invalid", `client_outputs[0] "prob": axis_letters "ab"`}},
		{"batch size past the bundle's bound", with(func(s *export.ExportSpec) { s.BatchSizes = []int{1 << 21} }),
			[]string{"the bundle would be invalid", "batch_sizes[0]: 2097152 (want 1..1048576)"}},
		{"provenance key the bundle refuses", with(func(s *export.ExportSpec) { s.Provenance = map[string]string{"a\x7fb": "x"} }),
			[]string{`ExportSpec.Provenance key "a\x7fb" holds a control character`}},
		{"output axis letters", with(func(s *export.ExportSpec) { s.Outputs = []export.ExportOutput{{Name: "pred", AxisLetters: "kk"}} }), []string{`ExportSpec.Outputs[0] "pred": AxisLetters "kk"`}},
		{"empty provenance key", with(func(s *export.ExportSpec) { s.Provenance = map[string]string{"": "x"} }), []string{"ExportSpec.Provenance key is empty"}},
	}
	// The ProvenanceRoot check runs git: without git the case is a visible skip (a failure in CI).
	const needsGit = "provenance root outside git"
	cases = append(cases, struct {
		name string
		spec export.ExportSpec
		want []string
	}{needsGit, with(func(s *export.ExportSpec) { s.ProvenanceRoot = notGit }), []string{"ExportSpec.ProvenanceRoot", "is not in a git work tree"}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == needsGit {
				if _, err := exec.LookPath("git"); err != nil {
					prereq.Git.Absent(t, fmt.Errorf("the ProvenanceRoot check runs it: %w", err))
				}
			}
			dir := filepath.Join(t.TempDir(), "bundle")
			_, err := export.Export(n, dir, c.spec)
			coretest.WantErr(t, err, c.want...)
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Errorf("the bundle directory exists after a refusal (%v)", serr)
			}
		})
	}
	for _, p := range phases {
		if p == (monitors.ExportCompiling{}).String() {
			t.Errorf("a refused export published %s: phases %v", p, phases)
		}
	}

	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := export.Export(n, full, ok)
	coretest.WantErr(t, err, "exists and is not empty")
	_, err = export.Export(nil, t.TempDir(), ok)
	coretest.WantErr(t, err, "nil *Nitro")
}

// Whole's Forward takes the whole batch, so export cannot tell its inputs from its targets.
type Whole struct{ coretest.Base }

func (*Whole) Forward(ctx *context.Context, in map[string]*graph.Node) core.Outputs {
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), in["x"], true, 1)}
}

func TestExportWholeBatchForwardNeedsInputs(t *testing.T) {
	n := coretest.MustNew(t, &Whole{}, coretest.Data(t, 0))
	_, err := export.Export(n, filepath.Join(t.TempDir(), "b"), export.ExportSpec{Name: "whole"})
	coretest.WantErr(t, err, "ExportSpec.Inputs is empty", "whole batch", "list the batch fields")
	_, err = export.Export(n, filepath.Join(t.TempDir(), "b"), export.ExportSpec{Name: "whole", Inputs: []string{"x", "z"}})
	coretest.WantErr(t, err, `ExportSpec.Inputs[1] "z": no split of the data has this field`)
}

// BadHook's ExportProvenance has the wrong type: export refuses it rather than ignoring it.
type BadHook struct{ coretest.Base }

func (*BadHook) ExportProvenance() map[string]any { return nil }

func TestExportRefusesMistypedProvenanceHook(t *testing.T) {
	n := coretest.MustNew(t, &BadHook{}, coretest.Data(t, 0))
	_, err := export.Export(n, filepath.Join(t.TempDir(), "b"), export.ExportSpec{Name: "bad"})
	coretest.WantErr(t, err, "experiment BadHook has an ExportProvenance method of type", "define func (e *BadHook) ExportProvenance() map[string]string")
}

// OptIn is Forward's batch with an optional field, for the Preprocess field checks.
type OptIn struct {
	X *graph.Node `batch:"x"`
	W *graph.Node `batch:"w,optional"`
}

// Opt reads x and, when the batch has it, w.
type Opt struct{ coretest.Base }

func (*Opt) Forward(ctx *context.Context, in OptIn) core.Outputs {
	x := in.X
	if in.W != nil {
		x = graph.Mul(x, in.W)
	}
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), x, true, 1)}
}

// TestExportPreprocessEagerCheck: a Preprocess is called eagerly on the Nitro's own backend (here
// pure Go) before anything is captured, and what it returns is checked against Forward's fields
// and the data contract (dtype, per-row shape, batch first), the error naming the field; a
// refused spec publishes no ExportCompiling and writes no bundle. A Preprocess that passes is
// exported when a plugin is found: the bundle's inputs are then the wire inputs.
func TestExportPreprocessEagerCheck(t *testing.T) {
	var phases []string
	mon := monitors.MonitorFunc(func(p monitors.Phase, _ monitors.Progress, _ monitors.Info) error {
		phases = append(phases, p.String())
		return nil
	})
	n := coretest.MustNew(t, &Opt{}, coretest.Data(t, 0), core.WithMonitor(mon))
	raw := []prefetch.FieldSpec{{Name: "raw", DType: dtypes.Uint8, Shape: []int{coretest.Features}}}
	calls := 0
	toF32 := func(w map[string]*graph.Node) *graph.Node {
		calls++
		return graph.DivScalar(graph.ConvertDType(w["raw"], dtypes.Float32), 255)
	}
	pre := func(f func(w map[string]*graph.Node) map[string]*graph.Node) export.ExportSpec {
		return export.ExportSpec{Name: "pre", WireInputs: raw, Preprocess: f}
	}
	cases := []struct {
		name string
		spec export.ExportSpec
		want []string
	}{
		{"wrong dtype", pre(func(w map[string]*graph.Node) map[string]*graph.Node {
			return map[string]*graph.Node{"x": graph.ConvertDType(toF32(w), dtypes.Float64)}
		}), []string{"ExportSpec.Preprocess (called eagerly on zero wire inputs at batch size 1)", `batch field "x" is Float64[4] per row`, "data contract (the data) has it as Float32[4] per row"}},
		{"wrong row shape", pre(func(w map[string]*graph.Node) map[string]*graph.Node {
			return map[string]*graph.Node{"x": graph.Slice(toF32(w), graph.AxisRange(), graph.AxisRange(0, 3))}
		}), []string{`batch field "x" is Float32[3] per row`, "Float32[4] per row"}},
		{"batch not first", pre(func(w map[string]*graph.Node) map[string]*graph.Node {
			return map[string]*graph.Node{"x": graph.Reshape(toF32(w), coretest.Features)}
		}), []string{`batch field "x" has shape [4] for 1 rows of wire input`, "batch-first"}},
		{"undeclared field", pre(func(w map[string]*graph.Node) map[string]*graph.Node {
			return map[string]*graph.Node{"x": toF32(w), "z": toF32(w)}
		}), []string{`it returned batch field "z", which Forward does not declare (it declares [x w])`}},
		{"required field missing", pre(func(w map[string]*graph.Node) map[string]*graph.Node {
			return map[string]*graph.Node{"w": toF32(w)}
		}), []string{`it returned [w], without batch field "x", which Forward requires`}},
		{"nil field", pre(func(w map[string]*graph.Node) map[string]*graph.Node {
			return map[string]*graph.Node{"x": nil}
		}), []string{`batch field "x" is nil`}},
		{"nothing returned", pre(func(map[string]*graph.Node) map[string]*graph.Node { return nil }), []string{"it returned no batch field"}},
		{"panics", pre(func(w map[string]*graph.Node) map[string]*graph.Node {
			panic(errors.New("deliberately broken"))
		}), []string{"ExportSpec.Preprocess: deliberately broken"}},
		{"no wire inputs", export.ExportSpec{Name: "pre", Preprocess: func(w map[string]*graph.Node) map[string]*graph.Node { return w }},
			[]string{"ExportSpec.WireInputs: no specs given", "with a Preprocess, WireInputs declare what a client sends"}},
		{"wire inputs without preprocess", export.ExportSpec{Name: "pre", WireInputs: raw}, []string{"ExportSpec.WireInputs given without a Preprocess"}},
		{"inputs with preprocess", export.ExportSpec{Name: "pre", Inputs: []string{"x"}, WireInputs: raw, Preprocess: func(w map[string]*graph.Node) map[string]*graph.Node { return w }},
			[]string{"ExportSpec.Inputs [x] and a Preprocess both given"}},
		{"wire dtype", export.ExportSpec{Name: "pre", WireInputs: []prefetch.FieldSpec{{Name: "raw", Shape: []int{coretest.Features}}}, Preprocess: func(w map[string]*graph.Node) map[string]*graph.Node { return w }},
			[]string{`ExportSpec.WireInputs[0] "raw": dtype InvalidDType`}},
		{"wire dimension 0", export.ExportSpec{Name: "pre", WireInputs: []prefetch.FieldSpec{{Name: "raw", DType: dtypes.Uint8, Shape: []int{0}}}, Preprocess: func(w map[string]*graph.Node) map[string]*graph.Node { return w }},
			[]string{`ExportSpec.WireInputs[0] "raw": Shape [0]: dimension 0 is 0`}},
		{"wire name twice", export.ExportSpec{Name: "pre", WireInputs: append(slices.Clone(raw), raw[0]), Preprocess: func(w map[string]*graph.Node) map[string]*graph.Node { return w }},
			[]string{`ExportSpec.WireInputs[1] "raw": declared twice (also ExportSpec.WireInputs[0])`}},
		{"echo of a wire input undeclared", export.ExportSpec{Name: "pre", WireInputs: raw, Outputs: []export.ExportOutput{{Name: "raw"}},
			Preprocess: func(w map[string]*graph.Node) map[string]*graph.Node { return map[string]*graph.Node{"x": toF32(w)} }},
			[]string{`ExportSpec.Outputs[0] "raw": the name is a declared input, and an echo must be declared`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bundle")
			_, err := export.Export(n, dir, c.spec)
			coretest.WantErr(t, err, c.want...)
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Errorf("the bundle directory exists after a refusal (%v)", serr)
			}
		})
	}
	if calls == 0 {
		t.Fatal("the Preprocess was never called eagerly")
	}
	if slices.Contains(phases, (monitors.ExportCompiling{}).String()) {
		t.Errorf("a refused export published ExportCompiling: phases %v", phases)
	}

	// A Preprocess that returns what Forward reads passes the eager check; then the export
	// compiles through the plugin, or stops for want of one (after the check).
	calls = 0
	dir := filepath.Join(t.TempDir(), "bundle")
	b, err := export.Export(n, dir, export.ExportSpec{Name: "pre", WireInputs: raw, BatchSizes: []int{2},
		Preprocess: func(w map[string]*graph.Node) map[string]*graph.Node { return map[string]*graph.Node{"x": toF32(w)} },
		Outputs:    []export.ExportOutput{{Name: "pred"}, {Name: "raw_echo", From: "raw"}}})
	if calls == 0 {
		t.Fatal("the Preprocess was not called")
	}
	if err != nil {
		coretest.WantErr(t, err, "no plugin found")
		prereq.XLAPlugin.Absent(t, fmt.Errorf("the eager check passed, the capture was not tried: %w", err))
	}
	if len(b.Inputs) != 1 || b.Inputs[0].Name != "raw" || b.Inputs[0].DType != tensorfile.U8 || !slices.Equal(b.Inputs[0].Shape, []int{-1, coretest.Features}) {
		t.Errorf("bundle inputs %+v, want the wire input raw U8 [-1 4]", b.Inputs)
	}
	if len(b.Outputs) != 2 || b.Outputs[1].Name != "raw_echo" || b.Outputs[1].DType != tensorfile.U8 {
		t.Errorf("bundle outputs %+v, want pred and the echo of the wire input (U8)", b.Outputs)
	}
	t.Logf("exported through %s: inputs %+v, outputs %+v", b.Provenance["pjrt_plugin"], b.Inputs, b.Outputs)

	// The export backend is swappable: an in-memory Writer gets the same bundle and no file is
	// written.
	mem := &exportbundle.Memory{}
	memDir := filepath.Join(t.TempDir(), "in-memory")
	mb, err := export.Export(n, memDir, export.ExportSpec{Name: "pre", WireInputs: raw, BatchSizes: []int{2}, Writer: mem,
		Preprocess: func(w map[string]*graph.Node) map[string]*graph.Node { return map[string]*graph.Node{"x": toF32(w)} }})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := mem.Bundle(memDir); !ok || got != mb || len(got.Programs) != 1 {
		t.Errorf("the Memory writer holds %v (%v), want the exported bundle with one program", got, ok)
	}
	if _, err := os.Stat(memDir); !os.IsNotExist(err) {
		t.Errorf("an in-memory export wrote %s (%v)", memDir, err)
	}
}

// Baked has a GraphConst field, for the drift refusal.
type Baked struct {
	coretest.Base
	Width int `nitro:"graphconst"`
}

// A GraphConst field assigned after New refuses the export (the model view refuses as every
// verb does), naming the field, before anything is written.
func TestExportRefusesGraphConstDrift(t *testing.T) {
	e := &Baked{Width: 4}
	n := coretest.MustNew(t, e, coretest.Data(t, 0))
	e.Width = 8
	dir := filepath.Join(t.TempDir(), "b")
	_, err := export.Export(n, dir, export.ExportSpec{Name: "b"})
	coretest.WantErr(t, err, "Export refused", "GraphConst field Width (4 at New, now 8) of Baked was assigned after core.New")
	if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
		t.Errorf("the bundle directory exists after a refusal (%v)", serr)
	}
}

// Declared declares its export contract: an output renamed, a client-side postprocess.
type Declared struct {
	coretest.Base
	contract export.Contract
	calls    int
}

func (e *Declared) ExportContract() export.Contract {
	e.calls++
	if e.contract.Postprocess == "panic" {
		panic("no contract today")
	}
	return e.contract
}

// MistypedContract has an ExportContract method export cannot use.
type MistypedContract struct{ coretest.Base }

func (*MistypedContract) ExportContract() map[string]any { return nil }

// The experiment's ExportContract fills an ExportSpec that sets no contract field (its outputs
// are checked as the ExportSpec's would be, naming its field); an ExportSpec that sets one is used as
// given and the method is not called; a panicking or mistyped method is an error naming it.
func TestExportContract(t *testing.T) {
	e := &Declared{contract: export.Contract{Outputs: []export.ExportOutput{{Name: "scores", From: "pred"}, {Name: "scores", From: "pred"}}}}
	n := coretest.MustNew(t, e, coretest.Data(t, 0))
	_, err := export.Export(n, filepath.Join(t.TempDir(), "b"), export.ExportSpec{Name: "declared"})
	coretest.WantErr(t, err, `ExportSpec.Outputs[1] "scores": the name appears twice`)
	if e.calls != 1 {
		t.Errorf("ExportContract called %d times, want once", e.calls)
	}
	_, err = export.Export(n, filepath.Join(t.TempDir(), "b"), export.ExportSpec{Name: "declared", Outputs: []export.ExportOutput{{Name: "pred"}, {Name: "pred"}}})
	coretest.WantErr(t, err, `ExportSpec.Outputs[1] "pred": the name appears twice`)
	if e.calls != 1 {
		t.Errorf("ExportContract called although the ExportSpec sets Outputs (%d calls)", e.calls)
	}
	e.contract.Postprocess = "panic"
	_, err = export.Export(n, filepath.Join(t.TempDir(), "b"), export.ExportSpec{Name: "declared"})
	coretest.WantErr(t, err, "ExportContract", "no contract today")

	m := coretest.MustNew(t, &MistypedContract{}, coretest.Data(t, 0))
	_, err = export.Export(m, filepath.Join(t.TempDir(), "b"), export.ExportSpec{Name: "mistyped"})
	coretest.WantErr(t, err, "experiment MistypedContract has an ExportContract method of type", "define func (e *MistypedContract) ExportContract() export.Contract")
}
