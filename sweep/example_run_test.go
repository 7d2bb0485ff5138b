package sweep_test

import (
	"context"
	"fmt"
	"math"
	"os"

	"github.com/nitro-go/nitro/sweep"
)

func ExampleRun() {
	dir, _ := os.MkdirTemp("", "sweep-example-")
	defer os.RemoveAll(dir)
	x, _ := sweep.ParseParam("X=uniform:0,1")
	cfg := sweep.Config{
		Dir: dir, Metric: "val_loss", Space: sweep.Space{x}, Trials: 12,
		Sampler: sweep.NewRandom(1), Pruner: &sweep.ASHA{MinResource: 1, Reduction: 3},
	}
	st, err := sweep.Run(context.Background(), cfg, quadratic{})
	if err != nil {
		fmt.Println(err)
		return
	}
	count := map[sweep.State]int{}
	for _, t := range st.Trials {
		count[t.State]++
	}
	b, _ := st.Best()
	fmt.Println(len(st.Trials), "trials; complete + pruned:", count[sweep.Complete]+count[sweep.Pruned])
	fmt.Printf("best X near 0.3: %v\n", math.Abs(b.Params["X"]-0.3) < 0.15)
	// A second Run over the same dir with Resume set would keep all 12 and run none.

	// Output:
	// 12 trials; complete + pruned: 12
	// best X near 0.3: true
}
