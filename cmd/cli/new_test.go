package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/cmd/cli"
)

// offlineGo is the environment the generated project builds in: outside any workspace, the module
// cache shared, no module proxy and a checksum database that cannot be reached (as on a machine
// that reaches only a module proxy), so a go.sum that `nitro new` left incomplete fails here.
func offlineGo(t *testing.T) {
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOSUMDB", "sum.golang.org http://127.0.0.1:9")
}

// TestNewColdCacheWritesNothing: with an empty module cache and no proxy, nitro new cannot fill
// go.sum; it names the one command that fixes it, and leaves neither the project, nor its
// staging folder, nor a parent folder it made.
func TestNewColdCacheWritesNothing(t *testing.T) {
	offlineGo(t)
	t.Setenv("GOMODCACHE", t.TempDir())
	parent := t.TempDir()
	dir := filepath.Join(parent, "made", "p")
	code, out, errs := runCLI("new", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "run `make setup` in "+repoRoot) || !strings.Contains(errs, "nothing was written") {
		t.Errorf("stderr does not say what to run:\n%s", errs)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("a failed new left %v in %s", entries[0].Name(), parent)
	}
	empty := filepath.Join(t.TempDir(), "e") // an empty folder named as the target stays, empty
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCLI("new", empty); code != 1 {
		t.Fatalf("exit %d into an empty folder, want 1", code)
	}
	if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
		t.Errorf("the empty target now holds %d entries (%v)", len(entries), err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(empty)); len(entries) != 1 {
		t.Errorf("the target's parent holds %d entries, want the target alone", len(entries))
	}
}

// TestNewProjectTestsAndRuns writes a project with `nitro new` into a folder outside the
// repository, then runs its `make test` and `make run` there, offline, on the repository's
// installed plugin: its go.mod replaces every nitro module cmd's go.mod replaces (and cmd), each
// by an absolute folder of this checkout, its test passes, and its run trains the tiny preset.
func TestNewProjectTestsAndRuns(t *testing.T) {
	for _, tool := range []string{"go", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the generated project is built with %s, which is not on $PATH: %v", tool, err)
		}
	}
	root := repoRoot
	dir := filepath.Join(t.TempDir(), "My Exp")
	if strings.HasPrefix(dir, root+string(filepath.Separator)) {
		t.Fatalf("the temp dir %s is inside the repository %s: the test must build outside it", dir, root)
	}
	offlineGo(t)
	t.Setenv("NITRO_PJRT_DIR", filepath.Join(root, ".nitro", "pjrt"))
	code, out, errs := runCLI("new", dir, "--module", "example.com/me/myexp")
	if code != 0 {
		t.Fatalf("nitro new: exit %d\n%s\n%s", code, out, errs)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	cmdMod, err := os.ReadFile(filepath.Join(root, "cmd", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"github.com/nitro-go/nitro/cmd": "cmd"}
	for _, m := range regexp.MustCompile(`(?m)^\s*(github\.com/nitro-go/nitro/\S+) => \.\./(\S+)$`).FindAllStringSubmatch(string(cmdMod), -1) {
		want[m[1]] = m[2]
	}
	if len(want) < 10 {
		t.Fatalf("read only %d nitro replaces from cmd/go.mod: %v", len(want), want)
	}
	for path, rel := range want {
		line := path + " => " + filepath.Join(root, rel) + "\n"
		if !strings.Contains(string(mod), line) {
			t.Errorf("go.mod lacks the replace line %q:\n%s", line, mod)
		}
	}
	if !strings.Contains(string(mod), "module example.com/me/myexp\n") || !strings.Contains(string(mod), "go get github.com/nitro-go/nitro/cmd@latest") {
		t.Errorf("go.mod lacks its module line or the go get line for published paths:\n%s", mod)
	}

	make := func(target string) string {
		t.Helper()
		c := exec.Command("make", target)
		c.Dir = dir
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s in %s: %v\n%s", target, dir, err, b)
		}
		return string(b)
	}
	if got := make("test"); !regexp.MustCompile(`(?m)^ok\s+example\.com/me/myexp/experiment\s`).MatchString(got) {
		t.Errorf("make test did not pass the experiment's test:\n%s", got)
	}
	got := make("run")
	if !regexp.MustCompile(`backend\s+xla \(PJRT CPU plugin \S+\): named by \$NITRO_PJRT_DIR`).MatchString(got) {
		t.Errorf("make run did not train on the repository's plugin:\n%s", got)
	}
	for _, w := range []string{"train my-exp --preset tiny", "epoch 5/5", "stopped: completed after 5 epochs", "test: test_loss"} {
		if !strings.Contains(got, w) {
			t.Errorf("make run's output lacks %q:\n%s", w, got)
		}
	}
	// The template opts in to hostalloc (its main package imports it), as the nitro CLI does.
	if !strings.Contains(got, "host allocator") || strings.Contains(got, "hostalloc not linked") {
		t.Errorf("make run's config report does not show hostalloc linked:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs", "MLP", "metrics.jsonl")); err != nil {
		t.Errorf("make run left no runs/MLP/metrics.jsonl in the project: %v", err)
	}
	// A second make run trains afresh in the same run dir (--overwrite), not refused, not mixed.
	if got := make("run"); !strings.Contains(got, "overwrite: removed the earlier run from runs/MLP") || !strings.Contains(got, "stopped: completed after 5 epochs") {
		t.Errorf("a second make run did not start afresh over the first:\n%s", got)
	}
}

