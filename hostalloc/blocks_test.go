package hostalloc

import (
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

const (
	mib       = 1 << 20
	cornerEnv = "NITRO_HOSTALLOC_CORNERS"
)

// The corners run in a child with the cache on from load: the cache is process-wide and the
// parent's tests need glibc's defaults in their own children only, but a user's
// $NITRO_HOST_MALLOC must not decide what this test sees.
func TestBlockCorners(t *testing.T) {
	needGlibcLinux(t)
	if os.Getenv(cornerEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBlockCorners$", "-test.v")
		cmd.Env = append(os.Environ(), cornerEnv+"=1", Env+"=blocks", "GLIBC_TUNABLES=")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestBlockCorners") {
			t.Fatalf("the corners' child: %v\n%s", err, out)
		}
		t.Logf("%s", out)
		return
	}
	if p, _ := Policy(); !strings.Contains(p, "large-block cache") {
		t.Fatalf("child policy %s, want the large-block cache", p)
	}
	t.Run("reuse", cornerReuse)
	t.Run("calloc zeroes a reused block", cornerCalloc)
	t.Run("realloc across the threshold", cornerRealloc)
	t.Run("alignment", cornerAlign)
	t.Run("usable size", cornerUsable)
	t.Run("neighbours merge", cornerMerge)
	t.Run("threads", cornerThreads)
	if s := BlockStats(); s.InUseBytes != 0 || s.DroppedBytes != 0 {
		t.Errorf("after every corner freed its blocks: %+v, want nothing in use or dropped", s)
	}
}

func bytesAt(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }

// served counts the blocks the cache handed out: it moves only for a block from the cache.
func served() int64 { return BlockStats().Served }

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

// same reports the first index where b does not hold fill's pattern, or -1.
func same(b []byte, seed byte) int {
	for i := range b {
		if b[i] != seed+byte(i*7) {
			return i
		}
	}
	return -1
}

func cornerReuse(t *testing.T) {
	s0 := BlockStats()
	p := cMalloc(64 * mib)
	if s := BlockStats(); s.Served != s0.Served+1 || s.InUseBytes < 64*mib {
		t.Fatalf("malloc(64 MiB): %+v before, %+v after; want one block served", s0, s)
	}
	if uintptr(p)%4096 != 0 {
		t.Errorf("a cached block at %p is not page aligned", p)
	}
	fill(bytesAt(p, 64*mib), 1)
	cFree(p)
	q := cMalloc(60 * mib)
	if q != p || BlockStats().Reused != s0.Reused+1 {
		t.Errorf("malloc(60 MiB) after freeing a 64 MiB block: %p, want it again at %p (%+v)", q, p, BlockStats())
	}
	cFree(q)
	if f := refault(64 * mib); f > 64*mib/4096/20 {
		t.Errorf("rewriting a freed 64 MiB block faulted %d pages, want about none", f)
	}
	before := served()
	cFree(cMalloc(mib - 1))
	if served() != before {
		t.Errorf("a block under 1 MiB went to the cache; those are glibc's")
	}
}

func cornerCalloc(t *testing.T) {
	p := cMalloc(48 * mib)
	b := bytesAt(p, 48*mib)
	for i := range b {
		b[i] = 0xab
	}
	cFree(p)
	q := cCalloc(40, mib)
	if q != p {
		t.Fatalf("calloc(40, 1 MiB) did not reuse the freed 48 MiB block (%p, want %p): the corner is not exercised", q, p)
	}
	for i, v := range bytesAt(q, 40*mib) {
		if v != 0 {
			t.Fatalf("calloc on a reused block: byte %d is %#x, want 0", i, v)
		}
	}
	cFree(q)
	if r := cCalloc(1<<62, 1<<3); r != nil {
		t.Errorf("calloc with an overflowing size returned %p, want NULL", r)
	}
	if r := cReallocArray(nil, 1<<62, 1<<3); r != nil {
		t.Errorf("reallocarray with an overflowing size returned %p, want NULL", r)
	}
}

func cornerRealloc(t *testing.T) {
	// Up across the threshold: from glibc to the cache, contents kept.
	const small = 256 << 10
	p := cMalloc(small)
	fill(bytesAt(p, small), 3)
	n0 := served()
	p = cRealloc(p, 40*mib)
	if served() != n0+1 {
		t.Fatalf("realloc of a 256 KiB block to 40 MiB did not move it to the cache")
	}
	if i := same(bytesAt(p, small), 3); i >= 0 {
		t.Fatalf("realloc into the cache lost byte %d", i)
	}
	fill(bytesAt(p, 40*mib), 5)
	// Within the cache, larger: contents kept.
	p = cRealloc(p, 100*mib)
	if i := same(bytesAt(p, 40*mib), 5); i >= 0 {
		t.Fatalf("realloc 40 -> 100 MiB lost byte %d", i)
	}
	// Smaller but still large: kept in place.
	if q := cRealloc(p, 50*mib); q != p {
		t.Errorf("realloc 100 -> 50 MiB moved the block (%p -> %p); it fits where it is", p, q)
	}
	// Down across the threshold: back to glibc, the first 512 KiB kept.
	n1 := served()
	q := cRealloc(p, 2*small)
	if i := same(bytesAt(q, 2*small), 5); i >= 0 {
		t.Fatalf("realloc out of the cache lost byte %d", i)
	}
	if served() != n1 || cUsable(q) < 2*small {
		t.Errorf("realloc 50 MiB -> 512 KiB: served %d -> %d, usable %d; want a glibc block", n1, served(), cUsable(q))
	}
	cFree(q)
	// realloc(p, 0) frees p and returns NULL, as glibc's does.
	in := BlockStats().InUseBytes
	p = cMalloc(33 * mib)
	if r := cRealloc(p, 0); r != nil || BlockStats().InUseBytes != in {
		t.Errorf("realloc(p, 0) of a cached block: %p, in use %d (was %d); want NULL and the block freed", r, BlockStats().InUseBytes, in)
	}
	// reallocarray routes like realloc.
	p = cMalloc(34 * mib)
	fill(bytesAt(p, 34*mib), 9)
	p = cReallocArray(p, 70, mib)
	if i := same(bytesAt(p, 34*mib), 9); i >= 0 {
		t.Fatalf("reallocarray 34 -> 70 MiB lost byte %d", i)
	}
	cFree(p)
}

