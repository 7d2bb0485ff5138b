package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckRefusesCoreImport(t *testing.T) {
	err := Check(map[string][]string{"markers": {"core"}, "core": {"markers"}, "cmd": {"core"}})
	if err == nil || !strings.Contains(err.Error(), "module markers imports core") {
		t.Fatalf("want markers->core refused, got %v", err)
	}
	if err := Check(map[string][]string{"cmd": {"core"}, "integration": {"core", "cmd"}, "core": {"markers"}, "markers": nil}); err != nil {
		t.Fatalf("a well layered graph was refused: %v", err)
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
