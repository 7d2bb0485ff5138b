package hostalloc

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"github.com/nitro-go/nitro/internal/prereq"
)

const preloadEnv = "NITRO_HOSTALLOC_PRELOAD_CHILD"

// Under an allocator loaded ahead of glibc (each of jemalloc, tcmalloc and mimalloc preloaded),
// hostalloc stands aside: the report names that allocator, Apply turns nothing on, and every
// entry point serves and takes back that allocator's blocks, those it made through entry points
// of its own too (C++'s new and delete, which aborted the process under jemalloc when free handed
// its blocks to glibc). NITRO_HOST_MALLOC=system is accepted there; blocks is refused.
func TestUnderPreloadedAllocators(t *testing.T) {
	needGlibcLinux(t)
	if os.Getenv(preloadEnv) != "" {
		preloadChild(t)
		return
	}
	for _, a := range prereq.PreloadAllocators {
		t.Run(a.Name, func(t *testing.T) {
			lib := prereq.Allocator(t, a.File)
			run := func(choice string) (string, error) {
				cmd := exec.Command(os.Args[0], "-test.run=^TestUnderPreloadedAllocators$", "-test.v")
				cmd.Env = append(os.Environ(), preloadEnv+"=1", "LD_PRELOAD="+lib, Env+"="+choice, "GLIBC_TUNABLES=")
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			out, err := run("")
			if err != nil || !strings.Contains(out, "--- PASS: TestUnderPreloadedAllocators") {
				t.Fatalf("the child under %s: %v\n%s", lib, err, out)
			}
			if !strings.Contains(out, "POLICY the allocator of "+lib+": hostalloc stands aside") {
				t.Errorf("the child's report does not name %s:\n%s", lib, out)
			}
			if a.Name == "jemalloc" && !strings.Contains(out, "CXX new and delete paired") {
				t.Errorf("jemalloc's operator new and delete were not probed:\n%s", out)
			}
			t.Logf("%s", out)
			if out, err := run("system"); err != nil || !strings.Contains(out, "--- PASS") {
				t.Errorf("%s=system under %s: %v\n%s", Env, lib, err, out)
			}
			if out, _ := run("blocks"); !strings.Contains(out, "REFUSED $"+Env+`="blocks": malloc belongs to the allocator of `+lib) {
				t.Errorf("%s=blocks under %s was not refused naming both:\n%s", Env, lib, out)
			}
		})
	}
}

func preloadChild(t *testing.T) {
	p, err := Apply()
	if err != nil {
		t.Logf("REFUSED %v", err)
		return
	}
	t.Logf("POLICY %s", p)
	if cxxNewDelete(20000) == 0 {
		t.Log("CXX new and delete paired")
	}
	if rc := ownerBlocks(); rc != 0 {
		t.Errorf("blocks the preloaded allocator made itself, through this package's free, realloc and malloc_usable_size: step %d failed", rc)
	}
	for _, n := range []int{40, 5000, 2 * mib, 40 * mib} {
		check := func(what string, p unsafe.Pointer, align int) {
			t.Helper()
			if p == nil || uintptr(p)%uintptr(align) != 0 || cUsable(p) < n {
				t.Errorf("%s(%d): %p, usable %d, want %d bytes aligned to %d", what, n, p, cUsable(p), n, align)
				return
			}
			fill(bytesAt(p, n), 3)
			cFree(p)
		}
		check("malloc", cMalloc(n), 16)
		c := cCalloc(n, 1)
		if c != nil && strings.Count(string(bytesAt(c, n)), "\x00") != n {
			t.Errorf("calloc(%d) is not zero", n)
		}
		check("calloc", c, 16)
		r := cRealloc(cMalloc(n/2+1), n)
		check("realloc", r, 16)
		check("reallocarray", cReallocArray(nil, n, 1), 16)
		check("aligned_alloc", cAlignedAlloc(4096, n), 4096)
		check("memalign", cMemalign(64<<10, n), 64<<10)
		pm, rc := cPosixMemalign(256, n)
		if rc != 0 {
			t.Errorf("posix_memalign(256, %d) = %d", n, rc)
		}
		check("posix_memalign", pm, 256)
		check("valloc", cValloc(n), 4096)
		check("pvalloc", cPvalloc(n), 4096)
	}
	if s := BlockStats(); s.Served != 0 || s.ReservedBytes != 0 {
		t.Errorf("the cache is on under another allocator: %+v", s)
	}
}