func cornerAlign(t *testing.T) {
	for _, align := range []int{8, 64, 4096, 8192, 65536, 128 << 10, 2 * mib} {
		n0 := served()
		p, rc := cPosixMemalign(align, 36*mib)
		if rc != 0 || p == nil || uintptr(p)%uintptr(align) != 0 {
			t.Fatalf("posix_memalign(%d, 36 MiB) = %p, %d; want an aligned block", align, p, rc)
		}
		if cached := served() == n0+1; cached != (align <= 64<<10) {
			t.Errorf("posix_memalign(%d): from the cache %v, want %v (it serves alignments up to 64 KiB)", align, cached, align <= 64<<10)
		}
		fill(bytesAt(p, 36*mib), 2)
		if cUsable(p) < 36*mib {
			t.Errorf("posix_memalign(%d): usable %d, want at least 36 MiB", align, cUsable(p))
		}
		cFree(p)
		q := cAlignedAlloc(align, 36*mib)
		r := cMemalign(align, 40*mib)
		if q == nil || r == nil || uintptr(q)%uintptr(align) != 0 || uintptr(r)%uintptr(align) != 0 {
			t.Fatalf("aligned_alloc/memalign(%d) = %p, %p; want aligned blocks", align, q, r)
		}
		cFree(q)
		cFree(r)
	}
	for _, bad := range []int{0, 3, 4, 24} {
		if _, rc := cPosixMemalign(bad, 40*mib); rc == 0 {
			t.Errorf("posix_memalign(%d) succeeded, want EINVAL", bad)
		}
	}
}

func cornerUsable(t *testing.T) {
	for _, n := range []int{100, 1 * mib, 32 * mib, 45*mib + 17} {
		p := cMalloc(n)
		if u := cUsable(p); u < n {
			t.Errorf("malloc_usable_size of a %d-byte block: %d", n, u)
		}
		// The whole usable size is the caller's to write.
		b := bytesAt(p, cUsable(p))
		b[len(b)-1] = 1
		cFree(p)
	}
	// valloc is glibc's, page aligned, and freed through the same routing.
	v := cValloc(3 * mib)
	if uintptr(v)%4096 != 0 || cUsable(v) < 3*mib {
		t.Errorf("valloc(3 MiB) = %p with usable %d, want page aligned and at least 3 MiB", v, cUsable(v))
	}
	cFree(v)
	if cUsable(nil) != 0 {
		t.Errorf("malloc_usable_size(NULL) = %d, want 0", cUsable(nil))
	}
	cFree(nil)
}

// Two freed neighbours merge into one extent, which serves a request neither could alone.
func cornerMerge(t *testing.T) {
	a, b := cMalloc(40*mib), cMalloc(40*mib)
	c := cMalloc(40 * mib) // keeps a and b from merging into the top of the range
	cFree(a)
	cFree(b)
	d := cMalloc(80 * mib)
	if d != a && d != b {
		t.Errorf("80 MiB after freeing two adjacent 40 MiB blocks (%p, %p): %p, want their merged space", a, b, d)
	}
	cFree(c)
	cFree(d)
}

// Goroutines on several threads allocate, write, check and free blocks of mixed sizes, on both
// sides of the threshold: a block handed to two owners, or lost contents, shows as a wrong byte.
func cornerThreads(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			type held struct {
				p    unsafe.Pointer
				n    int
				seed byte
			}
			var live []held
			for op := 0; op < 150; op++ {
				if len(live) > 3 || (len(live) > 0 && rng.Intn(2) == 0) {
					i := rng.Intn(len(live))
					h := live[i]
					// Check one byte a page: each page was written, and is still ours.
					b := bytesAt(h.p, h.n)
					for k := 0; k < h.n; k += 4096 {
						if b[k] != h.seed+byte(k/4096) {
							errs <- "a block's contents changed under its owner"
							return
						}
					}
					cFree(h.p)
					live = append(live[:i], live[i+1:]...)
					continue
				}
				n := 4096 + rng.Intn(40*mib) // both sides of the 1 MiB threshold
				p := cMalloc(n)
				if p == nil {
					errs <- "malloc returned NULL"
					return
				}
				seed := byte(rng.Intn(256))
				b := bytesAt(p, n)
				for k := 0; k < n; k += 4096 {
					b[k] = seed + byte(k/4096)
				}
				live = append(live, held{p, n, seed})
			}
			for _, h := range live {
				cFree(h.p)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A free of a pointer the cache did not hand out, inside its range, stops the process with a
// message rather than hand the memory to two owners.
func TestBadFreeStops(t *testing.T) {
	needGlibcLinux(t)
	if os.Getenv(cornerEnv) == "badfree" {
		p := cMalloc(40 * mib)
		cFree(unsafe.Add(p, 4096))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBadFreeStops$")
	cmd.Env = append(os.Environ(), cornerEnv+"=badfree", Env+"=blocks", "GLIBC_TUNABLES=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a block the large-block cache handed out") {
		t.Fatalf("freeing a pointer inside a cached block: %v\n%s\nwant the process stopped with the cache's message", err, out)
	}
}
