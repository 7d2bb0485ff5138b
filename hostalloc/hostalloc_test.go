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

// The child probes on the process's first thread, whose arena is glibc's main one: applied late,
// the policy cannot move a thread that took its own arena earlier, and glibc maps a block over a
// thread heap's 64 MiB bound directly whatever the mmap limit (docs/gpu.md says what that costs).
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		before, _ := Policy()
		fb := refault(block)
		p, err := Steady()
		fmt.Printf("BEFORE %q %d\nPOLICY %q %v\nREFAULT %d\n", before, fb, p, err, refault(block))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child runs this binary with the environment changes and returns its policy line after Steady and
// its refaults.
func child(t *testing.T, env ...string) (policy string, faults int64) {
	policy, _, faults = childBefore(t, env...)
	return policy, faults
}

// childBefore is child, with the policy line before Steady too.
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
		t.Skip("the steady policy is glibc's mallopt; this is " + runtime.GOOS)
	}
}

// The default keeps a freed large block mapped: writing it again faults (almost) no page, where
// glibc's defaults unmap it and fault every page back in.
func TestSteadyReusesFreedBlocks(t *testing.T) {
	needGlibcLinux(t)
	pages := int64(block / 4096)
	steady, sf := child(t, Env+"=", BackendEnv+"=xla", "GLIBC_TUNABLES=")
	if !strings.Contains(steady, "steady") {
		t.Fatalf("policy with %s unset: %s, want steady", Env, steady)
	}
	system, yf := child(t, Env+"=system", BackendEnv+"=xla", "GLIBC_TUNABLES=")
	if !strings.Contains(system, "=system") {
		t.Fatalf("policy with %s=system: %s", Env, system)
	}
	t.Logf("second write of a freed %d MiB block: %d minor faults steady, %d with glibc's defaults (%d pages)", block>>20, sf, yf, pages)
	if sf < 0 || sf > pages/20 {
		t.Errorf("steady: %d faults rewriting a freed block of %d pages, want about none", sf, pages)
	}
	if yf < pages/2 {
		t.Errorf("system: %d faults rewriting a freed block of %d pages, want about every page (is the probe measuring anything?)", yf, pages)
	}
}

// When the run may be on a GPU the policy waits for Steady (the CPU plugin's start): until then
// glibc's defaults hold, and a freed block faults back in. When it can only be on the CPU it is in
// place from load, before any thread took an arena.
func TestSteadyWaitsWhereTheRunMayBeOnAGPU(t *testing.T) {
	needGlibcLinux(t)
	pages := int64(block / 4096)
	_, nvidiaDriver := os.Stat("/proc/driver/nvidia/version")
	_, nvidiaCtl := os.Stat("/dev/nvidiactl")
	gpuHost := nvidiaDriver == nil || nvidiaCtl == nil
	for _, c := range []struct {
		backend, choice string
		waits           bool
	}{{"cuda", "", true}, {"go", "", true}, {"xla", "", false}, {"", "", gpuHost},
		// The user's explicit choice is not deferred: it holds from load, on a GPU run too.
		{"cuda", "steady", false}} {
		after, before, faults := childBefore(t, Env+"="+c.choice, BackendEnv+"="+c.backend, "GLIBC_TUNABLES=")
		beforeFaults := int64(-1)
		if i := strings.LastIndexByte(before, ' '); i >= 0 {
			beforeFaults, _ = strconv.ParseInt(before[i+1:], 10, 64)
		}
		waited := strings.Contains(before, "no CPU plugin has started")
		if waited != c.waits {
			t.Errorf("%s=%q (GPU host: %v): policy at load %s; want waiting %v", BackendEnv, c.backend, gpuHost, before, c.waits)
		}
		if c.waits && beforeFaults < pages/2 {
			t.Errorf("%s=%q: %d faults rewriting a freed block before Steady, want about every page (glibc's defaults)", BackendEnv, c.backend, beforeFaults)
		}
		if !c.waits && !strings.Contains(before, "steady: one malloc arena") {
			t.Errorf("%s=%q: policy at load %s, want steady", BackendEnv, c.backend, before)
		}
		if !strings.Contains(after, "steady: one malloc arena") || faults > pages/20 {
			t.Errorf("%s=%q: after Steady %s with %d refaults, want steady and about none", BackendEnv, c.backend, after, faults)
		}
	}
}

// A value that is neither choice applies nothing and Policy's error names the variable.
func TestBadValueNamesTheVariable(t *testing.T) {
	needGlibcLinux(t)
	p, f := child(t, Env+"=stedy", "GLIBC_TUNABLES=")
	if !strings.Contains(p, Env) || !strings.Contains(p, `"stedy"`) || !strings.Contains(p, "want steady") {
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
