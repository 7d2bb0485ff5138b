package exportbundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/stablehlo"
	"github.com/nitro-go/nitro/pjrthook"
)

// Program is one program exactly as it was handed to the PJRT plugin's Compile: Format is the
// PJRT program format ("mlir" for StableHLO, "hlo" for a serialized HloModuleProto) and Code the
// program's bytes (StableHLO text, for GoMLX's stablehlo backend).
type Program struct {
	Format string
	Code   []byte
}

// captureMu serializes captures: the interposer's recording is process-wide.
var captureMu sync.Mutex

// Capture runs build on a fresh GoMLX stablehlo backend whose PJRT plugin is nitro's interposer
// (package pjrthook) recording every compile over realPlugin (a path to a PJRT plugin .so), and returns every program build compiled on it,
// in compile order. The backend executes normally (every call is forwarded to the real plugin), so
// build may also run what it compiles; it is finalized when build returns, and must not be kept.
//
// Captures are serialized within a process; the interposer binds at most four different plugins
// per process (the one training runs on included). A panic in build (GoMLX reports most graph errors
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
	name, err := pjrthook.Register(abs)
	if err != nil {
		return nil, fmt.Errorf("exportbundle: Capture: %w", err)
	}
	pjrthook.Arm()
	defer pjrthook.Disarm()
	backend, err := stablehlo.NewWithOptions(name, nil)
	if err != nil {
		return nil, fmt.Errorf("exportbundle: Capture: backend over the interposer for %s: %w", abs, err)
	}
	defer backend.Finalize()
	if err := runBuild(build, backend); err != nil {
		return nil, fmt.Errorf("exportbundle: Capture: %w", err)
	}
	recorded := pjrthook.Recorded()
	out := make([]Program, len(recorded))
	for i, p := range recorded {
		out[i] = Program{Format: p.Format, Code: p.Code}
	}
	return out, nil
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
