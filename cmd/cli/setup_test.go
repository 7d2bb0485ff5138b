package cli_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/internal/prereq"
)

// repoRoot is the repository root, taken before any test changes directory.
var repoRoot = must(filepath.Abs(filepath.Join("..", "..")))

// isolatePlugins points every plugin search location, the user cache folder included, at empty
// temporary folders, and returns the temporary root. The one place it cannot move is the test
// binary's own folder: a plugin installed above it (under GOTMPDIR or the system temp folder)
// would make every test here check the wrong thing, so that fails with the fix.
func isolatePlugins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv(backend.EnvPluginPath, "")
	t.Setenv(backend.EnvPluginDir, "")
	t.Setenv(backend.EnvBackend, "")
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "usercache")) // os.UserCacheDir on Linux
	t.Chdir(dir)
	if p, searched, err := backend.FindPlugin(); p != "" || err != nil {
		t.Fatalf("the plugin search cannot be isolated: it still finds %q (%v) in %v, a .nitro/pjrt above the test binary; remove it, or set GOTMPDIR to a folder with none above it", p, err, searched)
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
		prereq.PinnedWheel.Absent(t, err)
	}
	if testing.Short() {
		t.Skip("extracts a 250 MB plugin; skipped with -short")
	}
	return p
}

// fakePin is a small synthetic plugin wheel for this platform, pinned by its own sha256, made the
// pin `nitro setup` installs until the test ends; it returns the pin, the wheel's path and the
// member's bytes. The member starts as a shared library does, so the plugin search takes it, and
// is random and stored, not compressed, 8 MiB: enough that one 32 KiB read is under 1% of the
// download, so the progress line printed on crossing 50% shows exactly 50%.
func fakePin(t *testing.T) (backend.Wheel, string, []byte) {
	t.Helper()
	w, path, plugin := fakeWheel(t, "synthetic-pjrt", 1)
	t.Cleanup(cli.SetPinnedForTest(w))
	return w, path, plugin
}

