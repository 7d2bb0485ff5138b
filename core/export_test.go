package core_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/monitors"
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
	n := mustNew(t, &Reg{}, data(t, 0), core.WithMonitor(mon))
	ok := core.ExportSpec{Name: "reg"}
	with := func(f func(s *core.ExportSpec)) core.ExportSpec {
		s := ok
		f(&s)
		return s
	}
	notGit := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(notGit)) // even if the temp folder is inside a repository
	cases := []struct {
		name string
		spec core.ExportSpec
		want []string
	}{
		{"no name", with(func(s *core.ExportSpec) { s.Name = "" }), []string{"ExportSpec.Name is empty"}},
		{"batch size 0", with(func(s *core.ExportSpec) { s.BatchSizes = []int{1, 0} }), []string{"ExportSpec.BatchSizes[1] is 0", "at least 1"}},
		{"batch size twice", with(func(s *core.ExportSpec) { s.BatchSizes = []int{4, 8, 4} }), []string{"ExportSpec.BatchSizes[2] is 4, as BatchSizes[0] is"}},
		{"input Forward does not declare", with(func(s *core.ExportSpec) { s.Inputs = []string{"x", "y"} }), []string{`ExportSpec.Inputs[1] "y": not a batch field Forward declares`, "[x]"}},
		{"input twice", with(func(s *core.ExportSpec) { s.Inputs = []string{"x", "x"} }), []string{`ExportSpec.Inputs[1] "x": listed twice`}},
		{"no inputs", with(func(s *core.ExportSpec) { s.Inputs = []string{} }), []string{"ExportSpec.Inputs", "no input"}},
		{"undeclared echo", with(func(s *core.ExportSpec) { s.Outputs = []core.ExportOutput{{Name: "pred"}, {Name: "x"}} }),
			[]string{`ExportSpec.Outputs[1] "x": the name is a declared input, and an echo must be declared: set From: "x"`}},
		{"output twice", with(func(s *core.ExportSpec) { s.Outputs = []core.ExportOutput{{Name: "pred"}, {Name: "pred"}} }), []string{`ExportSpec.Outputs[1] "pred": the name appears twice`}},
		{"output shape not batch-first", with(func(s *core.ExportSpec) { s.Outputs = []core.ExportOutput{{Name: "pred", Shape: []int{1, -1}}} }),
			[]string{`ExportSpec.Outputs[0] "pred": Shape [1 -1]`, "batch-first", "-1 at axis 0"}},
		{"output dtype unknown", with(func(s *core.ExportSpec) { s.Outputs = []core.ExportOutput{{Name: "pred", DType: "F31"}} }), []string{`ExportSpec.Outputs[0] "pred": DType "F31"`}},
		{"client outputs without a postprocess", with(func(s *core.ExportSpec) {
			s.ClientOutputs = []exportbundle.TensorSpec{{Name: "prob", DType: exportbundle.F32, Shape: []int{1, 1}}}
		}), []string{"ExportSpec.ClientOutputs given without a Postprocess"}},
		{"client inputs without a postprocess", with(func(s *core.ExportSpec) {
			s.ClientInputs = []exportbundle.TensorSpec{{Name: "x", DType: exportbundle.U8, Shape: []int{1, 4}}}
		}), []string{"ExportSpec.ClientInputs given without a Postprocess"}},
		{"client spec the bundle refuses", with(func(s *core.ExportSpec) {
			s.Postprocess = "softmax"
			s.ClientOutputs = []exportbundle.TensorSpec{{Name: "prob", DType: exportbundle.F32, Shape: []int{1, 3}, AxisLetters: "ab"}}
		}), []string{"the bundle would be invalid", `client_outputs[0] "prob": axis_letters "ab"`}},
		{"output axis letters", with(func(s *core.ExportSpec) { s.Outputs = []core.ExportOutput{{Name: "pred", AxisLetters: "kk"}} }), []string{`ExportSpec.Outputs[0] "pred": AxisLetters "kk"`}},
		{"empty provenance key", with(func(s *core.ExportSpec) { s.Provenance = map[string]string{"": "x"} }), []string{"ExportSpec.Provenance key is empty"}},
	}
	if _, err := exec.LookPath("git"); err == nil {
		cases = append(cases, struct {
			name string
			spec core.ExportSpec
			want []string
		}{"provenance root outside git", with(func(s *core.ExportSpec) { s.ProvenanceRoot = notGit }), []string{"ExportSpec.ProvenanceRoot", "is not in a git work tree"}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bundle")
			_, err := core.Export(n, dir, c.spec)
			wantErr(t, err, c.want...)
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
	_, err := core.Export(n, full, ok)
	wantErr(t, err, "exists and is not empty")
	_, err = core.Export(nil, t.TempDir(), ok)
	wantErr(t, err, "nil *Nitro")
}

// Whole's Forward takes the whole batch, so export cannot tell its inputs from its targets.
type Whole struct{ base }

func (*Whole) Forward(ctx *context.Context, in map[string]*graph.Node) core.Outputs {
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), in["x"], true, 1)}
}

