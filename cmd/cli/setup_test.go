package cli_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/core/backend"
)

// repoRoot is the repository root, taken before any test changes directory.
var repoRoot = must(filepath.Abs(filepath.Join("..", "..")))

// isolatePlugins points every plugin search location, the user cache folder included, at empty
// temporary folders, and returns the temporary root.
func isolatePlugins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", "")
	t.Setenv(backend.EnvPluginDir, "")
	t.Setenv(backend.EnvBackend, "")
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "usercache")) // os.UserCacheDir on Linux
	t.Chdir(dir)
	if p, _ := backend.FindPlugin(); p != "" {
		t.Skipf("a plugin is reachable beside the test executable (%s); cannot isolate", p)
	}
	return dir
}

func needPinnedPlatform(t *testing.T) {
	t.Helper()
	if here := runtime.GOOS + "/" + runtime.GOARCH; here != backend.Pinned().Platform {
		t.Skipf("the pinned wheel is for %s, this is %s", backend.Pinned().Platform, here)
	}
}

// cachedWheel is the real pinned wheel `make setup` leaves in the repository's .nitro/cache.
func cachedWheel(t *testing.T) string {
	t.Helper()
	p := filepath.Join(repoRoot, ".nitro", "cache", backend.Pinned().File)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("the pinned wheel is not cached at %s (run `make setup` first): %v", p, err)
	}
	if testing.Short() {
		t.Skip("extracts a 250 MB plugin; skipped with -short")
	}
	return p
}

// syntheticWheel writes a small zip holding members (name -> content) and returns its path.
func syntheticWheel(t *testing.T, members map[string]string) string {
	t.Helper()
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for name, content := range members {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(content))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), backend.Pinned().File)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// listDir names what a folder holds, hidden files included ("" when it does not exist).
func listDir(t *testing.T, dir string) string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// checkInstalled: the plugin and its stamp, nothing else, and the plugin is the wheel's member.
func checkInstalled(t *testing.T, dir string) {
	t.Helper()
	if got, want := listDir(t, dir), backend.StampFile+" "+backend.PluginFile; got != want {
		t.Fatalf("%s holds %q, want %q (no temporary files left)", dir, got, want)
	}
	st, err := os.Stat(filepath.Join(dir, backend.PluginFile))
	if err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Fatalf("plugin missing or not executable: %v %v", st, err)
	}
	if ref, err := os.Stat(filepath.Join(repoRoot, ".nitro", "pjrt", backend.PluginFile)); err == nil && ref.Size() != st.Size() {
		t.Errorf("plugin is %d bytes, the one `make setup` installed is %d", st.Size(), ref.Size())
	}
	stamp, _ := os.ReadFile(filepath.Join(dir, backend.StampFile))
	if string(stamp) != backend.Pinned().SHA256+"\n" {
		t.Fatalf("stamp holds %q, want the wheel's sha256", stamp)
	}
}

// TestSetupFromWheel installs offline from the cached wheel into the default folder, the user
// cache, which the resolver then finds; a second run has nothing to do.
func TestSetupFromWheel(t *testing.T) {
	needPinnedPlatform(t)
	root := isolatePlugins(t)
	wheel := cachedWheel(t)
	code, out, errs := runCLI("setup", "--wheel", wheel)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	dir := filepath.Join(root, "usercache", "nitro", "pjrt")
	target := filepath.Join(dir, backend.PluginFile)
	if !strings.Contains(out, "installed xla-cpu-pjrt 0.0.1 at "+target) || strings.Contains(out, "note:") {
		t.Fatalf("output: %q", out)
	}
	checkInstalled(t, dir)
	if p, _ := backend.FindPlugin(); p != target {
		t.Fatalf("the resolver should find the plugin `nitro setup` installed, got %q", p)
	}

	code, out, errs = runCLI("setup", "--wheel", wheel)
	if code != 0 || !strings.Contains(out, "already installed at "+target) {
		t.Fatalf("second run: exit %d: %s%s", code, out, errs)
	}
	// A stamp for another wheel means the install is not current: install again.
	os.WriteFile(filepath.Join(dir, backend.StampFile), []byte("0123\n"), 0o644)
	code, out, errs = runCLI("setup", "--wheel", wheel)
	if code != 0 || !strings.Contains(out, "installed xla-cpu-pjrt") || strings.Contains(out, "already") {
		t.Fatalf("stale stamp: exit %d: %s%s", code, out, errs)
	}
	checkInstalled(t, dir)
}

// TestSetupDownloads fetches through a PyPI-like JSON API (one that serves only the project's
// JSON, not the release's), showing progress, into a folder chosen with --dir.
func TestSetupDownloads(t *testing.T) {
	needPinnedPlatform(t)
	root := isolatePlugins(t)
	wheel := cachedWheel(t)
	srv := fakeIndex(t, wheel, "")
	dir := filepath.Join(root, "chosen")
	code, out, errs := runCLI("setup", "--index", srv.URL+"/pypi", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	for _, want := range []string{"downloading " + backend.Pinned().File, "/ 60.5 MiB (50%)", "60.5 / 60.5 MiB (100%)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress on stderr lacks %q:\n%s", want, errs)
		}
	}
	// --dir outside the search: the output says how to make nitro find it.
	if !strings.Contains(out, "installed xla-cpu-pjrt 0.0.1 at "+filepath.Join(dir, backend.PluginFile)) || !strings.Contains(out, "NITRO_PJRT_DIR="+dir) {
		t.Fatalf("output: %q", out)
	}
	checkInstalled(t, dir)
}