// TestNewRefuses: a non-empty folder, a file, and a nitro checkout that is none are refused,
// naming the cause, and nothing is written; with no checkout found at all it says how to name one.
func TestNewRefuses(t *testing.T) {
	offlineGo(t)
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644)
	file := filepath.Join(t.TempDir(), "afile")
	os.WriteFile(file, []byte("x"), 0o644)
	bogus := t.TempDir()
	fresh := func() string { return filepath.Join(t.TempDir(), "p") }
	named := func(name string) string { return filepath.Join(t.TempDir(), name) }
	cases := []struct {
		name string
		env  string // $NITRO_SRC
		args []string
		want []string
	}{
		{"non-empty", "", []string{full}, []string{"not empty", "keep.txt"}},
		{"a file", "", []string{file}, []string{"a file is there"}},
		{"--nitro", "", []string{fresh(), "--nitro", bogus}, []string{"--nitro " + bogus + " is not a nitro checkout", "cmd/go.mod"}},
		{"$NITRO_SRC", bogus, []string{fresh()}, []string{"$NITRO_SRC " + bogus + " is not a nitro checkout"}},
		{"bad module", "", []string{fresh(), "--module", "/abs"}, []string{`--module "/abs" is no module path`}},
		{"quote in --module", "", []string{fresh(), "--module", `ex"ample.com/m`}, []string{`--module "ex\"ample.com/m" is no module path`, `'"' is not allowed`}},
		{"quote in the name", "", []string{named(`q"z`)}, []string{`the directory's name "q\"z"`, "pass --module, e.g. --module example.com/you/q-z"}},
		{"apostrophe", "", []string{named("it's")}, []string{`the directory's name "it's"`, "--module example.com/you/it-s"}},
		{"non-ASCII", "", []string{named("é")}, []string{`'é' is not allowed`, "--module example.com/you/experiment"}},
		{"newline", "", []string{named("a\nb")}, []string{"control character", "printable characters"}},
	}
	for _, c := range cases {
		t.Setenv("NITRO_SRC", c.env)
		code, _, errs := runCLI(append([]string{"new"}, c.args...)...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1 (%s)", c.name, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: stderr %q lacks %q", c.name, errs, w)
			}
		}
		if _, err := os.Stat(filepath.Join(c.args[0], "go.mod")); err == nil {
			t.Errorf("%s: a go.mod was written into %s", c.name, c.args[0])
		}
		if entries, _ := os.ReadDir(filepath.Dir(c.args[0])); c.args[0] != full && c.args[0] != file && len(entries) != 0 {
			t.Errorf("%s: %s was left beside the refused target", c.name, entries[0].Name())
		}
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Errorf("the non-empty folder now holds %d entries, want its 1", len(entries))
	}
	t.Setenv("NITRO_SRC", "")
	defer cli.SetSourceRootForTest("")()
	dir := fresh()
	code, _, errs := runCLI("new", dir)
	if code != 1 || !strings.Contains(errs, "no nitro checkout found") || !strings.Contains(errs, "--nitro DIR") || !strings.Contains(errs, "$NITRO_SRC") {
		t.Errorf("no checkout: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("no checkout: %s was created", dir)
	}
	// --nitro still works when the binary knows no checkout.
	if code, out, errs := runCLI("new", dir, "--nitro", repoRoot); code != 0 || !strings.Contains(out, "experiment \"p\"") {
		t.Errorf("--nitro with no source root: exit %d\n%s\n%s", code, out, errs)
	}
}
