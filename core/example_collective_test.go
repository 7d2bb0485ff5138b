package core_test

import (
	"fmt"
	"sync"

	"github.com/nitro-go/nitro/collective"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/dist"
)

// Two ranks of one run, here goroutines over an in-memory collective (under mpirun, processes
// over mpi.Comm): each trains on its half of Line's batches, the gradients are summed at every
// step, so both end with the same parameters and validation metrics.
func ExampleWithCollective() {
	ranks, _ := collective.Local(2)
	val := make([]map[string]float64, 2)
	var wg sync.WaitGroup
	for r, c := range ranks {
		wg.Go(func() {
			n, err := core.New(&Line{MaxEpochs: 2}, core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(),
				core.WithDist(dist.Dist{Rank: r, WorldSize: 2}), core.WithCollective(c))
			if err == nil {
				err = n.Train()
			}
			if err != nil {
				c.Leave(err)
				fmt.Println(err)
				return
			}
			val[r] = n.History()[1].Val
		})
	}
	wg.Wait()
	fmt.Println("same val metrics on both ranks:", fmt.Sprint(val[0]) == fmt.Sprint(val[1]) && val[0] != nil)
	// Output: same val metrics on both ranks: true
}
