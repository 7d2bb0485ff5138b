package backend_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/core/backend"
)

// isolate points every search location at empty folders.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", "")
	t.Setenv(backend.EnvPluginDir, "")
	t.Setenv(backend.EnvBackend, "")
	t.Chdir(dir)
	if p, _ := backend.FindPlugin(); p != "" {
		t.Skipf("a plugin is reachable beside the test executable (%s); cannot isolate", p)
	}
	return dir
}

func TestForcedXLAMissingIsAnErrorNamingTheSearch(t *testing.T) {
	dir := isolate(t)
	_, err := backend.Resolve(backend.XLA)
	if err == nil {
		t.Fatal("forced xla with no plugin must fail, not fall back")
	}
	for _, want := range []string{"no PJRT plugin", filepath.Join(dir, ".nitro", "pjrt"), "make setup", "--backend go"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestEnvForcesBackend(t *testing.T) {
	isolate(t)
	t.Setenv(backend.EnvBackend, "xla")
	_, err := backend.Resolve("")
	if err == nil || !strings.Contains(err.Error(), "$NITRO_BACKEND") {
		t.Fatalf("want an error naming $NITRO_BACKEND as the source, got %v", err)
	}
	t.Setenv(backend.EnvBackend, "go")
	r, err := backend.Resolve("")
	if err != nil || r.Name != backend.Go || !strings.Contains(r.Reason, "forced by $NITRO_BACKEND") {
		t.Fatalf("got %+v, %v", r, err)
	}
	// The argument wins over the environment.
	if _, err := backend.Resolve("xla"); err == nil || !strings.Contains(err.Error(), "the caller") {
		t.Fatalf("argument should win over env: %v", err)
	}
}

func TestAutoFallsBackToGoWithReason(t *testing.T) {
	isolate(t)
	r, err := backend.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != backend.Go || !strings.Contains(r.Reason, "no XLA CPU PJRT plugin found") || !strings.Contains(r.String(), "backend: go") {
		t.Fatalf("got %q", r)
	}
}

func TestUnknownBackend(t *testing.T) {
	_, err := backend.Resolve("tpu9000")
	if err == nil || !strings.Contains(err.Error(), `"tpu9000"`) || !strings.Contains(err.Error(), `"xla"`) {
		t.Fatalf("got %v", err)
	}
}

func TestFindPluginSearchOrder(t *testing.T) {
	dir := isolate(t)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, backend.PluginFile), []byte("x"), 0o644)
	}
	t.Setenv(backend.EnvPluginDir, b)
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", a)
	if p, _ := backend.FindPlugin(); p != filepath.Join(a, backend.PluginFile) {
		t.Fatalf("PJRT_PLUGIN_LIBRARY_PATH must come first, got %s", p)
	}
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", "")
	if p, _ := backend.FindPlugin(); p != filepath.Join(b, backend.PluginFile) {
		t.Fatalf("NITRO_PJRT_DIR second, got %s", p)
	}
}
