package backend_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/hostalloc"
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
