// Package seam is where module hostalloc's allocator meets the backend without the backend
// linking it. hostalloc defines malloc and its kin in the executable, so linking it is the
// program's choice: a program opts in by importing it (import _ "github.com/nitro-go/nitro/hostalloc";
// the nitro CLI and nitro new's template do), and its init registers it here. The backend calls
// Policy for the config report and Apply just before the CPU plugin's client starts; with nothing
// registered, the program keeps its own allocator, and Policy says so. Plain Go, no cgo: importing
// seam links no allocator.
package seam

import (
	"fmt"
	"os"
	"sync"
)

// Env is the variable that chooses hostalloc's policy (see package hostalloc).
const Env = "NITRO_HOST_MALLOC"

// NotLinked is Policy's line when no allocator is registered.
const NotLinked = "the program's own (hostalloc not linked)"

// Allocator is what hostalloc registers: its Policy and Apply.
type Allocator struct {
	Policy func() (string, error) // what is in effect, for the config report, or the refusal of a bad choice
	Apply  func() (string, error) // turn the policy on, once (the CPU plugin's client is about to start)
}

var (
	mu         sync.Mutex
	registered *Allocator
)

// Register makes a the program's allocator; hostalloc's init calls it. A second Register panics:
// one executable holds one definition of malloc.
func Register(a Allocator) {
	mu.Lock()
	defer mu.Unlock()
	if registered != nil {
		panic("seam: a second allocator registered")
	}
	registered = &a
}

func get() *Allocator {
	mu.Lock()
	defer mu.Unlock()
	return registered
}

// Linked reports whether an allocator is registered (the program imports hostalloc).
func Linked() bool { return get() != nil }

// Policy is the registered allocator's Policy, or own's line.
func Policy() (string, error) {
	if a := get(); a != nil {
		return a.Policy()
	}
	return own()
}

// Apply is the registered allocator's Apply, or own's line: nothing to apply.
func Apply() (string, error) {
	if a := get(); a != nil {
		return a.Apply()
	}
	return own()
}

// own describes the program's own allocator, naming an LD_PRELOAD that may hold one. A choice of
// hostalloc's policy in Env is refused: nothing in this program could apply it.
func own() (string, error) {
	if v := os.Getenv(Env); v != "" && v != "system" {
		return "", fmt.Errorf("$%s=%q: this program does not link hostalloc, so none of its policies can apply: "+
			"import _ \"github.com/nitro-go/nitro/hostalloc\" in the main package to opt in (the nitro CLI does), or unset %s", Env, v, Env)
	}
	line := NotLinked
	if p := os.Getenv("LD_PRELOAD"); p != "" {
		line += "; LD_PRELOAD=" + p
	}
	return line, nil
}
