package backend_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/backend"
)

func distribute(t *testing.T, d backend.Distribution) {
	t.Helper()
	if err := backend.Distribute(d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Distribute(backend.Distribution{}) })
}

// One of several processes on the CUDA plugin needs rank 0's address; no address is an error
// naming the variable, before any client starts.
func TestDistributedCUDANeedsCoordinator(t *testing.T) {
	isolate(t)
	user, _ := backend.UserPluginDir()
	fakePlugin(t, filepath.Join(user, backend.CUDAPluginFile))
	started := fakeCUDA(t)
	distribute(t, backend.Distribution{Rank: 1, WorldSize: 2})
	_, err := backend.Resolve("cuda")
	if err == nil || !strings.Contains(err.Error(), "NITRO_COORDINATOR") || !strings.Contains(err.Error(), "process 1 of 2") {
		t.Fatalf("no coordinator: err = %v, want one naming NITRO_COORDINATOR and the process", err)
	}
	if len(*started) != 0 {
		t.Fatalf("a client started without a coordinator: %v", *started)
	}
}

// The distributed runtime rides on the interposer: a plugin it cannot bind is refused, never
// started as one process of its own while the launcher says there are two.
func TestDistributedCUDARefusesWithoutInterposer(t *testing.T) {
	isolate(t)
	user, _ := backend.UserPluginDir()
	fakePlugin(t, filepath.Join(user, backend.CUDAPluginFile)) // not a library: the interposer cannot bind
	started := fakeCUDA(t)
	distribute(t, backend.Distribution{Rank: 1, WorldSize: 2, Coordinator: "127.0.0.1:1"})
	_, err := backend.Resolve("cuda")
	if err == nil || !strings.Contains(err.Error(), "only under nitro's interposer") {
		t.Fatalf("err = %v, want the interposer refusal", err)
	}
	if len(*started) != 0 {
		t.Fatalf("a client started anyway: %v", *started)
	}
}

func TestDistributeRefusesRank(t *testing.T) {
	if err := backend.Distribute(backend.Distribution{Rank: 2, WorldSize: 2}); err == nil || !strings.Contains(err.Error(), "rank 2") {
		t.Fatalf("err = %v", err)
	}
}
