// Package backend resolves which GoMLX backend nitro runs on: the XLA CPU PJRT plugin when one is
// found, otherwise GoMLX's pure-Go backend. It never falls back silently: the choice comes with a
// one-line reason, an automatic fallback to pure Go comes with a warning naming the fix
// (Resolved.Warning, which the nitro CLI prints on stderr before anything else), and a forced
// backend that cannot be had is an error naming what was searched.
//
// Resolution order: the force argument, then $NITRO_BACKEND, then auto ("cuda" if the CUDA plugin
// is installed, else "xla" if the CPU plugin is found, else "go"). Plugins are searched (see FindPlugin) in each entry of
// $PJRT_PLUGIN_LIBRARY_PATH (a ':' list of folders or plugin files), $NITRO_PJRT_DIR (a folder or
// the plugin file), then a .nitro/pjrt folder in the working directory or any parent of it (where
// `make setup` installs), then the same beside the running executable, then the user's cache
// folder, os.UserCacheDir()/nitro/pjrt (where `nitro setup` installs; see UserPluginDir). A plugin
// the user named that is missing or does not load is an error, never a reason to load another one
// or to fall back to pure Go: the user would believe their plugin ran. Pinned names the wheel both
// installers take the plugin from: lammps-jax-pjrt-cpu 0.11.2, chosen over the two other pins by
// measurement (its fused MLP step is 0.61x the old default's, and Go's CPU profiler works on it;
// Pins has the figures).
//
// The GPU: `nitro setup --cuda` installs jax-cuda12-pjrt 0.11.2 (CUDAPlugin: XLA's CUDA 12 plugin
// from the same jaxlib release as the CPU default, so the same PJRT C API 0.115 that gopjrt
// v0.10.0, built against 0.81, already drives on the CPU) as CUDAPluginFile beside the CPU plugin,
// and the NVIDIA libraries it loads (CUDALibraries) into ../nvidia, where its RPATH looks. The
// CUDA plugin is searched in the same places; when found, auto resolution takes it (a CPU plugin
// the user named by variable still wins over one the search found). A CUDA plugin that sees no
// GPU is an error wrapping ErrNoCUDADevice that names $CUDA_VISIBLE_DEVICES, the driver and the
// device files, never a quiet fall back to the CPU; NITRO_BACKEND=xla chooses the CPU knowingly.
// A PJRT plugin starts under nitro's interposer (module pjrthook), so that the disk compile cache
// sees every compile: ResolveWithCache (and Resolve, from $NITRO_COMPILE_CACHE) chooses its
// folder, and CompileCounts reports compiles and loads from disk (docs/compilecache.md). An
// interposer that cannot bind leaves the plugin started as it is, with a warning. Distribute makes
// the next CUDA client one process of several (XLA's distributed runtime, through the
// interposer's client-create piece; docs/multihost.md); there an interposer that cannot bind, or
// no coordinator address, is an error, and NewXProcess is the sum over the processes of such a
// client, on the device.
// Backends are created once per process and shared: a PJRT
// client is expensive and owns the device memory. Resolve is safe for concurrent use.
package backend

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/backends/stablehlo"

	"github.com/nitro-go/nitro/hostalloc/seam"
	"github.com/nitro-go/nitro/internal/prereq/pluginsearch"
)

// Names of the backends nitro knows.
const (
	XLA = "xla" // XLA through a PJRT plugin (StableHLO programs)
	Go  = "go"  // GoMLX's pure-Go backend (simplego)
)

// EnvBackend forces a backend by name ("xla", "cuda" or "go"); empty means auto.
const EnvBackend = "NITRO_BACKEND"

// EnvPluginDir names the folder holding the PJRT plugin (or the plugin file), searched after
// $PJRT_PLUGIN_LIBRARY_PATH. When set, it must hold the plugin.
const EnvPluginDir = pluginsearch.EnvDir

// EnvPluginPath is gopjrt's list of plugin folders; nitro also takes plugin files in it.
const EnvPluginPath = pluginsearch.EnvLibraryPath

// PluginFile is the file name gopjrt expects for the CPU plugin; `make setup` installs it so.
const PluginFile = pluginsearch.File

// ErrNoPlugin is wrapped by Resolve's error when xla is forced and no place holds a plugin (as
// opposed to a plugin that is there but refused or does not load).
var ErrNoPlugin = pluginsearch.ErrNotFound

