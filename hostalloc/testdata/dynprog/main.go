// Command dynprog is a program of cgo (so the dynamic loader starts it, as it does every program
// that runs the PJRT plugin) that imports hostalloc and prints what it chose: hostalloc's tests
// run it under their environments.
package main

// int dynprog_answer(void) { return 42; }
import "C"

import (
	"fmt"
	"os"
	"strings"

	"github.com/nitro-go/nitro/hostalloc"
)

func main() {
	p, err := hostalloc.Policy()
	maps, _ := os.ReadFile("/proc/self/maps")
	// What a program it starts would inherit: the user's environment, not hostalloc's variables.
	inherit := fmt.Sprintf("LD_PRELOAD=%q MALLOC_CONF=%q", os.Getenv("LD_PRELOAD"), os.Getenv("MALLOC_CONF"))
	fmt.Printf("POLICY %q %v\nJEMALLOC %v\nINHERIT %s\nC %d\n", p, err, strings.Contains(string(maps), "libjemalloc"), inherit, C.dynprog_answer())
}