func TestExportWholeBatchForwardNeedsInputs(t *testing.T) {
	n := mustNew(t, &Whole{}, data(t, 0))
	_, err := core.Export(n, filepath.Join(t.TempDir(), "b"), core.ExportSpec{Name: "whole"})
	wantErr(t, err, "ExportSpec.Inputs is empty", "whole batch", "list the batch fields")
	_, err = core.Export(n, filepath.Join(t.TempDir(), "b"), core.ExportSpec{Name: "whole", Inputs: []string{"x", "z"}})
	wantErr(t, err, `ExportSpec.Inputs[1] "z": no split of the data has this field`)
}

// BadHook's ExportProvenance has the wrong type: export refuses it rather than ignoring it.
type BadHook struct{ base }

func (*BadHook) ExportProvenance() map[string]any { return nil }

func TestExportRefusesMistypedProvenanceHook(t *testing.T) {
	n := mustNew(t, &BadHook{}, data(t, 0))
	_, err := core.Export(n, filepath.Join(t.TempDir(), "b"), core.ExportSpec{Name: "bad"})
	wantErr(t, err, "experiment BadHook has an ExportProvenance method of type", "define func (e *BadHook) ExportProvenance() map[string]string")
}

// TestSiteProvenance reads a throwaway repository's state with git: the commit and tree hashes,
// the branch, clean then dirty with the patch of the tracked change, and untracked files counted
// (they are not in the patch); a directory outside any repository, and one with no commit yet,
// are errors naming the fix.
func TestSiteProvenance(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: git is not on PATH: %v", err)
	}
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=nitro", "-c", "user.email=nitro@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "trunk")
	_, _, err := core.SiteProvenance(repo)
	wantErr(t, err, "has no commit to record")

	if err := os.WriteFile(filepath.Join(repo, "model.go"), []byte("package model\n\nconst Width = 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "model.go")
	git("commit", "-q", "-m", "first")
	commit, tree := git("rev-parse", "HEAD"), git("rev-parse", "HEAD^{tree}")

	prov, patch, err := core.SiteProvenance(repo)
	if err != nil {
		t.Fatal(err)
	}
	if prov["git_commit"] != commit || prov["git_tree"] != tree || prov["git_dirty"] != "false" || prov["git_branch"] != "trunk" || patch != nil {
		t.Fatalf("clean tree: %v, patch %q; want commit %s, tree %s, branch trunk, not dirty, no patch", prov, patch, commit, tree)
	}
	if _, ok := prov["git_untracked"]; ok {
		t.Errorf("clean tree reports untracked files: %v", prov)
	}

	if err := os.WriteFile(filepath.Join(repo, "model.go"), []byte("package model\n\nconst Width = 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(repo, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	prov, patch, err = core.SiteProvenance(sub) // any directory inside the work tree
	if err != nil {
		t.Fatal(err)
	}
	if prov["git_commit"] != commit || prov["git_dirty"] != "true" || prov["git_untracked"] != "1" {
		t.Fatalf("dirty tree: %v", prov)
	}
	for _, w := range []string{"diff --git a/model.go b/model.go", "-const Width = 4", "+const Width = 8"} {
		if !strings.Contains(string(patch), w) {
			t.Errorf("patch does not contain %q:\n%s", w, patch)
		}
	}
	if strings.Contains(string(patch), "notes.txt") {
		t.Errorf("patch holds the untracked file:\n%s", patch)
	}

	notGit := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(notGit))
	_, _, err = core.SiteProvenance(notGit)
	wantErr(t, err, "is not in a git work tree")
	_, _, err = core.SiteProvenance(filepath.Join(repo, "model.go"))
	wantErr(t, err, "is not a directory")
}
