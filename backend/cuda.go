package backend

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/stablehlo"

	"github.com/nitro-go/nitro/internal/prereq/pluginsearch"
)

// CUDA names the backend on the CUDA PJRT plugin (XLA on NVIDIA GPUs).
const CUDA = "cuda"

// EnvVisibleDevices is CUDA's own variable for which GPUs a process sees.
const EnvVisibleDevices = "CUDA_VISIBLE_DEVICES"

// CUDASetupHint names the fix for a missing CUDA plugin.
const CUDASetupHint = "run `nitro setup --cuda` (or `make setup CUDA=1` in the repository)"

// ErrNoCUDAPlugin is wrapped by Resolve's error when cuda is forced and no place holds the plugin.
var ErrNoCUDAPlugin = errors.New("no CUDA PJRT plugin " + CUDAPluginFile + " was found")

// ErrNoCUDADevice is wrapped by Resolve's error when the CUDA plugin is there but sees no GPU.
var ErrNoCUDADevice = errors.New("no CUDA device visible")

// Host facts the no-device message reports; variables so tests can stage a host with a driver.
var (
	driverVersionFile = "/proc/driver/nvidia/version"
	deviceGlob        = "/dev/nvidia[0-9]*"
	startCUDA         = func(plugin string) (backends.Backend, error) { return stablehlo.New(plugin) }
)

// FindCUDAPlugin returns the first CUDA plugin (absolute path; "" when none) in the places the CPU
// plugin is searched (see FindPlugin): CUDAPluginFile in each folder, or a named entry that is that
// file itself; and where it came from.
func FindCUDAPlugin() (path string, found pluginsearch.Found, searched []string) {
	exe, err := executable()
	if err != nil {
		exe = ""
	}
	for _, pl := range pluginsearch.Places(exe) {
		searched = append(searched, pl.Path)
		cand := filepath.Join(pl.Path, CUDAPluginFile)
		if pl.Named && filepath.Base(pl.Path) == CUDAPluginFile {
			cand = pl.Path
		}
		if st, err := os.Stat(cand); err == nil && st.Mode().IsRegular() {
			if abs, err := filepath.Abs(cand); err == nil {
				return abs, pluginsearch.Found{Path: abs, Source: pl.Source, Named: pl.Named}, searched
			}
		}
	}
	return "", pluginsearch.Found{}, searched
}

// resolveCUDA is a forced cuda backend: the plugin must be found and see a device.
func resolveCUDA(name, source string) (*Resolved, error) {
	path, found, searched := FindCUDAPlugin()
	if path == "" {
		return nil, fmt.Errorf("backend %q was forced by %s, but %w in: %s; %s, or set $%s to its folder, or choose --backend xla (the CPU plugin)",
			name, source, ErrNoCUDAPlugin, strings.Join(searched, ", "), CUDASetupHint, EnvPluginPath)
	}
	return getCUDA(found, "forced by "+source)
}

// getCUDA starts XLA on the CUDA plugin. Any failure is an error: nitro never moves a run the
// user's install says is for the GPU onto the CPU by itself.
func getCUDA(f pluginsearch.Found, forced string) (*Resolved, error) {
	how := origin(f, forced)
	pointXLAAtNVCC(f.Path)
	r, err := get(CUDA, f.Path, fmt.Sprintf("cuda (PJRT CUDA plugin %s): %s", f.Path, how))
	if err == nil {
		return r, nil
	}
	if inner := errors.Unwrap(err); inner != nil {
		err = inner // gopjrt's own error: the message below names the plugin and its source once
	}
	return nil, cudaError(err, f.Path, how+distributionNote())
}

// cudaError explains a CUDA plugin that failed to start: which devices the host shows, what
// $CUDA_VISIBLE_DEVICES hides, whether the NVIDIA libraries are installed, and the fixes.
func cudaError(err error, plugin, how string) error {
	facts, _ := cudaHostFacts()
	if libs := filepath.Join(filepath.Dir(filepath.Dir(plugin)), NVIDIALibsDir); !isDir(libs) {
		facts += fmt.Sprintf("; the NVIDIA libraries the plugin loads are not installed at %s (to install them: %s)", libs, CUDASetupHint)
	}
	fix := "run on a host with an NVIDIA GPU and its driver, unset or correct $" + EnvVisibleDevices +
		", or set " + EnvBackend + "=xla to run on the CPU plugin knowingly (nitro does not fall back to the CPU by itself)"
	// gopjrt says "failed to load"/"failed to get" when dlopen or GetPjrtApi fails: a broken
	// file, whatever the host; past that, a failing client is the device or its driver.
	msg := err.Error()
	if !strings.Contains(msg, "failed to load PJRT plugin") && !strings.Contains(msg, "failed to get PJRT plugin API") {
		return fmt.Errorf("backend cuda: %w to the CUDA PJRT plugin %s (%s): %v; %s; fix: %s", ErrNoCUDADevice, plugin, how, err, facts, fix)
	}
	return fmt.Errorf("backend cuda: the CUDA PJRT plugin %s (%s) does not load: %v; %s; reinstall it (`nitro setup --cuda --force`), or %s",
		plugin, how, err, facts, fix)
}

// cudaHostFacts reports $CUDA_VISIBLE_DEVICES, the NVIDIA kernel driver and the device files, and
// whether they alone show that no device can be visible.
func cudaHostFacts() (facts string, noDevice bool) {
	var parts []string
	vis, set := os.LookupEnv(EnvVisibleDevices)
	switch v := strings.TrimSpace(vis); {
	case !set:
		parts = append(parts, "$"+EnvVisibleDevices+" is unset (every GPU is visible)")
	case v == "" || v == "-1" || v == "none" || v == "NoDevFiles":
		parts = append(parts, fmt.Sprintf("$%s=%q hides every GPU", EnvVisibleDevices, vis))
		noDevice = true
	default:
		parts = append(parts, fmt.Sprintf("$%s=%q", EnvVisibleDevices, vis))
	}
	if b, err := os.ReadFile(driverVersionFile); err == nil {
		line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		parts = append(parts, "NVIDIA driver: "+line)
	} else {
		parts = append(parts, "no NVIDIA kernel driver is loaded ("+driverVersionFile+" is absent)")
		noDevice = true
	}
	devs, _ := filepath.Glob(deviceGlob)
	if len(devs) == 0 {
		parts = append(parts, "no GPU device files ("+deviceGlob+")")
		noDevice = true
	} else {
		parts = append(parts, "device files: "+strings.Join(devs, " "))
	}
	return strings.Join(parts, "; "), noDevice
}

// pointXLAAtNVCC sets XLA's CUDA data folder (ptxas, libdevice) to the installed nvcc tree when
// $XLA_FLAGS does not choose one: gopjrt would otherwise point it at nvidia/, which holds
// neither. Said once per process, before the plugin reads its flags.
func pointXLAAtNVCC(plugin string) {
	nvcc := filepath.Join(filepath.Dir(filepath.Dir(plugin)), NVIDIALibsDir, "cuda_nvcc")
	flags := os.Getenv("XLA_FLAGS")
	if !isDir(nvcc) || strings.Contains(flags, "--xla_gpu_cuda_data_dir") {
		return
	}
	_ = os.Setenv("XLA_FLAGS", strings.TrimSpace(flags+" --xla_gpu_cuda_data_dir="+nvcc))
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