// fakeIndex serves the project JSON listing wheel under the pinned file name with sha (the
// pin when empty), and 404 for the release JSON.
func fakeIndex(t *testing.T, wheel, sha string) *httptest.Server {
	t.Helper()
	w := backend.Pinned()
	if sha == "" {
		sha = w.SHA256
	}
	st, err := os.Stat(wheel)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/pypi/"+w.Package+"/json", func(rw http.ResponseWriter, r *http.Request) {
		file := map[string]any{"filename": w.File, "url": "/files/" + w.File, "size": st.Size(), "digests": map[string]string{"sha256": sha}}
		json.NewEncoder(rw).Encode(map[string]any{"releases": map[string]any{w.Version: []any{file}, "0.0.0": []any{}}})
	})
	mux.HandleFunc("/files/"+w.File, func(rw http.ResponseWriter, r *http.Request) { http.ServeFile(rw, r, wheel) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestSetupRejectsWrongWheels: a wheel whose sha256 is not the pin is refused, whether given,
// downloaded or listed so by the registry, and nothing is left behind.
func TestSetupRejectsWrongWheels(t *testing.T) {
	needPinnedPlatform(t)
	root := isolatePlugins(t)
	bad := syntheticWheel(t, map[string]string{backend.Pinned().Member: "not a plugin"})
	sum := sha256.Sum256(must(os.ReadFile(bad)))
	badSHA := hex.EncodeToString(sum[:])
	dir := filepath.Join(root, "dest")

	code, _, errs := runCLI("setup", "--wheel", bad, "--dir", dir)
	if code != 1 || !strings.Contains(errs, "has sha256 "+badSHA) || !strings.Contains(errs, backend.Pinned().SHA256) || !strings.Contains(errs, "nothing was installed") {
		t.Fatalf("--wheel: exit %d: %s", code, errs)
	}
	if got := listDir(t, dir); got != "" {
		t.Fatalf("a refused wheel left %q", got)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Fatalf("the user's wheel file must not be deleted: %v", err)
	}

	// The registry lists the pinned sha but serves other bytes.
	srv := fakeIndex(t, bad, "")
	code, _, errs = runCLI("setup", "--index", srv.URL+"/pypi", "--dir", dir)
	if code != 1 || !strings.Contains(errs, "the downloaded wheel") || !strings.Contains(errs, badSHA) {
		t.Fatalf("download: exit %d: %s", code, errs)
	}
	if got := listDir(t, dir); got != "" {
		t.Fatalf("a refused download left %q in %s", got, dir)
	}

	// The registry lists another sha: refused before downloading.
	srv = fakeIndex(t, bad, badSHA)
	code, _, errs = runCLI("setup", "--index", srv.URL+"/pypi", "--dir", dir)
	if code != 1 || !strings.Contains(errs, "the registry's listing") || strings.Contains(errs, "downloading") {
		t.Fatalf("listing: exit %d: %s", code, errs)
	}
	if got := listDir(t, dir); got != "" {
		t.Fatalf("left %q in %s", got, dir)
	}
}

func TestSetupUsage(t *testing.T) {
	code, out, errs := runCLI("setup", "--help")
	if code != 0 || !strings.Contains(errs, "usage: nitro setup") || !strings.Contains(errs, "xla-cpu-pjrt==0.0.1") || !strings.Contains(errs, "-wheel") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	code, _, errs = runCLI("setup", "extra")
	if code != 1 || !strings.Contains(errs, "no arguments") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, out, _ := runCLI("help"); !strings.Contains(out, "setup [--dir DIR]") {
		t.Fatalf("help lacks setup: %s", out)
	}
}

// bare is an experiment with no hooks: core.New refuses it, after the backend is resolved.
type bare struct {
	Width int `nitro:"graphconst" default:"8"`
}

func init() { cli.Register[bare]("bare", "no hooks (tests the output before core.New)") }

// TestFallbackWarningComesFirst: with no plugin anywhere, train says on stderr, before anything
// else, that it fell back to pure Go and how to fix it; a chosen pure-Go backend is not warned of.
func TestFallbackWarningComesFirst(t *testing.T) {
	isolatePlugins(t)
	code, out, errs := runCLI("train", "bare")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q: %s", code, out, errs)
	}
	if !strings.HasPrefix(errs, "nitro: warning: no XLA CPU PJRT plugin found") {
		t.Fatalf("stderr must start with the warning: %q", errs)
	}
	for _, want := range []string{"pure-Go", "`nitro setup`", "`make setup` in the repository"} {
		if !strings.Contains(errs, want) {
			t.Errorf("warning lacks %q: %q", want, errs)
		}
	}
	if _, _, errs := runCLI("train", "bare", "--backend", "go"); strings.Contains(errs, "warning") {
		t.Fatalf("--backend go is a choice, not a fallback: %q", errs)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
