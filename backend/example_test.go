package backend_test

import (
	"fmt"

	"github.com/nitro-go/nitro/backend"
)

// ExampleCUDAPlugin lists what `nitro setup --cuda` installs: the plugin, then the NVIDIA
// libraries it loads, each a pinned, sha256-checked wheel.
func ExampleCUDAPlugin() {
	fmt.Println(backend.CUDAPlugin().Requirement(), "->", backend.CUDAPluginFile)
	fmt.Println(len(backend.CUDALibraries()), "NVIDIA library wheels, the first", backend.CUDALibraries()[0].Requirement())
	// Output:
	// jax-cuda12-pjrt==0.11.2 -> pjrt_c_api_cuda_plugin.so
	// 12 NVIDIA library wheels, the first nvidia-cublas-cu12==12.9.3.13
}

// Distribute before Resolve makes a CUDA client one process of several; a rank outside the world
// is refused.
func ExampleDistribute() {
	err := backend.Distribute(backend.Distribution{Rank: 2, WorldSize: 2, Coordinator: "node0:7070"})
	fmt.Println(err)
	fmt.Println(backend.Distribute(backend.Distribution{})) // one process again
	// Output:
	// backend: rank 2 is outside [0, 2)
	// <nil>
}

// NewXProcess is the sum over the processes of a run whose PJRT client spans them (core takes it
// as the run's collective on the CUDA plugin); a backend that cannot span them is refused.
func ExampleNewXProcess() {
	r, err := backend.Resolve(backend.Go)
	if err != nil {
		panic(err)
	}
	_, err = backend.NewXProcess(r, 0, 2)
	fmt.Println(err)
	// Output:
	// backend SimpleGo (go) is not a PJRT backend: the cross-process sum runs on an XLA client
}
