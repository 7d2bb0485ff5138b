package backend_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/hostalloc"
	"github.com/nitro-go/nitro/internal/prereq"
)

const hostAllocChildEnv = "NITRO_BACKEND_TEST_HOSTALLOC_CHILD"

// Importing the backend links no allocator: module hostalloc's definitions of malloc come only
// with an import of its root package (a program's opt-in; this test binary's is the import
// above), and the backend reaches it through hostalloc/seam, which is plain Go.
func TestBackendLinksNoAllocator(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nitro-go/nitro/backend").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if slices.Contains(deps, "github.com/nitro-go/nitro/hostalloc") || !slices.Contains(deps, "github.com/nitro-go/nitro/hostalloc/seam") {
		t.Errorf("backend's dependencies hold hostalloc's root package, or not its seam: %v", deps)
	}
}

// A mistyped allocator choice is refused at resolution, naming the variable and its value, never
// run with glibc's defaults the user did not ask for; a good one is what the report shows.
func TestResolveRefusesABadHostAllocChoice(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostAllocChildEnv+"=1", hostalloc.Env+"=stable", "GLIBC_TUNABLES=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "RESOLVE-ERROR $"+hostalloc.Env+`="stable": want blocks`) {
		t.Fatalf("resolution with %s=stable: %s", hostalloc.Env, out)
	}
	r, err := backend.Resolve(backend.Go)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hostalloc.Policy()
	if r.HostAlloc == "" || r.HostAlloc != want {
		t.Errorf("Resolved.HostAlloc = %q, want the policy %q", r.HostAlloc, want)
	}
}

// hostAllocOrderChild resolves the pure-Go backend, then the CPU plugin, printing the policy each
// reports (a fresh process: the policy is process-wide and applied once); then it runs a program
// whose 64 MiB result the plugin allocates, and prints the cache's blocks served before and after.
func hostAllocOrderChild() int {
	var r *backend.Resolved
	for _, name := range []string{backend.Go, backend.XLA} {
		var err error
		if r, err = backend.Resolve(name); err != nil {
			fmt.Printf("RESOLVE-ERROR %s: %v\n", name, err)
			return 0
		}
		fmt.Printf("POLICY %s: %s\n", name, r.HostAlloc)
	}
	exe := graph.MustNewExec(r.Backend, func(x *graph.Node) *graph.Node {
		return graph.AddScalar(graph.BroadcastToDims(x, 16<<20), 1) // 16 Mi float32s: 64 MiB
	})
	before := hostalloc.BlockStats().Served
	out := exe.MustExec(float32(2))
	v := out[0].Value().([]float32)
	fmt.Printf("SERVED %d %d\nVALUE %v %v\n", before, hostalloc.BlockStats().Served, v[0], v[len(v)-1])
	return 0
}

// The large-block cache is the CPU plugin's: resolving another backend leaves glibc's defaults
// (on a GPU, step buffers live on the device), the CPU plugin's resolution turns it on before its
// client starts, and the plugin's own large allocations then come from it (its malloc binds to
// the executable's).
func TestHostAllocOnlyForTheCPUPlugin(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostAllocChildEnv+"=order", hostalloc.Env+"=", "GLIBC_TUNABLES=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	text := string(out)
	if i := strings.Index(text, "RESOLVE-ERROR xla: "); i >= 0 {
		prereq.XLAPlugin.Need(t, errors.New(strings.TrimSpace(text[i:])))
	}
	if !strings.Contains(text, "POLICY go: glibc's defaults: the large-block cache") {
		t.Errorf("after resolving the pure-Go backend the policy should still be glibc's defaults:\n%s", text)
	}
	if !strings.Contains(text, "POLICY xla: large-block cache") {
		t.Errorf("after resolving the CPU plugin the policy should be the large-block cache:\n%s", text)
	}
	var before, after int64
	var first, last float32
	if _, err := fmt.Sscanf(text[strings.Index(text, "SERVED "):], "SERVED %d %d\nVALUE %v %v", &before, &after, &first, &last); err != nil {
		t.Fatalf("child printed no counts (%v):\n%s", err, text)
	}
	t.Logf("blocks the cache served: %d before the program, %d after", before, after)
	if after <= before {
		t.Errorf("the plugin's 64 MiB result did not come from the cache (blocks served %d before, %d after)", before, after)
	}
	if first != 3 || last != 3 {
		t.Errorf("the program computed %v .. %v, want 3", first, last)
	}
}
