package pjrthook

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gopjrt/pjrt"

	"github.com/nitro-go/nitro/internal/prereq"
)

// envRealWiden makes the test binary run realWiden (see TestMain) on the real CPU plugin named.
const envRealWiden = "NITRO_PJRTHOOK_REAL_WIDEN"

// realProgram all-reduces one f32[4] over two replicas.
const realProgram = `module @` + XProcessModule + ` {
  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %s = "stablehlo.all_reduce"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %z = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %z : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    func.return %s : tensor<4xf32>
  }
}
`

// realWiden compiles realProgram through the interposer over the real CPU plugin (4 devices, one
// process) with the client's processes stood for by the assignment [1, 3]: gopjrt compiles it
// for two replicas on devices 0 and 1, the interposer rewrites that to 1 and 3, and the replicas
// must then run, and leave their outputs, on devices 1 and 3, each the sum.
func realWiden(plugin string) error {
	client, err := startClient(plugin, pjrt.NamedValuesMap{"cpu_device_count": int64(4)})
	if err != nil {
		return err
	}
	want := []int64{1, 3}
	assignmentOverride = func() []int64 { return want }
	exe, err := client.Compile().WithStableHLO([]byte(realProgram)).WithSPMD(2).WithDeviceAssignment([]int{0, 1}).Done()
	if err != nil {
		return fmt.Errorf("compiling the widened program: %w", err)
	}
	if w := LastWidening(); w.Err != nil || w.Replicas != 2 || !slices.Equal(w.Assignment, want) {
		return fmt.Errorf("the widening: %+v", w)
	}
	var args []*pjrt.Buffer
	for r, dev := range want {
		b, err := client.BufferFromHost().FromFlatDataWithDimensions([]float32{1, 2, 3, float32(r)}, []int{4}).ToDeviceNum(int(dev)).Done()
		if err != nil {
			return err
		}
		args = append(args, b)
	}
	outs, err := exe.Execute(args...).DonateNone().Done()
	if err != nil {
		return fmt.Errorf("running the widened program with its replicas' inputs on devices %v: %w", want, err)
	}
	for r, out := range outs {
		flat, _, err := out.ToFlatDataAndDimensions()
		if err != nil {
			return err
		}
		if got := flat.([]float32); !slices.Equal(got, []float32{2, 4, 6, 1}) {
			return fmt.Errorf("replica %d's output %v, want the sum [2 4 6 1]", r, got)
		}
		d, err := out.Device()
		if err != nil {
			return err
		}
		if n := client.NumForDevice(d); n != int(want[r]) {
			return fmt.Errorf("replica %d's output is on device %d, want %d: the plugin did not run the assignment the interposer wrote", r, n, want[r])
		}
	}
	return nil
}

// The real CPU plugin takes the options the interposer widened: the replicas run where the
// rewritten assignment puts them (devices 1 and 3, where gopjrt asked for 0 and 1) and sum over
// each other. In a process of its own: the test binary's plugin slots are the fake's.
func TestXProcessWideningTakenByTheRealPlugin(t *testing.T) {
	runInChild(t, envRealWiden)
}

// runInChild runs the test binary again with env set to the real CPU plugin's path (a run of
// childRuns), and fails t with its output when it fails.
func runInChild(t *testing.T, env string) {
	t.Helper()
	plugin := prereq.Plugin(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+plugin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, strings.TrimSpace(string(out)))
	}
}
