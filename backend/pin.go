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

// Pinned is the plugin wheel that `nitro setup` and `make setup` (scripts/install-pjrt.sh) install.
// This is the one source of truth for the pin: the script carries a copy of these values, and a
// test fails when the two differ.
//
// xla-cpu-pjrt 0.0.1 exposes PJRT C API 0.81, the exact version gopjrt v0.10.0 was built against.
func Pinned() Wheel {
	return Wheel{
		Package:  "xla-cpu-pjrt",
		Version:  "0.0.1",
		File:     "xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl",
		SHA256:   "55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc",
		Member:   "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so",
		Platform: "linux/amd64",
	}
}

// StampFile is the file, beside the installed plugin, that holds the sha256 of the wheel it came
// from; a stamp equal to the pin means the install is complete and current.
const StampFile = ".installed"

// SetupHint names the fix for a missing plugin.
const SetupHint = "run `nitro setup` (or `make setup` in the repository)"

// UserPluginDir is the per-user folder `nitro setup` installs the plugin into by default, and the
// last place the resolver searches: os.UserCacheDir()/nitro/pjrt ($XDG_CACHE_HOME/nitro/pjrt or
// ~/.cache/nitro/pjrt on Linux).
func UserPluginDir() (string, error) { return pluginsearch.UserDir() }
