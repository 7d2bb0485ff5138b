package exportbundle_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/tensorfile"
)

// Capture the StableHLO program GoMLX compiles for a graph, at one batch size. With a real plugin
// path it prints "mlir program, <n> bytes"; the placeholder path here is refused up front, naming
// the file, before anything is loaded.
func ExampleCapture() {
	plugin := "/path/to/pjrt_c_api_cpu_plugin.so"
	progs, err := exportbundle.Capture(plugin, func(b backends.Backend) error {
		double := func(x *graph.Node) *graph.Node { return graph.MulScalar(x, 2) }
		_, err := graph.ExecOnce(b, double, [][]float32{{1, 2, 3}}) // compiles (and runs) once
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s program, %d bytes\n", progs[0].Format, len(progs[0].Code))
	// Output:
	// exportbundle: Capture: plugin: stat /path/to/pjrt_c_api_cpu_plugin.so: no such file or directory
}

// Write a bundle and read it back. (The program text here is a placeholder; a real one comes
// from Capture.)
func ExampleWrite() {
	tmp, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(tmp)
	w, _ := exportbundle.NewTensor([]int{4, 3}, make([]float32, 12))
	b := &exportbundle.Bundle{
		Name:    "my_model_v1",
		Inputs:  []exportbundle.TensorSpec{{Name: "x", DType: tensorfile.F32, Shape: []int{-1, 4}, BatchAxis: 0}},
		Outputs: []exportbundle.TensorSpec{{Name: "logits", DType: tensorfile.F32, Shape: []int{-1, 3}, BatchAxis: 0}},
		Weights: []exportbundle.Weight{{Name: "w", Tensor: w}},
		Programs: map[int]exportbundle.Program{
			1:  {Format: "mlir", Code: []byte("module @b1 {}\n")},
			32: {Format: "mlir", Code: []byte("module @b32 {}\n")},
		},
		Provenance: map[string]string{"preset": "small"},
	}
	dir := filepath.Join(tmp, "my_model_v1")
	if err := exportbundle.Write(dir, b); err != nil {
		fmt.Println(err)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Output:
	// manifest.json
	// program-b1.mlir
	// program-b32.mlir
	// weights.safetensors
}

// Read verifies everything and names the file at fault.
func ExampleRead() {
	tmp, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(tmp)
	w, _ := exportbundle.NewTensor([]int{2}, []float32{1, 2})
	dir := filepath.Join(tmp, "bundle")
	exportbundle.Write(dir, &exportbundle.Bundle{
		Name:     "m",
		Inputs:   []exportbundle.TensorSpec{{Name: "x", DType: tensorfile.F32, Shape: []int{-1, 2}}},
		Outputs:  []exportbundle.TensorSpec{{Name: "y", DType: tensorfile.F32, Shape: []int{-1, 2}}},
		Weights:  []exportbundle.Weight{{Name: "w", Tensor: w}},
		Programs: map[int]exportbundle.Program{1: {Format: "mlir", Code: []byte("module @m {}\n")}},
	})
	b, err := exportbundle.Read(dir)
	fmt.Println(b.BatchSizes(), b.Inputs[0].Name, b.Weights[0].Name, err)

	os.WriteFile(filepath.Join(dir, "program-b1.mlir"), []byte("module"), 0o644) // truncate it
	_, err = exportbundle.Read(dir)
	var fe *exportbundle.FormatError
	fmt.Println(errors.As(err, &fe), filepath.Base(fe.Path))
	// Output:
	// [1] x w <nil>
	// true program-b1.mlir
}

// Run a bundle with gopjrt alone. With a bundle written by export (nitro export) and a real plugin
// path it prints the logits; here there is no bundle at the path, and Open says so, naming it.
func ExampleOpen() {
	r, err := exportbundle.Open("export_out/my_model_v1", "/path/to/pjrt_c_api_cpu_plugin.so")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	x, _ := exportbundle.NewTensor([]int{1, 4}, []float32{0.1, 0.2, 0.3, 0.4})
	out, err := r.Run(1, map[string]exportbundle.Tensor{"x": x})
	if err != nil {
		fmt.Println(err)
		return
	}
	logits, _ := exportbundle.Values[float32](out["logits"])
	fmt.Println(logits)
	// Output:
	// exportbundle: export_out/my_model_v1: not readable
}
