//go:build !cgo

package hostalloc

import "github.com/nitro-go/nitro/hostalloc/seam"

// Env is the variable that chooses the policy (see the cgo build).
const Env = seam.Env

// The backend finds the allocator through the seam (see the cgo build).
func init() { seam.Register(seam.Allocator{Policy: Policy, Apply: Apply}) }

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