// fakeWheel writes the synthetic plugin wheel fakePin describes for project pkg, its member's
// bytes drawn from the random seed, and returns its pin, its path and the member's bytes.
func fakeWheel(t *testing.T, pkg string, seed uint64) (backend.Wheel, string, []byte) {
	t.Helper()
	plugin := make([]byte, 8<<20)
	r := rand.New(rand.NewPCG(seed, 2))
	for i := range plugin {
		plugin[i] = byte(r.Uint32())
	}
	copy(plugin, "\x7fELF")
	mod := strings.ReplaceAll(pkg, "-", "_")
	w := backend.Wheel{Package: pkg, Version: "0.1", File: mod + "-0.1-py3-none-any.whl",
		Member: mod + "/plugin.so", Platform: runtime.GOOS + "/" + runtime.GOARCH}
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	f, err := z.CreateHeader(&zip.FileHeader{Name: w.Member, Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	f.Write(plugin)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b.Bytes())
	w.SHA256 = hex.EncodeToString(sum[:])
	path := filepath.Join(t.TempDir(), w.File)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return w, path, plugin
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

// checkInstalled: the plugin and its stamp, nothing else, the plugin executable and holding want
// (nil: as many bytes as the plugin `make setup` installed), the stamp holding w's sha256.
func checkInstalled(t *testing.T, dir string, w backend.Wheel, want []byte) {
	t.Helper()
	if got, want := listDir(t, dir), backend.StampFile+" "+backend.PluginFile; got != want {
		t.Fatalf("%s holds %q, want %q (no temporary files left)", dir, got, want)
	}
	st, err := os.Stat(filepath.Join(dir, backend.PluginFile))
	if err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Fatalf("plugin missing or not executable: %v %v", st, err)
	}
	if want != nil {
		if got, err := os.ReadFile(filepath.Join(dir, backend.PluginFile)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("the plugin is not the wheel's member: %d bytes, want %d (%v)", len(got), len(want), err)
		}
	} else if ref, err := os.Stat(filepath.Join(repoRoot, ".nitro", "pjrt", backend.PluginFile)); err == nil && ref.Size() != st.Size() {
		t.Errorf("plugin is %d bytes, the one `make setup` installed is %d", st.Size(), ref.Size())
	}
	stamp, _ := os.ReadFile(filepath.Join(dir, backend.StampFile))
	if string(stamp) != w.SHA256+"\n" {
		t.Fatalf("stamp holds %q, want the wheel's sha256", stamp)
	}
}

// TestSetupFromWheel installs offline from a wheel (a synthetic one pinned for the test) into the
// default folder, the user cache, which the resolver then finds; a second run has nothing to do,
// and a stamp for another wheel makes it install again.
func TestSetupFromWheel(t *testing.T) {
	root := isolatePlugins(t)
	w, wheel, plugin := fakePin(t)
	code, out, errs := runCLI("setup", "--wheel", wheel)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	dir := filepath.Join(root, "usercache", "nitro", "pjrt")
	target := filepath.Join(dir, backend.PluginFile)
	if !strings.Contains(out, "installed "+w.Package+" "+w.Version+" at "+target) || strings.Contains(out, "note:") {
		t.Fatalf("output: %q", out)
	}
	checkInstalled(t, dir, w, plugin)
	if p, _, err := backend.FindPlugin(); p != target {
		t.Fatalf("the resolver should find the plugin `nitro setup` installed, got %q (%v)", p, err)
	}

	code, out, errs = runCLI("setup", "--wheel", wheel)
	if code != 0 || !strings.Contains(out, "already installed at "+target) {
		t.Fatalf("second run: exit %d: %s%s", code, out, errs)
	}
	// A stamp for another wheel means the install is not current: install again.
	os.WriteFile(filepath.Join(dir, backend.StampFile), []byte("0123\n"), 0o644)
	code, out, errs = runCLI("setup", "--wheel", wheel)
	if code != 0 || !strings.Contains(out, "installed "+w.Package) || strings.Contains(out, "already") {
		t.Fatalf("stale stamp: exit %d: %s%s", code, out, errs)
	}
	checkInstalled(t, dir, w, plugin)
	// A named plugin path nitro would refuse: the note says so rather than claiming success.
	t.Setenv(backend.EnvPluginPath, filepath.Join(root, "gone.so"))
	code, out, errs = runCLI("setup", "--wheel", wheel)
	if code != 0 || !strings.Contains(out, "already installed") || !strings.Contains(out, "note: nitro run from here stops at a place it refuses") || !strings.Contains(out, "$PJRT_PLUGIN_LIBRARY_PATH entry "+filepath.Join(root, "gone.so")) {
		t.Fatalf("refused entry: exit %d: %s%s", code, out, errs)
	}
}

// TestSetupRealPinnedWheel installs the real pinned wheel (from .nitro/cache, where `make setup`
// keeps it) and the plugin is as large as the one `make setup` extracted.
func TestSetupRealPinnedWheel(t *testing.T) {
	needPinnedPlatform(t)
	root := isolatePlugins(t)
	wheel := cachedWheel(t)
	dir := filepath.Join(root, "real")
	code, out, errs := runCLI("setup", "--wheel", wheel, "--dir", dir)
	if code != 0 || !strings.Contains(out, "installed "+backend.Pinned().Package+" "+backend.Pinned().Version+" at "+filepath.Join(dir, backend.PluginFile)) {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	checkInstalled(t, dir, backend.Pinned(), nil)
}

// TestSetupDownloads fetches through a PyPI-like JSON API (one that serves only the project's
// JSON, not the release's), showing progress, into a folder chosen with --dir.
func TestSetupDownloads(t *testing.T) {
	root := isolatePlugins(t)
	w, wheel, plugin := fakePin(t)
	srv := fakeIndex(t, w, wheel, "")
	dir := filepath.Join(root, "chosen")
	code, out, errs := runCLI("setup", "--index", srv.URL+"/pypi", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	st, _ := os.Stat(wheel)
	mib := float64(st.Size()) / (1 << 20)
	for _, want := range []string{"downloading " + w.File, fmt.Sprintf("/ %.1f MiB (50%%)", mib), fmt.Sprintf("%.1f / %.1f MiB (100%%)", mib, mib)} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress on stderr lacks %q:\n%s", want, errs)
		}
	}
	// --dir outside the search: the output says how to make nitro find it.
	if !strings.Contains(out, "installed "+w.Package+" "+w.Version+" at "+filepath.Join(dir, backend.PluginFile)) || !strings.Contains(out, "NITRO_PJRT_DIR="+dir) {
		t.Fatalf("output: %q", out)
	}
	checkInstalled(t, dir, w, plugin)
}

// fakeIndex serves the project JSON listing wheel under w's file name with sha (w's when empty),
// and 404 for the release JSON.
func fakeIndex(t *testing.T, w backend.Wheel, wheel, sha string) *httptest.Server {
	t.Helper()
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
	srv := fakeIndex(t, backend.Pinned(), bad, "")
	code, _, errs = runCLI("setup", "--index", srv.URL+"/pypi", "--dir", dir)
	if code != 1 || !strings.Contains(errs, "the downloaded wheel") || !strings.Contains(errs, badSHA) {
		t.Fatalf("download: exit %d: %s", code, errs)
	}
	if got := listDir(t, dir); got != "" {
		t.Fatalf("a refused download left %q in %s", got, dir)
	}

	// The registry lists another sha: refused before downloading.
	srv = fakeIndex(t, backend.Pinned(), bad, badSHA)
	code, _, errs = runCLI("setup", "--index", srv.URL+"/pypi", "--dir", dir)
	if code != 1 || !strings.Contains(errs, "the registry's listing") || strings.Contains(errs, "downloading") {
		t.Fatalf("listing: exit %d: %s", code, errs)
	}
	if got := listDir(t, dir); got != "" {
		t.Fatalf("left %q in %s", got, dir)
	}
}

// TestSetupOtherPlugin: --plugin NAME installs that entry of the pin table (synthetic ones for the
// test) with the same sha256 check and stamp; the default installed over it replaces it, and an
// unknown name is refused with the names to choose from.
func TestSetupOtherPlugin(t *testing.T) {
	root := isolatePlugins(t)
	def, defWheel, defPlugin := fakePin(t)
	alt, altWheel, altPlugin := fakeWheel(t, "synthetic-alt", 3)
	t.Cleanup(cli.SetPinsForTest(map[string]backend.Wheel{backend.DefaultPlugin: def, alt.Package: alt}))
	dir := filepath.Join(root, "dest")
	target := filepath.Join(dir, backend.PluginFile)

	// The default's wheel is not the chosen plugin's: refused, nothing installed.
	code, _, errs := runCLI("setup", "--plugin", alt.Package, "--wheel", defWheel, "--dir", dir)
	if code != 1 || !strings.Contains(errs, "has sha256 "+def.SHA256) || !strings.Contains(errs, alt.SHA256) || !strings.Contains(errs, "nothing was installed") {
		t.Fatalf("wrong wheel: exit %d: %s", code, errs)
	}
	if got := listDir(t, dir); got != "" {
		t.Fatalf("a refused wheel left %q", got)
	}

	code, out, errs := runCLI("setup", "--plugin", alt.Package, "--wheel", altWheel, "--dir", dir)
	if code != 0 || !strings.Contains(out, "installed "+alt.Package+" "+alt.Version+" at "+target) {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	checkInstalled(t, dir, alt, altPlugin)
	code, out, errs = runCLI("setup", "--plugin", alt.Package, "--wheel", altWheel, "--dir", dir)
	if code != 0 || !strings.Contains(out, alt.Package+" 0.1 already installed at "+target) {
		t.Fatalf("second run: exit %d: %s%s", code, out, errs)
	}

	// The stamp names the other plugin's wheel, so the default is not taken as installed.
	code, out, errs = runCLI("setup", "--wheel", defWheel, "--dir", dir)
	if code != 0 || !strings.Contains(out, "installed "+def.Package+" "+def.Version+" at "+target) || strings.Contains(out, "already") {
		t.Fatalf("default over it: exit %d: %s%s", code, out, errs)
	}
	checkInstalled(t, dir, def, defPlugin)

	code, _, errs = runCLI("setup", "--plugin", "no-such-plugin", "--dir", dir)
	if code != 1 || !strings.Contains(errs, `"no-such-plugin"`) || !strings.Contains(errs, sortedJoin(alt.Package, backend.DefaultPlugin)) {
		t.Fatalf("unknown plugin: exit %d: %s", code, errs)
	}
	checkInstalled(t, dir, def, defPlugin)
}

func TestSetupUsage(t *testing.T) {
	code, out, errs := runCLI("setup", "--help")
	if code != 0 || !strings.Contains(errs, "usage: nitro setup") || !strings.Contains(errs, backend.Pinned().Requirement()) || !strings.Contains(errs, "-wheel") ||
		!strings.Contains(errs, "--plugin NAME") || !strings.Contains(errs, "one of: "+sortedJoin(pinNames()...)+".") {
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

// sortedJoin is names as the setup command lists them: sorted, comma-separated.
func sortedJoin(names ...string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func pinNames() []string {
	var names []string
	for name := range backend.Pins() {
		names = append(names, name)
	}
	return names
}
