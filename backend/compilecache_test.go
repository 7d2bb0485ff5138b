package backend_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// TestMain keeps every test of this package off the user's compile cache, and runs the child
// half of the cross-process tests when asked to.
func TestMain(m *testing.M) {
	if os.Getenv(compileChildEnv) != "" {
		os.Exit(compileChild())
	}
	if v := os.Getenv(hostAllocChildEnv); v == "order" {
		os.Exit(hostAllocOrderChild())
	} else if v != "" {
		_, err := backend.Resolve(backend.Go)
		fmt.Printf("RESOLVE-ERROR %v\n", err)
		os.Exit(0)
	}
	if os.Getenv(backend.EnvCompileCache) == "" {
		dir, err := os.MkdirTemp("", "nitro-backend-test-cache-")
		if err != nil {
			panic(err)
		}
		os.Setenv(backend.EnvCompileCache, dir)
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

const compileChildEnv = "NITRO_BACKEND_TEST_COMPILE_CHILD"

// childReport is what one child process did: its output values and its compile counts.
type childReport struct {
	Values   []float32
	Compiled int64
	FromDisk int64
	Cache    string
	Err      string
}

// compileChild resolves the XLA backend (the plugin and cache from the environment), compiles
// and runs x*k+1 for k from the child variable, and prints a childReport.
func compileChild() int {
	var rep childReport
	defer func() { json.NewEncoder(os.Stdout).Encode(rep) }()
	r, err := backend.Resolve("xla")
	if err != nil {
		rep.Err = err.Error()
		return 0
	}
	rep.Cache = r.CompileCache.String()
	var k float64
	fmt.Sscan(os.Getenv(compileChildEnv), &k)
	exe := graph.MustNewExec(r.Backend, func(x *graph.Node) *graph.Node {
		return graph.AddScalar(graph.MulScalar(x, k), 1)
	})
	out := exe.MustExec([]float32{1, 2, 3})
	rep.Values = out[0].Value().([]float32)
	rep.Compiled, rep.FromDisk = backend.CompileCounts()
	// The entry is written in the background: a program that exits right after its compile
	// flushes, or the entry is missing (a compile next time).
	backend.FlushCompileCache()
	return 0
}

// child runs this test binary as a compiling child with env added.
func child(t *testing.T, k string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{compileChildEnv + "=" + k}, env...)...)
	return cmd
}

func report(t *testing.T, cmd *exec.Cmd) (childReport, string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	var rep childReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("child printed %q: %v\n%s", out, err, stderr.String())
	}
	if rep.Err != "" {
		t.Fatalf("child: %s", rep.Err)
	}
	return rep, stderr.String()
}

func needPlugin(t *testing.T) string {
	t.Helper()
	p, _, err := backend.FindPlugin()
	if err != nil || p == "" {
		prereq.XLAPlugin.Need(t, fmt.Errorf("no plugin found (%v)", err))
	}
	return p
}

func want(t *testing.T, rep childReport, compiled, fromDisk int64, values []float32) {
	t.Helper()
	if rep.Compiled != compiled || rep.FromDisk != fromDisk {
		t.Fatalf("child compiled %d, loaded %d from disk; want %d and %d (cache %s)", rep.Compiled, rep.FromDisk, compiled, fromDisk, rep.Cache)
	}
	if fmt.Sprint(rep.Values) != fmt.Sprint(values) {
		t.Fatalf("child computed %v, want %v", rep.Values, values)
	}
}

