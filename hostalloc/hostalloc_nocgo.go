//go:build !cgo

package hostalloc

// Env is the variable that chooses the policy: "steady" (the default) or "system".
const Env = "NITRO_HOST_MALLOC"

// BackendEnv is the variable that names the backend (see the cgo build).
const BackendEnv = "NITRO_BACKEND"

// Policy says nothing was applied: without cgo no C allocator is set up (nor a plugin loaded).
func Policy() (string, error) { return "the C library's defaults (built without cgo)", nil }

// Steady applies nothing without cgo, and says so.
func Steady() (string, error) { return Policy() }

func refault(n int) int64 { return -1 }
