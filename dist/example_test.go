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
	// 11 samples in batches of 4: two full batches and a final one of 3.
	src, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromValue(make([]float32, 11))}, 4, prefetch.ArrayOptions{})
	for r := range 3 {
		s, _ := dist.ShardEval(src, dist.Dist{Rank: r, WorldSize: 3})
		var rows []int
		for i := range s.Len() {
			b, _ := s.BatchAt(i)
			rows = append(rows, b["x"].Shape().Dimensions[0])
		}
		fmt.Println("rank", r, "evaluates rows", rows, "of each batch")
	}
	// Output:
	// rank 0 evaluates rows [1 1 1] of each batch
	// rank 1 evaluates rows [1 1 1] of each batch
	// rank 2 evaluates rows [2 2 1] of each batch
}
