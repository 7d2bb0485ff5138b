package cli

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
)

// testInstaller installs a synthetic wheel (members name -> content) pinned by its own sha256.
func testInstaller(t *testing.T, members map[string]string) (*installer, *bytes.Buffer) {
	t.Helper()
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for name, content := range members {
		w, _ := z.Create(name)
		w.Write([]byte(content))
	}
	z.Close()
	tmp := t.TempDir()
	path := filepath.Join(tmp, "synthetic-0.1-py3-none-any.whl")
	os.WriteFile(path, b.Bytes(), 0o644)
	sum := sha256.Sum256(b.Bytes())
	var out bytes.Buffer
	return &installer{
		wheel: backend.Wheel{Package: "synthetic", Version: "0.1", File: filepath.Base(path), SHA256: hex.EncodeToString(sum[:]),
			Member: "lib/plugin.so", Platform: runtime.GOOS + "/" + runtime.GOARCH},
		dir: filepath.Join(tmp, "dest"), wheelFile: path, stdout: &out, stderr: &out,
	}, &out
}

func TestInstallMissingMemberLeavesNothing(t *testing.T) {
	in, _ := testInstaller(t, map[string]string{"lib/other.so": "x"})
	err := in.install(context.Background())
	if err == nil || !strings.Contains(err.Error(), "has no member lib/plugin.so") || !strings.Contains(err.Error(), "nothing was installed") {
		t.Fatalf("got %v", err)
	}
	if es, _ := os.ReadDir(in.dir); len(es) != 0 {
		t.Fatalf("left %v", es)
	}
}

func TestInstallSyntheticAndIdempotent(t *testing.T) {
	in, out := testInstaller(t, map[string]string{"lib/plugin.so": "plugin bytes", "other": "y"})
	if err := in.install(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(in.dir, backend.PluginFile))
	if err != nil || string(got) != "plugin bytes" {
		t.Fatalf("plugin %q, %v", got, err)
	}
	if es, _ := os.ReadDir(in.dir); len(es) != 2 {
		t.Fatalf("want the plugin and its stamp only, got %v", es)
	}
	out.Reset()
	in.wheelFile = "/nonexistent" // not even read: the stamp says it is installed
	if err := in.install(context.Background()); err != nil || !strings.Contains(out.String(), "already installed") {
		t.Fatalf("%v: %s", err, out)
	}
	in.force = true
	if err := in.install(context.Background()); err == nil {
		t.Fatal("--force must reinstall (and so read the missing wheel)")
	}
	if got, _ := os.ReadFile(filepath.Join(in.dir, backend.PluginFile)); string(got) != "plugin bytes" {
		t.Fatal("a failed reinstall must leave the previous plugin")
	}
}

func TestInstallWrongPlatform(t *testing.T) {
	in, _ := testInstaller(t, map[string]string{"lib/plugin.so": "x"})
	in.wheel.Platform = "plan9/mips"
	if err := in.install(context.Background()); err == nil || !strings.Contains(err.Error(), "built for plan9/mips") || !strings.Contains(err.Error(), "PJRT_PLUGIN_LIBRARY_PATH") {
		t.Fatalf("got %v", err)
	}
}
