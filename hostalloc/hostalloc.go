package hostalloc

import (
	"debug/elf"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/nitro-go/nitro/hostalloc/seam"
)

// The variables hostalloc reads.
const (
	Env        = seam.Env         // NITRO_HOST_MALLOC: unset or "jemalloc", or "system"
	EnvLibrary = "NITRO_JEMALLOC" // the jemalloc library file (default: the system's libjemalloc.so.2)
	// envStarted marks the re-executed process with the library it preloaded, so that it is
	// re-executed once, and Policy can tell its own preload from a deployment's; envConf, that
	// MALLOC_CONF is hostalloc's. The process removes all three at init (after the loader read
	// them), so the programs it starts in turn begin as the user's environment has them.
	envStarted = "NITRO_HOST_MALLOC_PRELOADED"
	envConf    = "NITRO_HOST_MALLOC_CONF"
)

// started is the library this process was re-executed under ("" when it was not), and conf the
// MALLOC_CONF it started with: read at init, before the variables are removed.
var started, conf string

// Conf is the MALLOC_CONF the re-executed program gets: freed dirty and muzzy extents are never
// returned to the system, so a step's freed buffers serve the next step's requests.
const Conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1"

// searchDirs are where a system keeps libjemalloc.so.2 (Debian's multiarch folder first).
var searchDirs = []string{"/usr/lib/" + multiarch(), "/usr/lib64", "/usr/lib", "/usr/local/lib", "/lib/" + multiarch()}

func multiarch() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// The backend reads the allocator through the seam; the re-execution happens here, at init,
// before main: an import is the opt-in.
func init() {
	seam.Register(seam.Allocator{Policy: Policy, Apply: Policy})
	if p, ok := os.LookupEnv(envStarted); ok {
		if os.Getenv("LD_PRELOAD") == p {
			started, conf = p, os.Getenv("MALLOC_CONF")
			os.Unsetenv("LD_PRELOAD")
		}
		if _, ours := os.LookupEnv(envConf); ours {
			os.Unsetenv("MALLOC_CONF")
		}
		os.Unsetenv(envStarted)
		os.Unsetenv(envConf)
	}
	if err := start(); err != nil {
		fmt.Fprintln(os.Stderr, "nitro: host allocator:", err)
		os.Exit(2)
	}
}

// choice is what the environment asks for: the library to preload ("" for none), why not, and
// an error naming the variable for a choice that cannot run.
func choice() (lib, why string, err error) {
	mode := os.Getenv(Env)
	switch mode {
	case "", "jemalloc":
	case "system":
		return "", "glibc's defaults ($" + Env + "=system)", nil
	case "blocks", "steady":
		return "", "", fmt.Errorf("$%s=%q: nitro's own large-block cache and steady policy were replaced by jemalloc with its decay off (docs/profiling.md): unset %s for jemalloc, or set it to system for glibc's defaults", Env, mode, Env)
	default:
		return "", "", fmt.Errorf("$%s=%q: want jemalloc (the default: freed step buffers stay mapped for reuse) or system (glibc's defaults)", Env, mode)
	}
	if started != "" {
		return started, "", nil
	}
	if p := os.Getenv("LD_PRELOAD"); p != "" {
		if mode == "jemalloc" {
			return "", "", fmt.Errorf("$%s=jemalloc, but LD_PRELOAD=%s loads another library first: unset one of them", Env, p)
		}
		return "", "the allocator LD_PRELOAD=" + p + " loads, or glibc's: hostalloc stands aside for a preload", nil
	}
	if runtime.GOOS != "linux" {
		return "", "the C library's defaults (hostalloc preloads jemalloc on Linux only)", nil
	}
	lib, err = library()
	if err != nil && mode == "jemalloc" {
		return "", "", fmt.Errorf("$%s=jemalloc: %w", Env, err)
	}
	if err != nil {
		return "", "glibc's defaults: " + err.Error() + "; install it (Debian: apt-get install libjemalloc2) to keep freed step buffers mapped, or set $" + Env + "=system to say glibc's are meant", nil
	}
	return lib, "", nil
}

// library finds libjemalloc.so.2: $NITRO_JEMALLOC, else the system's.
func library() (string, error) {
	if p := os.Getenv(EnvLibrary); p != "" {
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			return "", fmt.Errorf("$%s=%s is no library file", EnvLibrary, p)
		}
		return p, nil
	}
	for _, d := range searchDirs {
		p := d + "/libjemalloc.so.2"
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no libjemalloc.so.2 in %s (nor $%s)", strings.Join(searchDirs, ", "), EnvLibrary)
}

// start re-executes the program under lib, once. The environment it adds is inherited by what the
// program starts in turn, which then runs under jemalloc too (and is not re-executed again).
func start() error {
	lib, _, err := choice()
	if err != nil || lib == "" || started != "" {
		return err
	}
	exe, err := os.Executable()
	if err != nil || !dynamic(exe) {
		return nil // nothing to re-execute, or no loader to preload with: Policy says which
	}
	env := append(os.Environ(), "LD_PRELOAD="+lib, envStarted+"="+lib)
	if _, set := os.LookupEnv("MALLOC_CONF"); !set {
		env = append(env, "MALLOC_CONF="+Conf, envConf+"=1")
	}
	return syscall.Exec(exe, os.Args, env) // returns only on failure
}

// Policy says which allocator is in force, in one line for a config report, or an error naming
// $NITRO_HOST_MALLOC for a choice that cannot run.
func Policy() (string, error) {
	lib, why, err := choice()
	switch {
	case err != nil:
		return "", err
	case why != "":
		return why, nil
	case started == "" && !executableDynamic():
		return "the C library's defaults: the program is statically linked, so no allocator can be preloaded into it", nil
	case started == "" || !mapped(lib):
		return "glibc's defaults: jemalloc (" + lib + ") is not loaded (the program was not re-executed under it)", nil
	}
	return "jemalloc (" + lib + ", preloaded at start; MALLOC_CONF=" + conf + "): freed step buffers stay mapped for reuse ($" + Env + "=system for glibc's defaults)", nil
}

// mapped reports whether the file lib is mapped into this process (/proc/self/maps): the proof
// that LD_PRELOAD took, rather than the variables that asked for it.
func mapped(lib string) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	return err == nil && strings.Contains(string(maps), lib)
}

// dynamic reports whether exe is started by the dynamic loader (it has an interpreter), the only
// kind of program LD_PRELOAD reaches. A program of cgo, as every one that runs the PJRT plugin, is.
func dynamic(exe string) bool {
	f, err := elf.Open(exe)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

func executableDynamic() bool {
	exe, err := os.Executable()
	return err == nil && dynamic(exe)
}
