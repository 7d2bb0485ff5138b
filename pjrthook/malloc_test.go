package pjrthook

import (
	"os"
	"testing"
)

// A step-like churn (four 2 MiB buffers written and freed, 20 times) faults each round's pages
// in afresh under glibc's default policy; once RetainFreedMemory holds, the rounds after the
// first reuse the same pages.
func TestRetainFreedMemory(t *testing.T) {
	if !glibc() {
		t.Fatal("this test expects glibc, the C library RetainFreedMemory tunes; on another, RetainFreedMemory must report false")
	}
	if os.Getenv(EnvMallocRetain) != "" {
		t.Fatalf("$%s is set: the test measures the default", EnvMallocRetain)
	}
	const rounds, n, size = 20, 4, 2 << 20
	pages := int64(n * size / 4096)
	before := churnFaults(rounds, n, size)
	if !RetainFreedMemory() {
		t.Fatal("RetainFreedMemory reports false under glibc")
	}
	after := churnFaults(rounds, n, size)
	t.Logf("page faults of %d rounds of %d x %d bytes: %d by default, %d retained (%d pages a round)", rounds, n, size, before, after, pages)
	if before < rounds/2*pages {
		t.Errorf("by default %d faults, expected about %d: the churn no longer shows glibc giving pages back, so this test proves nothing", before, rounds*pages)
	}
	if after > 2*pages {
		t.Errorf("retained: %d faults over %d rounds, want at most %d (the first round's pages, once)", after, rounds, 2*pages)
	}
}
