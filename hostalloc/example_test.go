package hostalloc_test

import (
	"fmt"
	"strings"

	"github.com/nitro-go/nitro/hostalloc"
)

// Policy is the config report's line: which allocator the program runs on, jemalloc where the
// system has it and the program is dynamically linked, else the C library's defaults and why.
func ExamplePolicy() {
	line, err := hostalloc.Policy()
	fmt.Println(err == nil && strings.Contains(line, "jemalloc") || strings.Contains(line, "defaults"))
	// Output: true
}
