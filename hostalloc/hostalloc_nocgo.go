//go:build !cgo

package hostalloc

// Env is the variable that chooses the policy (see the cgo build).
const Env = "NITRO_HOST_MALLOC"

// Policy says nothing was applied: without cgo no C allocator is set up (nor a plugin loaded).
func Policy() (string, error) { return "the C library's defaults (built without cgo)", nil }

// Apply applies nothing without cgo, and says so.
func Apply() (string, error) { return Policy() }

// Blocks counts the large-block cache's work (see the cgo build).
type Blocks struct {
	Served, Reused                        int64
	InUseBytes, CachedBytes, DroppedBytes int64
	ReservedBytes                         int64
}

// BlockStats is all zero without cgo: there is no cache.
func BlockStats() Blocks { return Blocks{} }

func refault(n int) int64 { return -1 }
