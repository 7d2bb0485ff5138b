package exportbundle

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/tensorfile"
)

// halfBundle declares input x as dtype (batch sizes 1 and 4, 2 wide) over programs that take
// f32[batch,2], as a bundle whose manifest was written apart from its programs would.
func halfBundle(dtype tensorfile.DType) *Bundle {
	prog := func(batch int) Program {
		return Program{Format: "mlir", Code: []byte(fmt.Sprintf(`module @m {
  func.func @main(%%arg0: tensor<%dx2xf32> {mhlo.sharding = "{replicated}"}, %%arg1: tensor<2xf32> loc("w")) -> (tensor<%dx2xf32>) {
    return %%arg0 : tensor<%dx2xf32>
  }
}
`, batch, batch, batch))}
	}
	w, _ := NewTensor([]int{2}, []float32{1, 2})
	return &Bundle{
		Name:     "half",
		Inputs:   []TensorSpec{{Name: "x", DType: dtype, Shape: []int{-1, 2}, BatchAxis: 0}},
		Outputs:  []TensorSpec{{Name: "y", DType: tensorfile.F32, Shape: []int{-1, 2}, BatchAxis: 0}},
		Weights:  []Weight{{Name: "w", Tensor: w}},
		Programs: map[int]Program{1: prog(1), 4: prog(4)},
	}
}

// A bundle whose manifest declares input x F16 over programs that take f32 is refused by
// ServeWith before it listens, naming the input, its dtype and what the program takes, rather
// than answering each request with PJRT's "expected parameter 0 of size 8 (f32[1,2]) but got
// buffer with incompatible size 4 (f16[1,2])" (a 500). The same bundle declaring F32 is served.
func TestServeRefusesProgramInputMismatch(t *testing.T) {
	_, _, err := ServeWith(&Runner{b: halfBundle(tensorfile.F16)}, "127.0.0.1:0", ServeConfig{})
	want := `bundle "half": input "x": the manifest declares F16 [1 2], but program-b1.mlir takes only F32 [1 2] there (its parameter 0)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("serving an F16 input over an f32 program: %v; want an error saying %q", err, want)
	}
	srv, _, err := ServeWith(&Runner{b: halfBundle(tensorfile.F32)}, "127.0.0.1:0", ServeConfig{})
	if err != nil {
		t.Fatalf("the same bundle declaring F32: %v", err)
	}
	srv.Close()
}

// mainParams reads the parameters of a program's main function as GoMLX writes it, with
// attributes, locations and scalars; a signature it cannot read is not ok (and not checked).
func TestMainParams(t *testing.T) {
	for _, c := range []struct {
		code string
		want string // fmt of the params, "!" for not ok
	}{
		{`func.func @main(%arg0: tensor<1x4xf32>, %arg1: tensor<4x8xbf16>, %arg2: tensor<i32>) -> (tensor<1x3xf32>) {`, "[F32 [1 4] BF16 [4 8] I32 []]"},
		{`func.func public @main(%x: tensor<2x3xui8> {jax.arg_info = "x(a, b)"}, %w: tensor<3xi1> loc("w")) -> tensor<2xf32> {`, "[U8 [2 3] BOOL [3]]"},
		{`func.func @main() -> tensor<f32> {`, "[]"},
		{`func.func @main(%arg0: tensor<?x4xf32>) -> tensor<f32> {`, "!"},
		{`func.func @main(%arg0: tensor<2xf8E4M3FN>) -> tensor<f32> {`, "[f8E4M3FN [2]]"},
		{`func.func @other(%arg0: tensor<2xf32>)`, "!"},
		{`func.func @main(%arg0: tensor<2xf32>`, "!"},
	} {
		params, ok := mainParams(c.code)
		got := fmt.Sprint(params)
		if !ok {
			got = "!"
		}
		if got != c.want {
			t.Errorf("mainParams(%q) = %s; want %s", c.code, got, c.want)
		}
	}
}
