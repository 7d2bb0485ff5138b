package hostalloc_test

import (
	"fmt"

	"github.com/nitro-go/nitro/hostalloc"
)

// Policy reports the policy in effect for a config report, or
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

// A backend calls Apply just before the CPU plugin's client starts (never for a GPU); the line it
// returns is the config report's.
func ExampleApply() {
	line, err := hostalloc.Apply()
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println(line != "")
	// Output: true
}
