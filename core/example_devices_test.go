package core_test

import (
	"fmt"
	"os"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// ExampleWithDevices trains data-parallel on 2 of the CPU plugin's devices: the batch of 32 is
// global (16 rows per device), the parameters are replicated, and each step moves only the two
// batch fields' shards to each device.
func ExampleWithDevices() {
	old, had := os.LookupEnv("NITRO_CPU_DEVICES")
	os.Setenv("NITRO_CPU_DEVICES", "2")
	defer func() {
		if had {
			os.Setenv("NITRO_CPU_DEVICES", old)
		} else {
			os.Unsetenv("NITRO_CPU_DEVICES")
		}
	}()
	x, y := coretest.Synthetic(64, 1)
	src, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, 32, prefetch.ArrayOptions{DropPartial: true})
	n, err := core.New(&Deep{}, core.WithBackend("xla"), core.WithDevices(2), core.Quiet(), core.WithoutLogger(),
		core.WithoutCheckpoints(), core.WithData(prefetch.Data{"train": src}), core.WithMaxEpochs(3))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := n.Train(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("steps:", n.Step(), "batch shards per device:", n.MeshUploads().Shards)
	// Output: steps: 6 batch shards per device: [12 12]
}
