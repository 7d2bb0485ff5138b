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

// A mistyped allocator choice is refused before the program runs (hostalloc's init, in a program
// that links it, as this test binary does), naming the variable and its value, never run with
// glibc's defaults the user did not ask for; a good one is what the report shows.
func TestResolveRefusesABadHostAllocChoice(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostAllocChildEnv+"=1", hostalloc.Env+"=stable")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "host allocator: $"+hostalloc.Env+`="stable": want jemalloc`) {
		t.Fatalf("a program linking hostalloc with %s=stable: %v, %s", hostalloc.Env, err, out)
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

// hostAllocOrderChild resolves the CPU plugin, prints the allocator the report names, and runs a
// program whose 64 MiB result the plugin allocates on the host.
func hostAllocOrderChild() int {
	r, err := backend.Resolve(backend.XLA)
	if err != nil {
		fmt.Printf("RESOLVE-ERROR xla: %v\n", err)
		return 0
	}
	fmt.Printf("POLICY xla: %s\n", r.HostAlloc)
	exe := graph.MustNewExec(r.Backend, func(x *graph.Node) *graph.Node {
		return graph.AddScalar(graph.BroadcastToDims(x, 16<<20), 1) // 16 Mi float32s: 64 MiB
	})
	out := exe.MustExec(float32(2))
	v := out[0].Value().([]float32)
	fmt.Printf("VALUE %v %v\n", v[0], v[len(v)-1])
	return 0
}

// A program that links hostalloc (this test binary does) runs the CPU plugin on jemalloc, preloaded
// when it started, and the config report's allocator row says so; the plugin's large buffers
// compute right under it.
func TestCPUPluginRunsOnJemalloc(t *testing.T) {
	prereq.Allocator(t, "libjemalloc.so.2")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	var env []string
	for _, kv := range os.Environ() { // the child starts as a program would: nothing preloaded yet
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "NITRO_HOST_MALLOC") && !strings.HasPrefix(kv, "MALLOC_CONF=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, hostAllocChildEnv+"=order")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	text := string(out)
	if i := strings.Index(text, "RESOLVE-ERROR xla: "); i >= 0 {
		prereq.XLAPlugin.Need(t, errors.New(strings.TrimSpace(text[i:])))
	}
	if !strings.Contains(text, "POLICY xla: jemalloc (") || !strings.Contains(text, "MALLOC_CONF="+hostalloc.Conf) {
		t.Errorf("the CPU plugin's report should name jemalloc with its decay off:\n%s", text)
	}
	if !strings.Contains(text, "VALUE 3 3") {
		t.Errorf("the program under jemalloc computed wrong, want 3 .. 3:\n%s", text)
	}
}
