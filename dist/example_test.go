package dist_test

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/prefetch"
)

func ExampleFromEnv() {
	env := map[string]string{dist.EnvRank: "1", dist.EnvWorldSize: "2"}
	d, err := dist.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fmt.Println(d, err, d.IsRank0())
	// Output: rank 1 of 2 <nil> false
}

func ExampleShard() {
	x := make([]float32, 10) // 10 rows: 5 batches of 2
	for i := range x {
		x[i] = float32(i)
	}
	src, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromValue(x)}, 2, prefetch.ArrayOptions{})
	for r := range 2 {
		s, _ := dist.Shard(src, dist.Dist{Rank: r, WorldSize: 2})
		for i := range s.Len() {
			b, _ := s.BatchAt(i)
			fmt.Print(tensors.MustCopyFlatData[float32](b["x"]), " ")
		}
		fmt.Println("<- rank", r)
	}
	// Output:
	// [0 1] [4 5] <- rank 0
	// [2 3] [6 7] <- rank 1
}

func ExampleShardData() {
	src, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromValue(make([]float32, 8))}, 2, prefetch.ArrayOptions{})
	data, err := dist.ShardData(prefetch.Data{"train": src}, dist.Dist{Rank: 0, WorldSize: 2})
	fmt.Println(data["train"].Len(), err)
	// Output: 2 <nil>
}

func ExampleSingle() {
	fmt.Println(dist.Single(), dist.Single().Validate())
	// Output: rank 0 of 1 <nil>
}

func ExampleDist_Validate() {
	fmt.Println(dist.Dist{Rank: 2, WorldSize: 2}.Validate())
	// Output: dist: Rank 2 with WorldSize 2: the rank must be in [0, 2)
}

func ExampleShardEval() {
	src, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromValue(make([]float32, 5))}, 1, prefetch.ArrayOptions{})
	for r := range 2 {
		s, _ := dist.ShardEval(src, dist.Dist{Rank: r, WorldSize: 2})
		fmt.Println("rank", r, "evaluates", s.Len(), "of", src.Len(), "batches")
	}
	// Output:
	// rank 0 evaluates 3 of 5 batches
	// rank 1 evaluates 2 of 5 batches
}
