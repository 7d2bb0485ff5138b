package pjrthook

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gopjrt/pjrt"
)

// envClientCycles makes the test binary run clientCycles (see TestMain) on the real CPU plugin
// named.
const envClientCycles = "NITRO_PJRTHOOK_CLIENT_CYCLES"

// cycleProgram adds one to an f32[2].
const cycleProgram = `module @cycle {
  func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
    %one = stablehlo.constant dense<1.0> : tensor<2xf32>
    %s = stablehlo.add %a, %one : tensor<2xf32>
    func.return %s : tensor<2xf32>
  }
}
`

// clientCycles starts, uses and destroys a client of plugin 20 times, as the backend starts one
// (Register, then gopjrt's GetPlugin and NewClient on the name it returns), each time reaching
// the plugin by another path: a link to it in a folder of the cycle's own (a sweep's trial or a
// reloaded model finding the plugin in its folder), or an unclean path to the file itself. Each
// cycle's program must compile through the interposer and run, and the process must hold one
// plugin slot throughout.
func clientCycles(plugin string) error {
	const cycles = 20
	tmp, err := os.MkdirTemp("", "pjrthook-cycles")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for i := range cycles {
		// Odd cycles: the file itself, by a path spelled differently each time.
		path := filepath.Dir(plugin) + "/" + strings.Repeat("./", i) + filepath.Base(plugin)
		if i%2 == 0 {
			dir := filepath.Join(tmp, fmt.Sprint(i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			path = filepath.Join(dir, filepath.Base(plugin))
			if err := os.Symlink(plugin, path); err != nil {
				return err
			}
		}
		before := Stats()
		if err := cycle(path, float32(i)); err != nil {
			return fmt.Errorf("cycle %d of %d (plugin reached as %s): %w", i+1, cycles, path, err)
		}
		if got := Stats(); got.Compiled+got.FromDisk+got.Shared == before.Compiled+before.FromDisk+before.Shared {
			return fmt.Errorf("cycle %d: the program did not compile through the interposer", i+1)
		}
		if p := Plugins(); len(p) != 1 {
			return fmt.Errorf("after cycle %d the interposer holds %d plugin slots (%v), want 1: one plugin file, one slot", i+1, len(p), p)
		}
	}
	return nil
}

// startClient starts a client of plugin under the interposer as the backend does: Register,
// then gopjrt's GetPlugin and NewClient on the name it returns (GoMLX's stablehlo.New does those).
func startClient(plugin string, options pjrt.NamedValuesMap) (*pjrt.Client, error) {
	name, err := Register(plugin)
	if err != nil {
		return nil, err
	}
	p, err := pjrt.GetPlugin(name)
	if err != nil {
		return nil, err
	}
	return p.NewClient(options)
}

// cycle registers path, starts a client on it, runs cycleProgram on [x, 2x] and destroys all.
func cycle(path string, x float32) error {
	client, err := startClient(path, nil)
	if err != nil {
		return err
	}
	defer client.Destroy()
	exe, err := client.Compile().WithStableHLO([]byte(cycleProgram)).Done()
	if err != nil {
		return fmt.Errorf("compiling: %w", err)
	}
	defer exe.Destroy()
	in, err := client.BufferFromHost().FromFlatDataWithDimensions([]float32{x, 2 * x}, []int{2}).Done()
	if err != nil {
		return err
	}
	defer in.Destroy()
	outs, err := exe.Execute(in).DonateNone().Done()
	if err != nil {
		return fmt.Errorf("running: %w", err)
	}
	defer outs[0].Destroy()
	flat, _, err := outs[0].ToFlatDataAndDimensions()
	if err != nil {
		return err
	}
	if got, want := flat.([]float32), []float32{x + 1, 2*x + 1}; !slices.Equal(got, want) {
		return fmt.Errorf("the program gave %v, want %v", got, want)
	}
	return nil
}

// A process that starts and destroys clients again and again (a sweep, a server reloading a
// model) never runs out of the interposer's plugin slots, however it spells the plugin's path:
// 20 clients, one slot. In a process of its own: this test binary's slots are the fake plugins'.
func TestClientsStartedRepeatedlyKeepOneSlot(t *testing.T) {
	runInChild(t, envClientCycles)
}