// A second process loads what the first compiled, and computes the same values; another program
// (k moved) is a miss.
func TestCompileCacheAcrossProcesses(t *testing.T) {
	needPlugin(t)
	dir := t.TempDir()
	env := backend.EnvCompileCache + "=" + dir
	first, _ := report(t, child(t, "2", env))
	want(t, first, 1, 0, []float32{3, 5, 7})
	second, _ := report(t, child(t, "2", env))
	want(t, second, 0, 1, []float32{3, 5, 7})
	other, _ := report(t, child(t, "3", env))
	want(t, other, 1, 0, []float32{4, 7, 10})
	off, _ := report(t, child(t, "2", backend.EnvCompileCache+"=off"))
	want(t, off, 1, 0, []float32{3, 5, 7})
	if !strings.Contains(off.Cache, "off") {
		t.Fatalf("cache off reports %q", off.Cache)
	}
	// rank 1 compiles and writes nothing.
	ranked := t.TempDir()
	r1, _ := report(t, child(t, "2", backend.EnvCompileCache+"="+ranked, backend.EnvRank+"=1"))
	want(t, r1, 1, 0, []float32{3, 5, 7})
	if _, n, _ := diskcache.Size(ranked); n != 0 {
		t.Fatalf("rank 1 wrote %d entries", n)
	}
}

// Two processes racing to compile one key leave one whole entry, which a third loads.
func TestCompileCacheRacingProcesses(t *testing.T) {
	needPlugin(t)
	dir := t.TempDir()
	env := backend.EnvCompileCache + "=" + dir
	var wg sync.WaitGroup
	reps := make([]childReport, 4)
	for i := range reps {
		wg.Add(1)
		cmd := child(t, "2", env)
		go func() {
			defer wg.Done()
			out, err := cmd.Output()
			if err == nil {
				err = json.Unmarshal(out, &reps[i])
			}
			if err != nil {
				t.Errorf("child %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ok, bad, err := diskcache.Verify(dir, false)
	if err != nil || ok != 1 || len(bad) != 0 {
		t.Fatalf("after four racing writers: ok=%d bad=%v err=%v", ok, bad, err)
	}
	last, _ := report(t, child(t, "2", env))
	want(t, last, 0, 1, []float32{3, 5, 7})
}

// An entry whose executable the plugin refuses (checksum and key whole, the bytes garbage) is a
// miss that deletes it and says so: never a crash, never a wrong program.
func TestCompileCachePluginRefusedEntry(t *testing.T) {
	needPlugin(t)
	dir := t.TempDir()
	env := backend.EnvCompileCache + "=" + dir
	report(t, child(t, "2", env))
	entries, _, _ := diskcache.List(dir)
	if len(entries) != 1 {
		t.Fatalf("%d entries", len(entries))
	}
	path := filepath.Join(dir, entries[0].File)
	m, exe, err := diskcache.ReadEntry(path)
	if err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte{0x5a}, len(exe))
	if err := diskcache.WriteEntry(path, m, garbage); err != nil {
		t.Fatal(err)
	}
	rep, stderr := report(t, child(t, "2", env))
	want(t, rep, 1, 0, []float32{3, 5, 7})
	if !strings.Contains(stderr, "the plugin refused its executable") {
		t.Fatalf("stderr %q: want the refusal said", stderr)
	}
	again, _ := report(t, child(t, "2", env))
	want(t, again, 0, 1, []float32{3, 5, 7})
}

// A plugin swapped for another file (here the same plugin with one byte appended) never loads the
// first one's entry.
func TestCompileCachePluginSwap(t *testing.T) {
	plugin := needPlugin(t)
	dir := t.TempDir()
	env := backend.EnvCompileCache + "=" + dir
	report(t, child(t, "2", env, backend.EnvPluginPath+"="+plugin))
	other := filepath.Join(t.TempDir(), backend.PluginFile)
	copyFile(t, plugin, other, []byte{0})
	rep, stderr := report(t, child(t, "2", env, backend.EnvPluginPath+"="+other))
	want(t, rep, 1, 0, []float32{3, 5, 7})
	if !strings.Contains(stderr, "plugin changed") {
		t.Fatalf("stderr %q: want the miss explained as a plugin change", stderr)
	}
	if _, n, _ := diskcache.Size(dir); n != 2 {
		t.Fatalf("%d entries after two plugins, want 2", n)
	}
}

func copyFile(t *testing.T, from, to string, extra []byte) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(extra); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
