package prereq_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/internal/prereq/pluginsearch"
)

// fakeTB records how a helper stopped the test. Fatalf and Skipf end the calling goroutine, as
// the real ones do, so code after them in the helper must not run.
type fakeTB struct {
	testing.TB // nil: any method the helpers should not call panics
	failed     bool
	skipped    bool
	msg        string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fake TB in its own goroutine and reports what happened; returned says fn
// came back on its own (neither failed nor skipped).
func run(fn func(testing.TB)) (f *fakeTB, returned bool) {
	f = &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
		returned = true
	}()
	<-done
	return f, returned
}

var demo = prereq.Prereq{What: "the demo tool", Install: "run `make demo`"}

func TestAbsentSkipsOutsideCI(t *testing.T) {
	t.Setenv("CI", "")
	f, returned := run(func(tb testing.TB) { demo.Absent(tb, "looked in /nowhere") })
	if returned || !f.skipped || f.failed {
		t.Fatalf("absent outside CI must skip: returned %v, skipped %v, failed %v", returned, f.skipped, f.failed)
	}
	for _, want := range []string{"SKIPPED, NOT PASSED", "the demo tool", "looked in /nowhere", "run `make demo`"} {
		if !strings.Contains(f.msg, want) {
			t.Errorf("skip message lacks %q: %s", want, f.msg)
		}
	}
}

// TestAbsentFailsUnderAnyCI: CI=true, CI=1 and any other non-empty value are CI alike.
func TestAbsentFailsUnderAnyCI(t *testing.T) {
	for _, ci := range []string{"true", "1", "yes", "false-but-set"} {
		t.Setenv("CI", ci)
		f, returned := run(func(tb testing.TB) { demo.Absent(tb, "looked in /nowhere") })
		if returned || !f.failed || f.skipped {
			t.Fatalf("CI=%q: absent must fail: returned %v, failed %v, skipped %v", ci, returned, f.failed, f.skipped)
		}
		for _, want := range []string{"the demo tool", "looked in /nowhere", "run `make demo`", fmt.Sprintf("CI=%q", ci), "not a skip"} {
			if !strings.Contains(f.msg, want) {
				t.Errorf("CI=%q: failure lacks %q: %s", ci, want, f.msg)
			}
		}
	}
}

func TestBrokenAlwaysFails(t *testing.T) {
	for _, ci := range []string{"", "1"} {
		t.Setenv("CI", ci)
		f, returned := run(func(tb testing.TB) { demo.Broken(tb, errors.New("loading it: bad ELF header")) })
		if returned || !f.failed || f.skipped {
			t.Fatalf("CI=%q: broken must fail: returned %v, failed %v, skipped %v", ci, returned, f.failed, f.skipped)
		}
		if !strings.Contains(f.msg, "there but unusable") || !strings.Contains(f.msg, "bad ELF header") || !strings.Contains(f.msg, "make demo") {
			t.Errorf("failure message: %s", f.msg)
		}
	}
}

// TestNeedClassifies: not-there errors are Absent (a skip outside CI), every other error is
// Broken, nil lets the test go on.
func TestNeedClassifies(t *testing.T) {
	t.Setenv("CI", "")
	_, missing := exec.LookPath("surely-not-a-command-nitro-knows")
	_, statErr := os.Stat(filepath.Join(t.TempDir(), "none"))
	for _, c := range []struct {
		name      string
		err       error
		skip, end bool // end: the helper stopped the test
	}{
		{"nil", nil, false, false},
		{"ErrAbsent", fmt.Errorf("the wheel: %w", prereq.ErrAbsent), true, true},
		{"fs.ErrNotExist", statErr, true, true},
		{"exec.ErrNotFound", missing, true, true},
		{"no plugin (backend wraps pluginsearch.ErrNotFound)", fmt.Errorf("backend \"xla\" was forced, but %w", pluginsearch.ErrNotFound), true, true},
		{"other", errors.New("permission denied by the plugin"), false, true},
		{"wrapped other", fmt.Errorf("starting: %w", fs.ErrPermission), false, true},
	} {
		f, returned := run(func(tb testing.TB) { demo.Need(tb, c.err) })
		if returned == c.end || f.skipped != c.skip || f.failed != (c.end && !c.skip) {
			t.Errorf("%s (%v): returned %v, skipped %v, failed %v", c.name, c.err, returned, f.skipped, f.failed)
		}
	}
}

// isolate points the plugin search at empty folders; a plugin reachable above the test binary
// (GOTMPDIR) cannot be ruled out here, so the tests below name their own places.
func isolate(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv(pluginsearch.EnvLibraryPath, "")
	t.Setenv(pluginsearch.EnvDir, "")
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "usercache"))
	t.Chdir(dir)
	return dir
}

// TestPluginAbsentOrBroken: Plugin skips (no CI) or fails (CI) when nothing is found, and fails
// whatever CI says when a named entry is not a plugin.
func TestPluginAbsentOrBroken(t *testing.T) {
	dir := isolate(t)
	if exe, _ := os.Executable(); exe != "" {
		if found, _, _ := pluginsearch.Find(pluginsearch.Places(exe)); found.Path != "" {
			t.Fatalf("a plugin is reachable above the test binary (%s): remove it, or set GOTMPDIR to a folder with no .nitro/pjrt above it", found.Path)
		}
	}
	t.Setenv("CI", "")
	if f, returned := run(func(tb testing.TB) { prereq.Plugin(tb) }); returned || !f.skipped || !strings.Contains(f.msg, "searched") {
		t.Fatalf("no plugin, no CI: want a skip naming the search, got returned %v, %+v", returned, f)
	}
	t.Setenv("CI", "1")
	if f, returned := run(func(tb testing.TB) { prereq.Plugin(tb) }); returned || !f.failed || !strings.Contains(f.msg, "make setup") {
		t.Fatalf("no plugin, CI=1: want a failure, got returned %v, %+v", returned, f)
	}
	t.Setenv("CI", "")
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("not a library"), 0o644)
	t.Setenv(pluginsearch.EnvLibraryPath, text)
	if f, returned := run(func(tb testing.TB) { prereq.Plugin(tb) }); returned || !f.failed || !strings.Contains(f.msg, "there but unusable") || !strings.Contains(f.msg, "$PJRT_PLUGIN_LIBRARY_PATH") {
		t.Fatalf("a named file that is not a plugin must fail even outside CI: returned %v, %+v", returned, f)
	}
	// The user cache folder, where `nitro setup` installs (the private searches tests once had
	// missed it): found with no variable set.
	t.Setenv(pluginsearch.EnvLibraryPath, "")
	user := filepath.Join(dir, "usercache", "nitro", "pjrt", pluginsearch.File)
	os.MkdirAll(filepath.Dir(user), 0o755)
	os.WriteFile(user, []byte("\x7fELF rest"), 0o755)
	var got string
	if f, returned := run(func(tb testing.TB) { got = prereq.Plugin(tb) }); !returned || got != user {
		t.Fatalf("the plugin `nitro setup` installs: got %q, returned %v, %+v", got, returned, f)
	}
	lib := filepath.Join(dir, "my_plugin.so")
	os.WriteFile(lib, []byte("\x7fELF rest"), 0o755)
	t.Setenv(pluginsearch.EnvLibraryPath, lib)
	if f, returned := run(func(tb testing.TB) { got = prereq.Plugin(tb) }); !returned || got != lib {
		t.Fatalf("a named plugin file: got %q, returned %v, %+v", got, returned, f)
	}
}
