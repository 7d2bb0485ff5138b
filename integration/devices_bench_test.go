package integration_test

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
)

// BenchmarkDevices times nitro's fused step data-parallel over 1, 2 and 4 CPU devices
// ($NITRO_CPU_DEVICES=4, WithDevices) at one global batch of 256, on the MNIST MLP
// (784-512-512-10) and a compute-heavier one (784-2048-2048-10), and prints steps/s and the
// ratio to one device beside the machine's core count. The CPU devices share the cores, so the
// ratio shows what the mesh costs (the all-reduce, the batch split, the per-device launches)
// rather than a speedup. It asserts only that each side ran its steps without compiling.
func BenchmarkDevices(b *testing.B) {
	b.Setenv(backend.EnvCPUDevices, "4")
	requireXLA(b)
	const batch, steps, repeats = 256, 20, 3
	xs, ys := mlpBenchData(steps*batch, 3)
	for _, hidden := range []int{benchHidden, 2048} {
		var base float64
		for _, k := range []int{1, 2, 4} {
			cache := compilecache.New()
			run := ovhNitro(b, cache, &BenchMLP{Hidden: hidden}, xs, ys, steps, batch, core.WithFusedStep(), core.WithDevices(k))
			run() // warm-up: compiles
			var t []float64
			for range repeats {
				t = append(t, run())
			}
			if s := cache.Stats(); s.Misses != 1 {
				b.Errorf("hidden %d, %d devices: %d compiles, want 1", hidden, k, s.Misses)
			}
			sps := 1 / slices.Min(t)
			if k == 1 {
				base = sps
			}
			fmt.Printf("devices MLP 784-%d-%d-10 batch %d: %d device(s) %7.1f steps/s  ratio to 1 device %.2f  (%d cores)\n",
				hidden, hidden, batch, k, sps, sps/base, runtime.NumCPU())
		}
	}
}
