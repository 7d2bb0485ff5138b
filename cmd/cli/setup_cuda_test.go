package cli_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/internal/prereq"
)

// fakeLibWheel writes a small NVIDIA-style library wheel (members under nvidia/, plus a
// dist-info that must not be unpacked) into dir, and returns its pin.
func fakeLibWheel(t *testing.T, dir, pkg string, members map[string]string) backend.Wheel {
	t.Helper()
	mod := strings.ReplaceAll(pkg, "-", "_")
	w := backend.Wheel{Package: pkg, Version: "1.0", File: mod + "-1.0-py3-none-manylinux_2_27_x86_64.whl",
		Member: backend.NVIDIALibsDir + "/", Platform: runtime.GOOS + "/" + runtime.GOARCH}
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	members[mod+"-1.0.dist-info/METADATA"] = "Name: " + pkg
	for name, content := range members {
		f, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(content))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b.Bytes())
	w.SHA256 = hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(dir, w.File), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestSetupCUDAFromWheels: `nitro setup --cuda --wheels DIR` installs the CUDA plugin (a synthetic
// wheel pinned for the test) beside where the CPU plugin goes, unpacks the library wheels into
// ../nvidia in their own layout, links the libraries the plugin's RPATH misses, and the resolver
// then finds that plugin; a second run has nothing to do; a wheel that is not the pinned file is
// refused and leaves the install as it was.
func TestSetupCUDAFromWheels(t *testing.T) {
	root := isolatePlugins(t)
	plugin, pluginPath, pluginBytes := fakeWheel(t, "fake-cuda-pjrt", 7)
	wheels := filepath.Dir(pluginPath)
	libs := []backend.Wheel{
		fakeLibWheel(t, wheels, "fake-cuda-runtime", map[string]string{
			"nvidia/__init__.py": "", "nvidia/cuda_runtime/lib/libcudart.so.12": "cudart", "nvidia/cuda_runtime/include/x.h": "h"}),
		fakeLibWheel(t, wheels, "fake-cusolver", map[string]string{"nvidia/cusolver/lib/libcusolver.so.11": "cusolver"}),
	}
	t.Cleanup(cli.SetCUDAPinsForTest(plugin, libs))

	code, out, errs := runCLI("setup", "--cuda", "--wheels", wheels)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	cache := filepath.Join(root, "usercache", "nitro")
	target := filepath.Join(cache, "pjrt", backend.CUDAPluginFile)
	if got, err := os.ReadFile(target); err != nil || !bytes.Equal(got, pluginBytes) {
		t.Fatalf("the CUDA plugin is not the wheel's member (%d bytes, %v)", len(got), err)
	}
	if got, want := listDir(t, filepath.Join(cache, "pjrt")), backend.CUDAStampFile+" "+backend.CUDAPluginFile; got != want {
		t.Fatalf("pjrt/ holds %q, want %q", got, want)
	}
	nv := filepath.Join(cache, backend.NVIDIALibsDir)
	if got, want := listDir(t, nv), ".fake-cuda-runtime.installed .fake-cusolver.installed __init__.py cuda_runtime cusolver"; got != want {
		t.Fatalf("nvidia/ holds %q, want %q (no dist-info, no temporary folders)", got, want)
	}
	for rel, want := range map[string]string{"cuda_runtime/lib/libcudart.so.12": "cudart", "cuda_runtime/include/x.h": "h",
		"cusolver/lib/libcusolver.so.11": "cusolver", "cuda_runtime/lib/libcusolver.so.11": "cusolver"} {
		if got, err := os.ReadFile(filepath.Join(nv, rel)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", rel, got, err, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(nv, "cuda_runtime", "lib", "libcusolver.so.11")); err != nil || l != "../../cusolver/lib/libcusolver.so.11" {
		t.Errorf("libcusolver.so.11 in cuda_runtime/lib must be a relative link into cusolver/lib: %q, %v", l, err)
	}
	if st, err := os.Stat(filepath.Join(nv, "cuda_runtime", "lib", "libcudart.so.12")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("a library must be executable: %v, %v", st, err)
	}
	if p, _, _ := backend.FindCUDAPlugin(); p != target {
		t.Fatalf("the resolver should find the CUDA plugin `nitro setup --cuda` installed, got %q", p)
	}

	code, out, errs = runCLI("setup", "--cuda", "--wheels", wheels)
	if code != 0 || strings.Count(out, "already installed") != 3 || strings.Contains(out, "pjrt: installed") {
		t.Fatalf("second run must find all three installed: exit %d: %s%s", code, out, errs)
	}

	// A library wheel that is not the pinned file: refused, the install left as it was.
	os.WriteFile(filepath.Join(wheels, libs[1].File), []byte("PK not the pinned wheel"), 0o644)
	code, out, errs = runCLI("setup", "--cuda", "--force", "--wheels", wheels)
	if code == 0 || !strings.Contains(errs, "has sha256") || !strings.Contains(errs, libs[1].SHA256) {
		t.Fatalf("a tampered wheel must be refused naming the pin: exit %d: %s%s", code, out, errs)
	}
	if got, _ := os.ReadFile(filepath.Join(nv, "cusolver", "lib", "libcusolver.so.11")); string(got) != "cusolver" {
		t.Fatalf("a refused wheel must leave the installed library: %q", got)
	}
	if got := listDir(t, nv); strings.Contains(got, ".unpack-") {
		t.Fatalf("temporary folder left: %s", got)
	}
}

// TestSetupCUDAThenResolveIsNoSilentCPU: with the CPU plugin and a CUDA plugin installed, the
// resolver takes the CUDA one, and one that cannot start is an error, never the CPU plugin.
func TestSetupCUDAThenResolveIsNoSilentCPU(t *testing.T) {
	cpu := prereq.Plugin(t) // before isolating: the repository's plugin, from the real search
	root := isolatePlugins(t)
	user := filepath.Join(root, "usercache", "nitro", "pjrt")
	os.MkdirAll(user, 0o755)
	if err := os.Symlink(cpu, filepath.Join(user, backend.PluginFile)); err != nil {
		t.Fatal(err)
	}
	plugin, pluginPath, _ := fakeWheel(t, "fake-cuda-pjrt", 8)
	wheels := filepath.Dir(pluginPath)
	lib := fakeLibWheel(t, wheels, "fake-cuda-runtime", map[string]string{"nvidia/cuda_runtime/lib/libcudart.so.12": "x"})
	t.Cleanup(cli.SetCUDAPinsForTest(plugin, []backend.Wheel{lib}))
	if code, out, errs := runCLI("setup", "--cuda", "--wheels", wheels); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	_, err := backend.Resolve("")
	if err == nil {
		t.Fatal("a CUDA plugin that does not start must be an error")
	}
	// The synthetic plugin is no library, so gopjrt cannot even open it: "does not load".
	for _, want := range []string{"backend cuda", "does not load", "nitro setup --cuda --force", "NITRO_BACKEND=xla"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if errors.Is(err, backend.ErrNoCUDADevice) {
		t.Errorf("a file that does not open is not a missing device: %v", err)
	}
	if r, err := backend.Resolve("xla"); err != nil || r.Plugin != filepath.Join(user, backend.PluginFile) {
		t.Fatalf("the CPU plugin beside it must still be had by choice (NITRO_BACKEND=xla): %v, %v", r, err)
	}
}

func TestSetupCUDARefusesPluginFlags(t *testing.T) {
	isolatePlugins(t)
	code, _, errs := runCLI("setup", "--cuda", "--plugin", "xla-cpu-pjrt")
	if code == 0 || !strings.Contains(errs, "--cuda installs the pinned CUDA plugin jax-cuda12-pjrt==0.11.2") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
