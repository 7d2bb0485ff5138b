package backend_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/hostalloc"
	"github.com/nitro-go/nitro/internal/prereq"
)

const hostAllocChildEnv = "NITRO_BACKEND_TEST_HOSTALLOC_CHILD"

// A mistyped allocator choice is refused at resolution, naming the variable and its value, never
// run with glibc's defaults the user did not ask for; a good one is what the report shows.
func TestResolveRefusesABadHostAllocChoice(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostAllocChildEnv+"=1", hostalloc.Env+"=stable", "GLIBC_TUNABLES=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "RESOLVE-ERROR $"+hostalloc.Env+`="stable": want steady`) {
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
// reports (a fresh process: the policy is process-wide and applied once).
func hostAllocOrderChild() int {
	for _, name := range []string{backend.Go, backend.XLA} {
		r, err := backend.Resolve(name)
		if err != nil {
			fmt.Printf("RESOLVE-ERROR %s: %v\n", name, err)
			return 0
		}
		fmt.Printf("POLICY %s: %s\n", name, r.HostAlloc)
	}
	return 0
}

// The steady policy is the CPU plugin's: where the run may be on a GPU ($NITRO_BACKEND=cuda here)
// it waits, resolving another backend leaves glibc's defaults (on a GPU one malloc arena
// serializes the compiler's autotuning threads), and the CPU plugin's resolution applies it
// before its client starts.
func TestSteadyPolicyOnlyForTheCPUPlugin(t *testing.T) {
	if hostalloc.BackendEnv != backend.EnvBackend {
		t.Fatalf("hostalloc reads $%s at load, the backend is named by $%s", hostalloc.BackendEnv, backend.EnvBackend)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostAllocChildEnv+"=order", hostalloc.Env+"=", "GLIBC_TUNABLES=", backend.EnvBackend+"=cuda")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	text := string(out)
	if i := strings.Index(text, "RESOLVE-ERROR xla: "); i >= 0 {
		prereq.XLAPlugin.Need(t, errors.New(strings.TrimSpace(text[i:])))
	}
	if !strings.Contains(text, "POLICY go: glibc's defaults: the steady policy") {
		t.Errorf("after resolving the pure-Go backend the policy should still be glibc's defaults:\n%s", text)
	}
	if !strings.Contains(text, "POLICY xla: steady: one malloc arena") {
		t.Errorf("after resolving the CPU plugin the policy should be steady:\n%s", text)
	}
}
