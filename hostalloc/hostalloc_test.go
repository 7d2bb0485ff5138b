package hostalloc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const block = 64 << 20 // over glibc's largest mmap threshold (32 MiB), so system malloc maps it

// childEnv marks a re-executed test binary that only reports its policy and refaults.
const childEnv = "NITRO_HOSTALLOC_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		before, _ := Policy()
		fb := refault(block)
		p, err := Apply()
		fmt.Printf("BEFORE %q %d\nPOLICY %q %v\nREFAULT %d\n", before, fb, p, err, refault(block))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child runs this binary with the environment changes and returns its policy line after Apply and
// its refaults.
func child(t *testing.T, env ...string) (policy string, faults int64) {
	policy, _, faults = childBefore(t, env...)
	return policy, faults
}

// childBefore is child, with the policy line before Apply too.
func childBefore(t *testing.T, env ...string) (policy, before string, faults int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %v: %v\n%s", env, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(line, "POLICY "); ok {
			policy = s
		}
		if s, ok := strings.CutPrefix(line, "BEFORE "); ok {
			before = s
		}
		if s, ok := strings.CutPrefix(line, "REFAULT "); ok {
			faults, _ = strconv.ParseInt(s, 10, 64)
		}
	}
	if policy == "" {
		t.Fatalf("child %v printed no policy:\n%s", env, out)
	}
	return policy, before, faults
}

func needGlibcLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("nitro's policies are glibc's; this is " + runtime.GOOS)
	}
}

// beforeFaults is the refault count on a child's policy line before Apply.
func beforeFaults(before string) int64 {
	n := int64(-1)
	if i := strings.LastIndexByte(before, ' '); i >= 0 {
		n, _ = strconv.ParseInt(before[i+1:], 10, 64)
	}
	return n
}

// Unset, nothing is applied until Apply (the CPU plugin's start): a freed large block faults back
// in, page by page, as under glibc's defaults. After Apply it stays mapped and is rewritten with
// (almost) no fault. System keeps glibc's defaults throughout.
func TestDefaultReusesFreedBlocksAfterApply(t *testing.T) {
	needGlibcLinux(t)
	pages := int64(block / 4096)
	after, before, faults := childBefore(t, Env+"=", "GLIBC_TUNABLES=")
	if !strings.Contains(before, "no CPU plugin has started") || beforeFaults(before) < pages/2 {
		t.Errorf("before Apply: %s; want glibc's defaults, about every page of %d faulting again", before, pages)
	}
	if !strings.Contains(after, "large-block cache") || faults < 0 || faults > pages/20 {
		t.Errorf("after Apply: %s with %d refaults of %d pages, want the large-block cache and about none", after, faults, pages)
	}
	system, yf := child(t, Env+"=system", "GLIBC_TUNABLES=")
	if !strings.Contains(system, "=system") || yf < pages/2 {
		t.Errorf("%s=system: %s with %d refaults, want glibc's defaults and about every page (is the probe measuring anything?)", Env, system, yf)
	}
	t.Logf("second write of a freed %d MiB block: %d minor faults before Apply, %d after, %d with system (%d pages)", block>>20, beforeFaults(before), faults, yf, pages)
}

// An explicit choice is the user's and holds from load, wherever the run is.
func TestExplicitChoiceHoldsFromLoad(t *testing.T) {
	needGlibcLinux(t)
	pages := int64(block / 4096)
	for _, c := range []struct{ choice, want string }{{"blocks", "large-block cache"}, {"steady", "one malloc arena, no mmap"}} {
		after, before, faults := childBefore(t, Env+"="+c.choice, "GLIBC_TUNABLES=")
		if !strings.Contains(before, c.want) || beforeFaults(before) > pages/20 {
			t.Errorf("%s=%s: at load %s; want %q and about no refaults", Env, c.choice, before, c.want)
		}
		if !strings.Contains(after, c.want) || faults > pages/20 {
			t.Errorf("%s=%s: Apply changed the policy to %s (%d refaults); the user's choice stays", Env, c.choice, after, faults)
		}
	}
}

// A value that is neither choice applies nothing and Policy's error names the variable.
func TestBadValueNamesTheVariable(t *testing.T) {
	needGlibcLinux(t)
	p, f := child(t, Env+"=stedy", "GLIBC_TUNABLES=")
	if !strings.Contains(p, Env) || !strings.Contains(p, `"stedy"`) || !strings.Contains(p, "want blocks") {
		t.Errorf("policy with a bad value: %s, want an error naming %s and its value", p, Env)
	}
	if f < block/4096/2 {
		t.Errorf("a bad value applied the policy anyway (%d refaults)", f)
	}
}

// A malloc setting in GLIBC_TUNABLES is the user's: nitro applies nothing over it.
func TestTunablesAreTheUsers(t *testing.T) {
	needGlibcLinux(t)
	p, _ := child(t, Env+"=", "GLIBC_TUNABLES=glibc.malloc.perturb=0")
	if !strings.Contains(p, "GLIBC_TUNABLES") {
		t.Errorf("policy with GLIBC_TUNABLES set: %s, want it left to the tunables", p)
	}
}

// A library ahead of glibc that defines malloc alone (a wrapper of glibc's, no free) is no
// allocator: hostalloc stays on glibc's, the cache included (real allocators preloaded:
// TestUnderPreloadedAllocators).
func TestMallocWrapperIsNoAllocator(t *testing.T) {
	needGlibcLinux(t)
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	dir := t.TempDir()
	src, lib := dir+"/pre.c", dir+"/pre.so"
	code := "#include <stddef.h>\nextern void *__libc_malloc(size_t);\nvoid *malloc(size_t n) { return __libc_malloc(n); }\n"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building a preloadable malloc with %s (cgo's compiler, which this package needs anyway): %v\n%s", cc, err, out)
	}
	pre, faults := child(t, Env+"=", "GLIBC_TUNABLES=", "LD_PRELOAD="+lib)
	if !strings.Contains(pre, "large-block cache") || faults > block/4096/20 {
		t.Errorf("policy under a malloc wrapper: %s (%d refaults), want the large-block cache", pre, faults)
	}
}
