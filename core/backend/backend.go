// Package backend resolves which GoMLX backend nitro runs on: the XLA CPU PJRT plugin when one is
// found, otherwise GoMLX's pure-Go backend. It never falls back silently: the choice comes with a
// one-line reason, an automatic fallback to pure Go comes with a warning naming the fix
// (Resolved.Warning, which the nitro CLI prints on stderr before anything else), and a forced
// backend that cannot be had is an error naming what was searched.
//
// Resolution order: the force argument, then $NITRO_BACKEND, then auto ("xla" if a plugin is
// found, else "go"). Plugins are searched in $PJRT_PLUGIN_LIBRARY_PATH (a ':' list of folders),
// $NITRO_PJRT_DIR, then a .nitro/pjrt folder in the working directory or any parent of it (where
// `make setup` installs), then the same beside the running executable, then the user's cache
// folder, os.UserCacheDir()/nitro/pjrt (where `nitro setup` installs; see UserPluginDir). Pinned
// names the wheel both installers take the plugin from. Backends are created once per process and
// shared: a PJRT client is expensive and owns the device memory. Resolve is safe for concurrent use.
package backend

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/backends/stablehlo"
)

// Names of the backends nitro knows.
const (
	XLA = "xla" // XLA through a PJRT plugin (StableHLO programs)
	Go  = "go"  // GoMLX's pure-Go backend (simplego)
)

// EnvBackend forces a backend by name ("xla" or "go"); empty means auto.
const EnvBackend = "NITRO_BACKEND"

// EnvPluginDir names one more folder to search for the PJRT plugin.
const EnvPluginDir = "NITRO_PJRT_DIR"

// PluginFile is the file name gopjrt expects for the CPU plugin; `make setup` installs it so.
const PluginFile = "pjrt_c_api_cpu_plugin.so"

// Resolved is a chosen backend and why it was chosen.
type Resolved struct {
	Name    string           // XLA or Go
	Plugin  string           // absolute plugin path, for XLA
	Reason  string           // one line: which backend and why
	Warning string           // set when auto resolution fell back to pure Go: print it on stderr
	Backend backends.Backend // shared by the whole process; do not Finalize
}

// FallbackWarning is Resolved.Warning for an automatic fallback to pure Go.
const FallbackWarning = "warning: no XLA CPU PJRT plugin found, so nitro runs on GoMLX's pure-Go backend, about ten times slower; " +
	SetupHint + " to install it, or set " + EnvBackend + "=go to choose pure Go knowingly"

// String is the line to print.
func (r *Resolved) String() string { return "backend: " + r.Reason }

var (
	mu     sync.Mutex
	shared = map[string]*Resolved{}
)

// Resolve picks the backend. force is "xla", "go" or "" (then $NITRO_BACKEND, then auto). Each
// call returns its own Resolved; the Backend inside is the process's shared one.
func Resolve(force string) (*Resolved, error) {
	name, source := strings.ToLower(strings.TrimSpace(force)), "the caller"
	if name == "" {
		name, source = strings.ToLower(strings.TrimSpace(os.Getenv(EnvBackend))), "$"+EnvBackend
	}
	switch name {
	case "", "auto":
		plugin, searched := FindPlugin()
		if plugin == "" {
			r, err := get(Go, "", fmt.Sprintf("go (pure Go): no XLA CPU PJRT plugin found (searched %s; %s to install it)", strings.Join(searched, ", "), SetupHint))
			if err != nil {
				return nil, err
			}
			r.Warning = FallbackWarning
			return r, nil
		}
		return get(XLA, plugin, fmt.Sprintf("xla (PJRT CPU plugin %s): found by search", plugin))
	case XLA, "pjrt", "stablehlo":
		plugin, searched := FindPlugin()
		if plugin == "" {
			return nil, fmt.Errorf("backend %q %s by %s, but no PJRT plugin %s was found in: %s; %s, or set $PJRT_PLUGIN_LIBRARY_PATH to the folder holding it, or choose --backend go",
				name, "was forced", source, PluginFile, strings.Join(searched, ", "), SetupHint)
		}
		return get(XLA, plugin, fmt.Sprintf("xla (PJRT CPU plugin %s): %s by %s", plugin, "forced", source))
	case Go, "simplego":
		return get(Go, "", fmt.Sprintf("go (pure Go): forced by %s", source))
	default:
		return nil, fmt.Errorf("unknown backend %q (from %s): use %q or %q, or leave it empty to choose automatically", name, source, XLA, Go)
	}
}

func get(name, plugin, reason string) (*Resolved, error) {
	mu.Lock()
	defer mu.Unlock()
	key := name + ":" + plugin
	if r, ok := shared[key]; ok {
		return &Resolved{Name: r.Name, Plugin: r.Plugin, Reason: reason, Backend: r.Backend}, nil
	}
	var b backends.Backend
	var err error
	switch name {
	case XLA:
		// An absolute path skips gopjrt's own search; shared_buffers lets the CPU plugin alias host
		// memory, which gopjrt only turns on by itself for a plugin named plainly "cpu".
		b, err = stablehlo.New(plugin + ",shared_buffers")
	default:
		b, err = simplego.New("")
	}
	if err != nil {
		return nil, fmt.Errorf("starting backend %s: %w", reason, err)
	}
	r := &Resolved{Name: name, Plugin: plugin, Backend: b}
	shared[key] = r
	return &Resolved{Name: r.Name, Plugin: r.Plugin, Reason: reason, Backend: r.Backend}, nil
}

// FindPlugin returns the first plugin found and the folders searched, in order.
func FindPlugin() (path string, searched []string) {
	for _, dir := range searchDirs() {
		searched = append(searched, dir)
		p := filepath.Join(dir, PluginFile)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			if abs, err := filepath.Abs(p); err == nil {
				return abs, searched
			}
		}
	}
	return "", searched
}

func searchDirs() []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("PJRT_PLUGIN_LIBRARY_PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if d := os.Getenv(EnvPluginDir); d != "" {
		dirs = append(dirs, d)
	}
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, upward(wd)...)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, upward(filepath.Dir(exe))...)
	}
	if d, err := UserPluginDir(); err == nil {
		dirs = append(dirs, d)
	}
	return dedupe(dirs)
}

// upward lists <dir>/.nitro/pjrt for dir and each of its parents.
func upward(dir string) []string {
	var out []string
	for {
		out = append(out, filepath.Join(dir, ".nitro", "pjrt"))
		parent := filepath.Dir(dir)
		if parent == dir {
			return out
		}
		dir = parent
	}
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
