package hostalloc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
)

// dynprog is testdata/dynprog built once: a program of cgo (dynamically linked, as every program
// that runs the PJRT plugin) that imports hostalloc and prints what it chose.
var dynprog struct {
	once sync.Once
	path string
	err  error
}

// buildDir holds the test's programs; TestMain removes it.
var buildDir string

func TestMain(m *testing.M) {
	var err error
	if buildDir, err = os.MkdirTemp("", "hostalloc-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// child runs dynprog with env added (LD_PRELOAD, $NITRO_HOST_MALLOC and MALLOC_CONF cleared
// first), and returns what it printed.
func child(t *testing.T, env ...string) string {
	t.Helper()
	dynprog.once.Do(func() {
		dynprog.path = filepath.Join(buildDir, "dynprog")
		out, err := exec.Command("go", "build", "-o", dynprog.path, "./testdata/dynprog").CombinedOutput()
		if err != nil {
			dynprog.err = fmt.Errorf("go build ./testdata/dynprog: %v\n%s", err, out)
		}
	})
	if dynprog.err != nil {
		t.Fatal(dynprog.err)
	}
	cmd := exec.Command(dynprog.path)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, Env+"=") && !strings.HasPrefix(kv, envStarted+"=") && !strings.HasPrefix(kv, "MALLOC_CONF=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "host allocator:") {
		t.Fatalf("child %v: %v\n%s", env, err, out)
	}
	return string(out)
}

func wantIn(t *testing.T, what, out string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(out, s) {
			t.Errorf("%s: output lacks %q:\n%s", what, s, out)
		}
	}
}

// An import re-executes the program under jemalloc with its decay off, once, and the report says
// so; the library really is mapped.
func TestImportPreloadsJemalloc(t *testing.T) {
	prereq.Allocator(t, "libjemalloc.so.2")
	out := child(t)
	wantIn(t, "default", out, `POLICY "jemalloc (`, "MALLOC_CONF="+Conf+")", "JEMALLOC true",
		`INHERIT LD_PRELOAD="" MALLOC_CONF=""`) // the programs it starts begin as the user's environment
	// A MALLOC_CONF of the user's stands, and is inherited.
	out = child(t, "MALLOC_CONF=narenas:2")
	wantIn(t, "the user's MALLOC_CONF", out, "JEMALLOC true", "MALLOC_CONF=narenas:2)", `INHERIT LD_PRELOAD="" MALLOC_CONF="narenas:2"`)
	// $NITRO_JEMALLOC names the file.
	lib := prereq.Allocator(t, "libjemalloc.so.2")
	wantIn(t, EnvLibrary, child(t, EnvLibrary+"="+lib, Env+"=jemalloc"), "JEMALLOC true", "jemalloc ("+lib)
}

// What keeps glibc's defaults, each said in the report: the user's choice, a deployment's preload
// (which stands), a missing library (with the way to install it).
func TestWhatKeepsGlibc(t *testing.T) {
	wantIn(t, "system", child(t, Env+"=system"), `POLICY "glibc's defaults ($NITRO_HOST_MALLOC=system)"`, "JEMALLOC false")
	wantIn(t, "missing library", child(t, EnvLibrary+"=/nonexistent/libjemalloc.so.2"),
		`POLICY "glibc's defaults: $NITRO_JEMALLOC=/nonexistent/libjemalloc.so.2 is no library file`, "apt-get install libjemalloc2", "JEMALLOC false")
	tc := prereq.Allocator(t, "libtcmalloc_minimal.so.4")
	out := child(t, "LD_PRELOAD="+tc)
	wantIn(t, "a preload", out, "hostalloc stands aside for a preload", "LD_PRELOAD="+tc, "JEMALLOC false")
}

// A choice that cannot run is refused before main, naming the variable.
func TestBadChoicesAreRefused(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{Env + "=blocks", `$NITRO_HOST_MALLOC="blocks": nitro's own large-block cache and steady policy were replaced by jemalloc`},
		{Env + "=stable", `$NITRO_HOST_MALLOC="stable": want jemalloc`},
	} {
		wantIn(t, c.env, child(t, c.env), c.want)
	}
	wantIn(t, "jemalloc required, missing", child(t, Env+"=jemalloc", EnvLibrary+"=/nonexistent"), "$NITRO_HOST_MALLOC=jemalloc: $NITRO_JEMALLOC=/nonexistent is no library file")
}

// A program without a dynamic loader (pure Go, statically linked) cannot be preloaded into: it is
// not re-executed, and the report says why.
func TestStaticProgramIsNotReexecuted(t *testing.T) {
	if dynamic(os.Args[0]) {
		t.Skip("this test binary is dynamically linked here (cgo in its dependencies)")
	}
	p, err := Policy()
	if err != nil || !strings.Contains(p, "statically linked") || started != "" {
		t.Errorf("Policy() = %q, %v; re-executed under %q; want the static program's line and no re-execution", p, err, started)
	}
}