// Resolved is a chosen backend and why it was chosen.
type Resolved struct {
	Name    string           // XLA, CUDA or Go
	Plugin  string           // absolute plugin path, for XLA
	Reason  string           // one line: which backend and why
	Warning string           // set when auto resolution fell back to pure Go, or the compile cache is off by a fault: print it on stderr
	Backend backends.Backend // shared by the whole process; do not Finalize
	// CompileCache is the disk compile cache in use from this resolution on (see UseCompileCache).
	CompileCache CompileCache
	// HostAlloc is which C allocator is in force under the plugin: the program's own when it does
	// not link module hostalloc (seam.NotLinked), an allocator loaded ahead of glibc (LD_PRELOAD)
	// when one owns malloc, else hostalloc's: jemalloc preloaded at start, or glibc's defaults
	// ($NITRO_HOST_MALLOC=system, or no libjemalloc.so.2 found).
	HostAlloc string
}

// FallbackWarning is Resolved.Warning for an automatic fallback to pure Go.
const FallbackWarning = "warning: no XLA CPU PJRT plugin found, so nitro runs on GoMLX's pure-Go backend, about ten times slower; " +
	SetupHint + ", or set " + EnvBackend + "=go to choose pure Go knowingly"

// String is the line to print.
func (r *Resolved) String() string { return "backend: " + r.Reason }

var (
	mu     sync.Mutex
	shared = map[string]*Resolved{}
)

// Resolve picks the backend. force is "xla", "cuda", "go" or "" (then $NITRO_BACKEND, then auto). Each
// call returns its own Resolved; the Backend inside is the process's shared one.
func Resolve(force string) (*Resolved, error) { return ResolveWithCache(force, CacheSetting{}) }

// ResolveWithCache is Resolve, then the disk compile cache cache chooses (the zero value:
// $NITRO_COMPILE_CACHE, then the default folder). The cache is process-wide (see
// UseCompileCache); the pure-Go backend has none.
func ResolveWithCache(force string, cache CacheSetting) (*Resolved, error) {
	// A mistyped $NITRO_HOST_MALLOC left glibc's defaults in place, and a policy the program
	// cannot apply (hostalloc not linked, or another allocator owns malloc) would not run: refuse
	// rather than run with a policy the user did not choose.
	if _, err := seam.Policy(); err != nil {
		return nil, err
	}
	r, err := resolve(force)
	if err != nil {
		return nil, err
	}
	// What is in effect (fixed since the program started).
	r.HostAlloc, _ = seam.Policy() // its one error was refused above
	if r.Name == Go {
		r.CompileCache = CompileCache{Source: "the pure-Go backend compiles nothing to disk"}
		return r, nil
	}
	r.CompileCache = useCompileCache(cache)
	if w := r.CompileCache.Warning; w != "" && r.Warning == "" {
		r.Warning = "warning: compile cache: " + w
	}
	return r, nil
}

func resolve(force string) (*Resolved, error) {
	name, source := strings.ToLower(strings.TrimSpace(force)), "the caller"
	if name == "" {
		name, source = strings.ToLower(strings.TrimSpace(os.Getenv(EnvBackend))), "$"+EnvBackend
	}
	switch name {
	case "", "auto":
		found, searched, err := find()
		if err != nil {
			return nil, fmt.Errorf("backend: %w (nitro loads no other plugin, nor falls back to pure Go, past a place it refused)", err)
		}
		// CUDA first, unless the user named the CPU plugin and the CUDA one is only in the search's
		// own places: the user's choice wins over the search's.
		if _, cuda, _ := FindCUDAPlugin(); cuda.Path != "" && (cuda.Named || !found.Named) {
			return getCUDA(cuda, "")
		}
		if found.Path == "" {
			r, err := get(Go, "", fmt.Sprintf("go (pure Go): no XLA CPU PJRT plugin found (searched %s; %s)", strings.Join(searched, ", "), SetupHint))
			if err != nil {
				return nil, err
			}
			r.Warning = FallbackWarning
			return r, nil
		}
		return getPlugin(found, "")
	case XLA, "pjrt", "stablehlo":
		found, searched, err := find()
		if err != nil {
			return nil, fmt.Errorf("backend %q was forced by %s, but %w", name, source, err)
		}
		if found.Path == "" {
			return nil, fmt.Errorf("backend %q was forced by %s, but %w in: %s; %s (or $%s), or choose --backend go",
				name, source, ErrNoPlugin, strings.Join(searched, ", "), SetupHint, EnvPluginPath)
		}
		return getPlugin(found, "forced by "+source)
	case CUDA, "gpu":
		return resolveCUDA(name, source)
	case Go, "simplego":
		return get(Go, "", fmt.Sprintf("go (pure Go): forced by %s", source))
	default:
		return nil, fmt.Errorf("unknown backend %q (from %s): use %q, %q or %q, or leave it empty to choose automatically", name, source, XLA, CUDA, Go)
	}
}

