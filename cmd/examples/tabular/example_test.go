package tabular_test

import (
	"fmt"

	"github.com/nitro-go/nitro/cmd/examples/tabular"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/markers"
)

// Sweep trains one epoch per learning-rate multiplier on one Nitro; only the first point
// compiles. With plain SGD (Momentum 0), the multiplier 0 leaves the weights where they were.
func ExampleSweep() {
	e, err := markers.FromPreset[tabular.Regression]("tiny", map[string]any{"Momentum": 0.0, "MaxEpochs": 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	cache := compilecache.New()
	n, err := core.New(e, core.WithCache(cache), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints())
	if err != nil {
		fmt.Println(err)
		return
	}
	pts, err := tabular.Sweep(n, []float32{1, 0, 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range pts {
		fmt.Printf("epoch %d at LRScale %g\n", p.Epoch, p.Multiplier)
	}
	fmt.Println("programs compiled:", cache.Stats().Misses)
	fmt.Println("LRScale 0 kept val_mse:", pts[1].ValMSE == pts[0].ValMSE)
	fmt.Println("LRScale 2 lowered it:", pts[2].ValMSE < pts[1].ValMSE)
	// Output:
	// epoch 1 at LRScale 1
	// epoch 2 at LRScale 0
	// epoch 3 at LRScale 2
	// programs compiled: 3
	// LRScale 0 kept val_mse: true
	// LRScale 2 lowered it: true
}
