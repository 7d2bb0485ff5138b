package roofline_test

import (
	"fmt"
	"time"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/roofline"
)

// Measure a backend's matrix-product rate, then the share of it a run's model FLOPs use.
func ExampleMeasure() {
	be, err := simplego.New("")
	if err != nil {
		panic(err)
	}
	p, err := roofline.Measure(be, dtypes.Float32, 64, 10*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Calls >= 3, p.FLOPs > 0)
	// Output: true true
}

// Cached measures once per process for a backend and dtype.
func ExampleCached() {
	be, err := simplego.New("")
	if err != nil {
		panic(err)
	}
	p, _ := roofline.Cached(be, dtypes.Float32, 32)
	again, _ := roofline.Cached(be, dtypes.Float32, 32)
	fmt.Println(p == again)
	// Output: true
}

// Utilization is the model FLOPs utilization: a run's model FLOPs per second over its devices'
// peak.
func ExampleUtilization() {
	fmt.Println(roofline.Utilization(30e9, roofline.Peak{FLOPs: 60e9}, 1))
	// Output: 0.5
}

// TransformerFLOPsPerToken: 6 FLOPs per weight a token passes through, plus attention's term.
func ExampleTransformerFLOPsPerToken() {
	fmt.Println(roofline.TransformerFLOPsPerToken(1000, 2, 16, 32))
	// Output: 18288
}
