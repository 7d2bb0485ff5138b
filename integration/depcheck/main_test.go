package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckRefusesCoreImport(t *testing.T) {
	err := Check(map[string][]string{"markers": {"core"}, "core": {"markers"}, "cmd": {"core"}})
	if err == nil || !strings.Contains(err.Error(), "module markers imports core") {
		t.Fatalf("want markers->core refused, got %v", err)
	}
	if err := Check(map[string][]string{"cmd": {"core", "export"}, "export": {"core", "exportbundle"}, "integration": {"core", "cmd"}, "core": {"markers"}, "markers": nil, "exportbundle": nil}); err != nil {
		t.Fatalf("a well layered graph (export above core) was refused: %v", err)
	}
	// export imports core; core importing export back is a cycle.
	err = Check(map[string][]string{"export": {"core"}, "core": {"export"}})
	if err == nil || !strings.Contains(err.Error(), "core -> export -> core") {
		t.Fatalf("want core -> export refused as a cycle, got %v", err)
	}
}

// TestCheckKeepsEngineBelowCore: the engine importing core (or export, or cmd) is refused with
// the fix, even where no cycle would form; core importing the engine is the layering.
func TestCheckKeepsEngineBelowCore(t *testing.T) {
	err := Check(map[string][]string{"engine": {"core"}, "core": {"markers"}, "markers": nil})
	if err == nil || !strings.Contains(err.Error(), "module engine imports core: the engine sits below core") {
		t.Fatalf("want engine->core refused naming the rule, got %v", err)
	}
	if err := Check(map[string][]string{"core": {"engine"}, "engine": {"markers"}, "markers": nil, "cmd": {"core"}}); err != nil {
		t.Fatalf("core above the engine was refused: %v", err)
	}
}

// TestCheckTrainingPath: an exportbundle package, or a workspace package with cgo files, on
// core's import graph is refused, each named; a clean path passes.
func TestCheckTrainingPath(t *testing.T) {
	clean := []Dep{{Path: "x/core", Module: "core"}, {Path: "x/core/model", Module: "core"}, {Path: "x/markers", Module: "markers"}}
	if err := CheckTrainingPath(clean); err != nil {
		t.Fatalf("a clean training path was refused: %v", err)
	}
	// The interposer's root package is the cgo allowed; a package below it is not, nor the
	// allocator, which only a program's own import links.
	if err := CheckTrainingPath(append(clean, Dep{Path: "x/pjrthook", Module: "pjrthook", Cgo: true}, Dep{Path: "x/hostalloc/seam", Module: "hostalloc"})); err != nil {
		t.Fatalf("the interposer or the allocator's seam was refused: %v", err)
	}
	if err := CheckTrainingPath(append(clean, Dep{Path: "x/hostalloc", Module: "hostalloc", Cgo: true})); err == nil {
		t.Fatal("the allocator (cgo) on the training path was allowed")
	}
	if err := CheckTrainingPath(append(clean, Dep{Path: "x/pjrthook/more", Module: "pjrthook", Cgo: true})); err == nil {
		t.Fatal("a second cgo package in the interposer's module was allowed")
	}
	bad := append(clean, Dep{Path: "x/exportbundle", Module: "exportbundle"}, Dep{Path: "x/monitors/shim", Module: "monitors", Cgo: true})
	err := CheckTrainingPath(bad)
	if err == nil || !strings.Contains(err.Error(), "holds x/exportbundle (module exportbundle)") || !strings.Contains(err.Error(), "holds x/monitors/shim, which uses cgo") {
		t.Fatalf("want exportbundle and the cgo package named, got %v", err)
	}
}

