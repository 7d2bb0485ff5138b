package hostalloc_test

import (
	"fmt"

	"github.com/nitro-go/nitro/hostalloc"
)

// Linking the package is what applies the policy; Policy reports it for a config report, or
// refuses a mistyped $NITRO_HOST_MALLOC.
func ExamplePolicy() {
	line, err := hostalloc.Policy()
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println(line != "")
	// Output: true
}