// getPlugin starts XLA on a found plugin. A plugin that does not load is an error naming where it
// came from and the fix: never a fall-through to a plugin found later, nor to pure Go.
func getPlugin(f pluginsearch.Found, forced string) (*Resolved, error) {
	// A bad $NITRO_CPU_DEVICES is the variable's fault, not the plugin's: say so alone.
	if _, _, err := cpuClientOptions(XLA); err != nil {
		return nil, err
	}
	how := origin(f, forced)
	r, err := get(XLA, f.Path, fmt.Sprintf("xla (PJRT CPU plugin %s): %s", f.Path, how))
	if err == nil {
		return r, nil
	}
	if f.Named {
		return nil, fmt.Errorf("%w; the plugin %s named by %s does not load: fix or remove that entry (nitro does not fall back to another plugin)", err, f.Path, f.Source)
	}
	return nil, fmt.Errorf("%w; the plugin %s (%s) does not load: reinstall it (`nitro setup --force`, or `make setup` in the repository) or remove it", err, f.Path, how)
}

// origin says where a found plugin came from, and what forced it ("" when nothing did).
func origin(f pluginsearch.Found, forced string) string {
	how := "found in " + f.Source
	if f.Named {
		how = "named by " + f.Source
	}
	if forced != "" {
		how += ", " + forced
	}
	return how
}

func get(name, plugin, reason string) (*Resolved, error) {
	mu.Lock()
	defer mu.Unlock()
	opts, optKey, err := cpuClientOptions(name)
	if err != nil {
		return nil, err
	}
	key := name + ":" + plugin + optKey
	if r, ok := shared[key]; ok {
		return &Resolved{Name: r.Name, Plugin: r.Plugin, Reason: reason, Backend: r.Backend, Warning: r.Warning}, nil
	}
	var b backends.Backend
	var interposeWarning string
	switch name {
	case XLA:
		// The CPU client allocates each step's temporaries with malloc: hostalloc's jemalloc, when
		// the program links it, keeps them mapped between steps (Apply reports; the choice was
		// made when the program started).
		if _, err := seam.Apply(); err != nil {
			return nil, err
		}
		// An absolute path skips gopjrt's own search; shared_buffers lets the CPU plugin alias host
		// memory, which gopjrt only turns on by itself for a plugin named plainly "cpu". The
		// plugin starts under the interposer (the disk compile cache's hook), whose name is an
		// absolute path too.
		name, warning := interposed(plugin)
		b, err = stablehlo.NewWithOptions(name+",shared_buffers", opts)
		if err != nil && name != plugin {
			// The interposer bound but the client did not start: say which, from the plugin itself.
			b, err = stablehlo.NewWithOptions(plugin+",shared_buffers", opts)
			warning = "the compile cache is off: the plugin did not start under the interposer"
		}
		interposeWarning = warning
	case CUDA:
		undo, note, derr := spanProcesses()
		if derr != nil {
			return nil, fmt.Errorf("starting backend %s: %w", reason, derr)
		}
		reason += note
		name, warning := interposed(plugin)
		if note != "" && name == plugin {
			undo()
			return nil, fmt.Errorf("starting backend %s: the plugin spans processes only under nitro's interposer, which did not bind: %s", reason, warning)
		}
		b, err = startCUDA(name) // device memory: no host aliasing
		if err != nil && name != plugin && note == "" {
			b, err = startCUDA(plugin)
			warning = "the compile cache is off: the plugin did not start under the interposer"
		}
		undo()
		interposeWarning = warning
	default:
		// ops_sequential: GoMLX v0.25's pure-Go executor, left to run independent ops in parallel,
		// can deadlock in its bounded worker pool (every worker waiting for a slot; seen as a test
		// hung in workersPool.WaitToStart). Ops one after another never wait on each other.
		b, err = simplego.New("ops_sequential")
	}
	if err != nil {
		return nil, fmt.Errorf("starting backend %s: %w", reason, err)
	}
	r := &Resolved{Name: name, Plugin: plugin, Backend: b, Warning: interposeWarning}
	shared[key] = r
	return &Resolved{Name: r.Name, Plugin: r.Plugin, Reason: reason, Backend: r.Backend, Warning: r.Warning}, nil
}

// FindPlugin returns the first plugin found (absolute path; "" when no place holds one) and the
// places searched, in order. The error is a place it refused: an entry of $PJRT_PLUGIN_LIBRARY_PATH
// or $NITRO_PJRT_DIR that does not exist or is not a shared library, $NITRO_PJRT_DIR without the
// plugin, or a plugin file that is a broken link or not a library; it names the place and the fix.
func FindPlugin() (path string, searched []string, err error) {
	found, searched, err := find()
	return found.Path, searched, err
}

// executable is the running program, whose folder (and its parents) the search includes; a
// variable so that tests can move it away from a plugin installed above the test binary.
var executable = os.Executable

func find() (pluginsearch.Found, []string, error) {
	exe, err := executable()
	if err != nil {
		exe = ""
	}
	return pluginsearch.Find(pluginsearch.Places(exe))
}
