package collective_test

import (
	"fmt"
	"sync"

	"github.com/nitro-go/nitro/collective"
)

func ExampleLocal() {
	ranks, _ := collective.Local(2)
	bufs := [][]float32{{1, 2}, {10, 20}}
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Go(func() { _ = r.AllReduceSum(bufs[r.Rank()]) })
	}
	wg.Wait()
	fmt.Println(bufs[0], bufs[1])
	// Output: [11 22] [11 22]
}