// TestTrainingPathOfThisWorkspace: the rule holds on this repository's core, and the listing it
// rests on sees core and the modules core imports.
func TestTrainingPathOfThisWorkspace(t *testing.T) {
	deps, err := TrainingPath(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range deps {
		seen[d.Module+" "+d.Path] = true
	}
	for _, want := range []string{"core github.com/nitro-go/nitro/core", "backend github.com/nitro-go/nitro/backend", "dotgrad github.com/nitro-go/nitro/dotgrad", "markers github.com/nitro-go/nitro/markers", "checkpoint github.com/nitro-go/nitro/checkpoint"} {
		if !seen[want] {
			t.Errorf("the training path misses %s: %v", want, deps)
		}
	}
	if err := CheckTrainingPath(deps); err != nil {
		t.Error(err)
	}
}

// TestCheckKeepsPrereqAtTheBottom: every module may import internal/prereq; it imports none.
func TestCheckKeepsPrereqAtTheBottom(t *testing.T) {
	ok := map[string][]string{"markers": {"internal/prereq"}, "core": {"internal/prereq", "markers"}, "internal/prereq": nil}
	if err := Check(ok); err != nil {
		t.Fatalf("modules importing internal/prereq were refused: %v", err)
	}
	err := Check(map[string][]string{"internal/prereq": {"markers"}, "markers": nil})
	if err == nil || !strings.Contains(err.Error(), "module internal/prereq imports markers") {
		t.Fatalf("want internal/prereq -> markers refused, got %v", err)
	}
}

func TestCheckFindsCycle(t *testing.T) {
	err := Check(map[string][]string{"optimizers": {"schedules"}, "schedules": {"optimizers"}})
	if err == nil || !strings.Contains(err.Error(), "optimizers -> schedules -> optimizers") {
		t.Fatalf("want the cycle named, got %v", err)
	}
}

// TestCollectOnRealWorkspace builds a tiny two-module workspace on disk where markers imports core,
// and checks the whole path (go.work parsing, go list, rules) refuses it.
func TestCollectOnRealWorkspace(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.work", "go 1.26\n\nuse (\n\t./core\n\t./markers\n)\n")
	write("core/go.mod", "module example.com/x/core\n\ngo 1.26\n")
	write("core/core.go", "package core\n\nconst X = 1\n")
	write("markers/go.mod", "module example.com/x/markers\n\ngo 1.26\n\nrequire example.com/x/core v0.0.0\n\nreplace example.com/x/core => ../core\n")
	write("markers/markers.go", "package markers\n\nimport \"example.com/x/core\"\n\nconst Y = core.X\n")
	g, err := Collect(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(g["markers"]) != 1 || g["markers"][0] != "core" {
		t.Fatalf("collected %v", g)
	}
	if err := Check(g); err == nil || !strings.Contains(err.Error(), "markers imports core") {
		t.Fatalf("bad import not refused: %v", err)
	}
}

// TestTrainingPathSeesCgoAndExportbundle: on a workspace on disk where core imports exportbundle,
// which has a cgo file, TrainingPath lists both facts and the check refuses them.
func TestTrainingPathSeesCgoAndExportbundle(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.work", "go 1.26\n\nuse (\n\t./core\n\t./exportbundle\n)\n")
	write("exportbundle/go.mod", "module example.com/x/exportbundle\n\ngo 1.26\n")
	write("exportbundle/shim/shim.go", "package shim\n\n// int one(void) { return 1; }\nimport \"C\"\n\nfunc One() int { return int(C.one()) }\n")
	write("core/go.mod", "module example.com/x/core\n\ngo 1.26\n\nrequire example.com/x/exportbundle v0.0.0\n\nreplace example.com/x/exportbundle => ../exportbundle\n")
	write("core/core.go", "package core\n\nimport \"example.com/x/exportbundle/shim\"\n\nvar X = shim.One()\n")
	deps, err := TrainingPath(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(deps, Dep{Path: "example.com/x/exportbundle/shim", Module: "exportbundle", Cgo: true}) {
		t.Fatalf("TrainingPath %v: want the cgo exportbundle package listed as such", deps)
	}
	err = CheckTrainingPath(deps)
	if err == nil || !strings.Contains(err.Error(), "module exportbundle") || !strings.Contains(err.Error(), "uses cgo") {
		t.Fatalf("want both refusals, got %v", err)
	}
}

// TestCheckTensorfileLeafAndForbiddenEdge: tensorfile imports no workspace module, and
// exportbundle does not import checkpoint (their shared codec is tensorfile's).
func TestCheckTensorfileLeafAndForbiddenEdge(t *testing.T) {
	ok := map[string][]string{"checkpoint": {"tensorfile"}, "exportbundle": {"tensorfile"}, "tensorfile": nil}
	if err := Check(ok); err != nil {
		t.Fatalf("modules importing tensorfile were refused: %v", err)
	}
	err := Check(map[string][]string{"tensorfile": {"markers"}, "markers": nil})
	if err == nil || !strings.Contains(err.Error(), "module tensorfile imports markers") {
		t.Fatalf("want tensorfile -> markers refused, got %v", err)
	}
	err = Check(map[string][]string{"exportbundle": {"checkpoint", "tensorfile"}, "checkpoint": {"tensorfile"}, "tensorfile": nil})
	if err == nil || !strings.Contains(err.Error(), "module exportbundle imports checkpoint") || !strings.Contains(err.Error(), "import tensorfile") {
		t.Fatalf("want exportbundle -> checkpoint refused with the fix, got %v", err)
	}
}

// TestWorkspaceTensorfileEdges checks the real workspace: tensorfile is a leaf, checkpoint and
// exportbundle import it, and exportbundle does not import checkpoint.
func TestWorkspaceTensorfileEdges(t *testing.T) {
	g, err := Collect(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if deps, ok := g["tensorfile"]; !ok || len(deps) != 0 {
		t.Errorf("tensorfile imports %v (present: %v); want no workspace module", deps, ok)
	}
	has := func(m, dep string) bool {
		for _, d := range g[m] {
			if d == dep {
				return true
			}
		}
		return false
	}
	if has("exportbundle", "checkpoint") {
		t.Error("exportbundle imports checkpoint")
	}
	for _, m := range []string{"checkpoint", "exportbundle"} {
		if !has(m, "tensorfile") {
			t.Errorf("%s does not import tensorfile: %v", m, g[m])
		}
	}
	if err := Check(g); err != nil {
		t.Errorf("the workspace breaks the layering: %v", err)
	}
}

// TestTestSupportIsForTestsOnly: a program's import of core/coretest is named; a test's, which go
// list reports apart, is not seen; and this workspace keeps the rule.
func TestTestSupportIsForTestsOnly(t *testing.T) {
	listing := "x/cmd/tool fmt github.com/nitro-go/nitro/core/coretest\nx/cmd/other fmt\nx/empty\n"
	got := testSupportImports(listing)
	if len(got) != 1 || !strings.Contains(got[0], "package x/cmd/tool imports github.com/nitro-go/nitro/core/coretest outside its tests") {
		t.Fatalf("want x/cmd/tool's import named, got %q", got)
	}
	if err := CheckTestSupport(filepath.Join("..", "..")); err != nil {
		t.Error(err)
	}
	deps, err := TrainingPath(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps {
		if testSupport[d.Path] {
			t.Errorf("the training path holds the test-support package %s", d.Path)
		}
	}
}

// Only cmd and integration import mpi (cgo): a library module, core included, is refused.
func TestCheckKeepsMPIAtTheTop(t *testing.T) {
	err := Check(map[string][]string{"core": {"mpi"}, "mpi": nil})
	if err == nil || !strings.Contains(err.Error(), "module core imports mpi (cgo, Open MPI): only cmd and integration may") {
		t.Errorf("core -> mpi: %v", err)
	}
	if err := Check(map[string][]string{"cmd": {"mpi", "core"}, "integration": {"mpi"}, "core": nil, "mpi": nil}); err != nil {
		t.Errorf("cmd, integration -> mpi: %v", err)
	}
	if err := CheckTrainingPath([]Dep{{Path: "x/mpi", Module: "mpi"}}); err == nil || !strings.Contains(err.Error(), "holds x/mpi (module mpi)") {
		t.Errorf("mpi on the training path: %v", err)
	}
}

func TestUserCodeImportsNoEngine(t *testing.T) {
	got := userCodeImports("github.com/nitro-go/nitro/cmd/examples/gan github.com/nitro-go/nitro/core github.com/nitro-go/nitro/engine\ngithub.com/nitro-go/nitro/cmd/examples/mnist github.com/nitro-go/nitro/hooks")
	if len(got) != 1 || !strings.Contains(got[0], "examples/gan imports github.com/nitro-go/nitro/engine") || !strings.Contains(got[0], "hooks.ManualStep") {
		t.Fatalf("userCodeImports = %q, want one problem naming gan, the engine and the fix", got)
	}
	if err := CheckUserCode("../.."); err != nil {
		t.Fatalf("this workspace: %v", err)
	}
}
