package backend_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/internal/prereq"
)

// isolate points every search location at empty folders, the executable's included.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv(backend.EnvPluginPath, "")
	t.Setenv(backend.EnvPluginDir, "")
	t.Setenv(backend.EnvBackend, "")
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "usercache")) // os.UserCacheDir on Linux
	t.Chdir(dir)
	t.Cleanup(backend.SetExecutable(filepath.Join(dir, "bin", "nitro")))
	if p, searched, err := backend.FindPlugin(); p != "" || err != nil {
		t.Fatalf("isolated search still finds %q (%v) in %v", p, err, searched)
	}
	return dir
}

// fakePlugin writes a file that passes the search's library check (an ELF header) but is no plugin.
func fakePlugin(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("\x7fELF not really a library"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestForcedXLAMissingIsAnErrorNamingTheSearch(t *testing.T) {
	dir := isolate(t)
	_, err := backend.Resolve(backend.XLA)
	if err == nil {
		t.Fatal("forced xla with no plugin must fail, not fall back")
	}
	if !errors.Is(err, backend.ErrNoPlugin) {
		t.Errorf("the error must wrap ErrNoPlugin (tests tell absent from broken by it): %v", err)
	}
	for _, want := range []string{"no PJRT plugin", filepath.Join(dir, ".nitro", "pjrt"), filepath.Join(dir, "usercache", "nitro", "pjrt"), "nitro setup", "make setup", "--backend go"} {
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

// TestAutoFallbackWarns: falling back to pure Go on its own comes with a warning naming the fix;
// choosing pure Go does not.
func TestAutoFallbackWarns(t *testing.T) {
	isolate(t)
	r, err := backend.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"warning:", "pure-Go", "nitro setup", "make setup", "NITRO_BACKEND=go"} {
		if !strings.Contains(r.Warning, want) {
			t.Errorf("warning lacks %q: %q", want, r.Warning)
		}
	}
	if !strings.Contains(r.Reason, "nitro setup") {
		t.Errorf("reason should name the fix too: %q", r.Reason)
	}
	for _, force := range []string{"go", "simplego"} {
		if r, err := backend.Resolve(force); err != nil || r.Warning != "" {
			t.Errorf("forced %s: warning %q, err %v; a chosen pure-Go backend is not a fallback", force, r.Warning, err)
		}
	}
	t.Setenv(backend.EnvBackend, "go")
	if r, err := backend.Resolve(""); err != nil || r.Warning != "" {
		t.Errorf("NITRO_BACKEND=go: warning %q, err %v", r.Warning, err)
	}
}

// TestUserCacheDirIsSearchedLast: `nitro setup` installs into os.UserCacheDir()/nitro/pjrt, which
// the resolver searches after every other place.
func TestUserCacheDirIsSearchedLast(t *testing.T) {
	dir := isolate(t)
	user, err := backend.UserPluginDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "usercache", "nitro", "pjrt"); user != want {
		t.Fatalf("UserPluginDir = %s, want %s ($XDG_CACHE_HOME/nitro/pjrt)", user, want)
	}
	p, searched, _ := backend.FindPlugin()
	if p != "" || len(searched) == 0 || searched[len(searched)-1] != user {
		t.Fatalf("the user cache folder must be searched, last: got %q, %v", p, searched)
	}
	fakePlugin(t, filepath.Join(user, backend.PluginFile))
	if p, _, _ := backend.FindPlugin(); p != filepath.Join(user, backend.PluginFile) {
		t.Fatalf("plugin in the user cache folder not found: got %q", p)
	}
	// Every earlier place wins over it: the project's .nitro/pjrt, then $NITRO_PJRT_DIR.
	project := filepath.Join(dir, ".nitro", "pjrt")
	fakePlugin(t, filepath.Join(project, backend.PluginFile))
	if p, _, _ := backend.FindPlugin(); p != filepath.Join(project, backend.PluginFile) {
		t.Fatalf("the working directory's .nitro/pjrt must win over the user cache: got %q", p)
	}
}

// TestPinMatchesInstallScript: Pinned is the one source of truth; scripts/install-pjrt.sh (make
// setup) must carry the same values.
func TestPinMatchesInstallScript(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "scripts", "install-pjrt.sh"))
	if err != nil {
		t.Fatal(err)
	}
	w := backend.Pinned()
	for name, want := range map[string]string{
		"WHEEL_PKG": w.Package, "WHEEL_VERSION": w.Version, "WHEEL_FILE": w.File, "WHEEL_SHA256": w.SHA256, "MEMBER": w.Member,
	} {
		m := regexp.MustCompile(`(?m)^`+name+`="([^"]*)"$`).FindAllSubmatch(script, -1)
		if len(m) != 1 {
			t.Errorf("scripts/install-pjrt.sh: want exactly one line %s=\"...\", found %d", name, len(m))
			continue
		}
		if got := string(m[0][1]); got != want {
			t.Errorf("scripts/install-pjrt.sh has %s=%q but backend.Pinned() has %q: change both together", name, got, want)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(w.SHA256) || !strings.HasPrefix(w.File, strings.ReplaceAll(w.Package, "-", "_")+"-"+w.Version+"-") {
		t.Errorf("malformed pin %+v", w)
	}
}

// TestPinTable: the default is an entry of the table, and every entry is keyed by its PyPI
// project, pinned by a sha256 no other entry shares, and names a shared library in its wheel.
func TestPinTable(t *testing.T) {
	pins := backend.Pins()
	if def, ok := pins[backend.DefaultPlugin]; !ok || def != backend.Pinned() {
		t.Fatalf("Pins()[%q] = %+v, %v; want Pinned() %+v", backend.DefaultPlugin, def, ok, backend.Pinned())
	}
	if len(pins) < 2 {
		t.Fatalf("the table holds %d plugins, want the default and at least one other", len(pins))
	}
	seen := map[string]string{}
	for name, w := range pins {
		if name != w.Package || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(w.SHA256) ||
			!strings.HasPrefix(w.File, strings.ReplaceAll(w.Package, "-", "_")+"-"+w.Version+"-") ||
			!strings.HasSuffix(w.File, ".whl") || !strings.HasSuffix(w.Member, ".so") || w.Platform != "linux/amd64" {
			t.Errorf("malformed pin %q: %+v", name, w)
		}
		if other, dup := seen[w.SHA256]; dup {
			t.Errorf("pins %q and %q share sha256 %s", name, other, w.SHA256)
		}
		seen[w.SHA256] = name
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
		fakePlugin(t, filepath.Join(d, backend.PluginFile))
	}
	t.Setenv(backend.EnvPluginDir, b)
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", a)
	if p, _, err := backend.FindPlugin(); p != filepath.Join(a, backend.PluginFile) {
		t.Fatalf("PJRT_PLUGIN_LIBRARY_PATH must come first, got %s (%v)", p, err)
	}
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", "")
	if p, _, err := backend.FindPlugin(); p != filepath.Join(b, backend.PluginFile) {
		t.Fatalf("NITRO_PJRT_DIR second, got %s (%v)", p, err)
	}
}

// TestPluginFileEntryIsUsed: $PJRT_PLUGIN_LIBRARY_PATH naming the plugin file itself loads that
// plugin, and the reason says the variable named it.
func TestPluginFileEntryIsUsed(t *testing.T) {
	real := prereq.Plugin(t) // before isolating: the repository's plugin, from the real search
	isolate(t)
	t.Setenv(backend.EnvPluginPath, real)
	r, err := backend.Resolve("")
	if err != nil {
		prereq.XLAPlugin.Broken(t, err)
	}
	if r.Name != backend.XLA || r.Plugin != real || !strings.Contains(r.Reason, "named by $PJRT_PLUGIN_LIBRARY_PATH") || r.Backend.Name() != "stablehlo" {
		t.Fatalf("got %s (plugin %s, backend %s), want xla on %s named by $PJRT_PLUGIN_LIBRARY_PATH", r, r.Plugin, r.Backend.Name(), real)
	}
}

// TestBadPluginFileEntryRefused: a $PJRT_PLUGIN_LIBRARY_PATH entry that is a file but not a shared
// library is an error naming the variable, auto or forced; neither a later plugin nor pure Go.
func TestBadPluginFileEntryRefused(t *testing.T) {
	dir := isolate(t)
	fakePlugin(t, filepath.Join(dir, ".nitro", "pjrt", backend.PluginFile)) // found later, if the entry were passed over
	bad := filepath.Join(dir, "plugin.so")
	os.WriteFile(bad, []byte("not a library"), 0o644)
	t.Setenv(backend.EnvPluginPath, bad)
	for _, force := range []string{"", "xla"} {
		r, err := backend.Resolve(force)
		if err == nil {
			t.Fatalf("force %q: resolved %s", force, r)
		}
		for _, want := range []string{"$PJRT_PLUGIN_LIBRARY_PATH", bad, "not a shared library"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("force %q: error lacks %q: %v", force, want, err)
			}
		}
		if errors.Is(err, backend.ErrNoPlugin) {
			t.Errorf("force %q: a refused entry is not an absent plugin: %v", force, err)
		}
	}
	if _, _, err := backend.FindPlugin(); err == nil || !strings.Contains(err.Error(), "$PJRT_PLUGIN_LIBRARY_PATH") {
		t.Fatalf("FindPlugin must refuse it too: %v", err)
	}
}

// TestMissingNamedPluginRefused: a named path that does not exist is an error, not a fall-through.
func TestMissingNamedPluginRefused(t *testing.T) {
	dir := isolate(t)
	fakePlugin(t, filepath.Join(dir, ".nitro", "pjrt", backend.PluginFile))
	missing := filepath.Join(dir, "gone", backend.PluginFile)
	for _, env := range []string{backend.EnvPluginPath, backend.EnvPluginDir} {
		t.Setenv(backend.EnvPluginPath, "")
		t.Setenv(backend.EnvPluginDir, "")
		t.Setenv(env, missing)
		r, err := backend.Resolve("")
		if err == nil || !strings.Contains(err.Error(), "$"+env+" entry "+missing) || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("$%s=%s: got %v, %v", env, missing, r, err)
		}
	}
}

// TestNamedPluginThatDoesNotLoadIsAnError: a named file that passes the search but does not load
// stops resolution with the variable named; one found by the search names the reinstall.
func TestNamedPluginThatDoesNotLoadIsAnError(t *testing.T) {
	dir := isolate(t)
	user, _ := backend.UserPluginDir()
	fakePlugin(t, filepath.Join(user, backend.PluginFile))
	named := fakePlugin(t, filepath.Join(dir, "mine.so"))
	t.Setenv(backend.EnvPluginPath, named)
	r, err := backend.Resolve("")
	if err == nil || !strings.Contains(err.Error(), "named by $PJRT_PLUGIN_LIBRARY_PATH does not load") || !strings.Contains(err.Error(), named) {
		t.Fatalf("got %v, %v", r, err)
	}
	t.Setenv(backend.EnvPluginPath, "")
	r, err = backend.Resolve("")
	if err == nil || !strings.Contains(err.Error(), "does not load: reinstall it") || !strings.Contains(err.Error(), "the user cache folder") {
		t.Fatalf("got %v, %v", r, err)
	}
}
