package backend_test

import (
	"os"
	"path/filepath"
	"regexp"
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
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "usercache")) // os.UserCacheDir on Linux
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
	p, searched := backend.FindPlugin()
	if p != "" || len(searched) == 0 || searched[len(searched)-1] != user {
		t.Fatalf("the user cache folder must be searched, last: got %q, %v", p, searched)
	}
	os.MkdirAll(user, 0o755)
	os.WriteFile(filepath.Join(user, backend.PluginFile), []byte("x"), 0o644)
	if p, _ := backend.FindPlugin(); p != filepath.Join(user, backend.PluginFile) {
		t.Fatalf("plugin in the user cache folder not found: got %q", p)
	}
	// Every earlier place wins over it: the project's .nitro/pjrt, then $NITRO_PJRT_DIR.
	project := filepath.Join(dir, ".nitro", "pjrt")
	os.MkdirAll(project, 0o755)
	os.WriteFile(filepath.Join(project, backend.PluginFile), []byte("x"), 0o644)
	if p, _ := backend.FindPlugin(); p != filepath.Join(project, backend.PluginFile) {
		t.Fatalf("the working directory's .nitro/pjrt must win over the user cache: got %q", p)
	}
}

// TestPinMatchesInstallScript: Pinned is the one source of truth; scripts/install-pjrt.sh (make
// setup) must carry the same values.
func TestPinMatchesInstallScript(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "scripts", "install-pjrt.sh"))
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
