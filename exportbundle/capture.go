package exportbundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/stablehlo"
	"github.com/gomlx/gopjrt/pjrt"

	"github.com/nitro-go/nitro/exportbundle/internal/shim"
)

// Program is one program exactly as it was handed to the PJRT plugin's Compile: Format is the
// PJRT program format ("mlir" for StableHLO, "hlo" for a serialized HloModuleProto) and Code the
// program's bytes (StableHLO text, for GoMLX's stablehlo backend).
type Program struct {
	Format string
	Code   []byte
}

// capturePrefix makes the shim's registered name an absolute path, which GoMLX's stablehlo backend
// passes to gopjrt's GetPlugin as is (no plugin-directory search), and GetPlugin finds the shim by
// that name among the plugins already loaded.
const capturePrefix = "/nitro-exportbundle-capture"

var (
	captureMu sync.Mutex
	shimNames = map[string]string{} // real plugin path -> name registered with gopjrt
)

// Capture runs build on a fresh GoMLX stablehlo backend whose PJRT plugin is a recording shim
// over realPlugin (a path to a PJRT plugin .so), and returns every program build compiled on it,
// in compile order. The backend executes normally (every call is forwarded to the real plugin), so
// build may also run what it compiles; it is finalized when build returns, and must not be kept.
//
// Captures are serialized within a process, and one process can capture through one real plugin
// only (a second, different path is an error). A panic in build (GoMLX reports most graph errors
// by panicking) is returned as an error.
func Capture(realPlugin string, build func(backend backends.Backend) error) ([]Program, error) {
	if build == nil {
		return nil, errors.New("exportbundle: Capture: nil build function")
	}
	abs, err := filepath.Abs(realPlugin)
	if err != nil {
		return nil, fmt.Errorf("exportbundle: Capture: plugin %q: %w", realPlugin, err)
	}
	if st, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("exportbundle: Capture: plugin: %w", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("exportbundle: Capture: plugin %s is not a regular file", abs)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("exportbundle: Capture: plugin: %w", err)
	}

	captureMu.Lock()
	defer captureMu.Unlock()
	name, err := registerShim(abs)
	if err != nil {
		return nil, err
	}
	shim.Arm()
	defer shim.Disarm()
	backend, err := stablehlo.NewWithOptions(name, nil)
	if err != nil {
		return nil, fmt.Errorf("exportbundle: Capture: backend over the shim for %s: %w", abs, err)
	}
	defer backend.Finalize()
	if err := runBuild(build, backend); err != nil {
		return nil, fmt.Errorf("exportbundle: Capture: %w", err)
	}
	recorded := shim.Recorded()
	out := make([]Program, len(recorded))
	for i, p := range recorded {
		out[i] = Program{Format: p.Format, Code: p.Code}
	}
	return out, nil
}

// registerShim registers, once per real plugin, the shim's table with gopjrt under an absolute
// name, so that GoMLX's stablehlo backend takes it as a plugin path and gopjrt's GetPlugin finds
// it among the loaded plugins. Called with captureMu held.
func registerShim(abs string) (string, error) {
	if name, ok := shimNames[abs]; ok {
		return name, nil
	}
	api, err := shim.API(abs)
	if err != nil {
		return "", fmt.Errorf("exportbundle: Capture: shim over %s: %w", abs, err)
	}
	name := capturePrefix + abs
	if err := pjrt.RegisterPreloadedPlugin(name, api); err != nil {
		return "", fmt.Errorf("exportbundle: Capture: registering the shim over %s: %w", abs, err)
	}
	shimNames[abs] = name
	return name, nil
}

func runBuild(build func(backends.Backend) error, b backends.Backend) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = fmt.Errorf("build panicked: %w", e)
			} else {
				err = fmt.Errorf("build panicked: %v", r)
			}
		}
	}()
	return build(b)
}
