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

// A backend calls Steady just before the CPU plugin's client starts its threads (never for a GPU);
// the line it returns is the config report's.
func ExampleSteady() {
	line, err := hostalloc.Steady()
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println(line != "")
	// Output: true
}
