package cli_test

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/tensorfile"
)

// servePython is $NITRO_SERVE_PYTHON (make serve-venv), or the test stops by prereq's rule.
func servePython(t *testing.T) string {
	t.Helper()
	return prereq.ServePython.Interpreter(t, "NITRO_SERVE_PYTHON")
}

// affineBundleAt writes a bundle at dir named name whose programs (batch sizes 1 and 4) are
// y = x + w and z = x * w, x F32 [batch 2], its StableHLO written by hand: two outputs, so a
// client can ask for one, and values no decimal shortcut makes exact.
func affineBundleAt(t *testing.T, dir, name string, w0, w1 float32) {
	t.Helper()
	w, err := exportbundle.NewTensor([]int{2}, []float32{w0, w1})
	if err != nil {
		t.Fatal(err)
	}
	progs := map[int]exportbundle.Program{}
	for _, n := range []int{1, 4} {
		ty := fmt.Sprintf("tensor<%dx2xf32>", n)
		progs[n] = exportbundle.Program{Format: "mlir", Code: []byte(`module @affine {
  func.func public @main(%x: ` + ty + `, %w: tensor<2xf32>) -> (` + ty + `, ` + ty + `) {
    %b = stablehlo.broadcast_in_dim %w, dims = [1] : (tensor<2xf32>) -> ` + ty + `
    %y = stablehlo.add %x, %b : ` + ty + `
    %z = stablehlo.multiply %x, %b : ` + ty + `
    return %y, %z : ` + ty + `, ` + ty + `
  }
}
`)}
	}
	spec := func(n string) exportbundle.TensorSpec {
		return exportbundle.TensorSpec{Name: n, DType: tensorfile.F32, Shape: []int{-1, 2}, BatchAxis: 0}
	}
	if err := exportbundle.Write(dir, &exportbundle.Bundle{Name: name, Inputs: []exportbundle.TensorSpec{spec("x")},
		Outputs: []exportbundle.TensorSpec{spec("y"), spec("z")}, Weights: []exportbundle.Weight{{Name: "w", Tensor: w}}, Programs: progs}); err != nil {
		t.Fatal(err)
	}
}

// tritonReport is what testdata/triton_client.py prints.
type tritonReport struct {
	Live, Ready bool
	Server      struct {
		Name       string   `json:"name"`
		Extensions []string `json:"extensions"`
	}
	Models map[string]struct {
		Ready    bool `json:"ready"`
		ReadyV1  bool `json:"ready_v1"`
		Metadata struct {
			Name   string `json:"name"`
			Inputs []struct {
				Name, Datatype string
				Shape          []int
			} `json:"inputs"`
		} `json:"metadata"`
		Infer         inferReport
		WrongDatatype struct{ Status, Message string } `json:"wrong_datatype"`
	}
	UnknownModel struct{ Status, Message string } `json:"unknown_model"`
}

// Triton's own Python client (tritonclient.http) against `nitro serve` on a model repository of
// two bundles: server and model health, metadata, infer with JSON and with binary data, one
// output asked for, none asked for; every output equals run-bundle's on the same input bit for
// bit; an unknown model and a wrong datatype are refused with the protocol's codes, naming them.
// The KServe SDK's v2 REST client (kserve.InferenceRESTClient) then does health, readiness and
// infer, JSON and binary, all outputs and one, with the same bits.
// Run alone: NITRO_SERVE_PYTHON=$PWD/.nitro/serve-venv/bin/python go test -run Triton ./cmd/cli/
func TestServeTritonClient(t *testing.T) {
	needPlugin(t)
	py := servePython(t)
	repo := t.TempDir()
	weights := map[string][2]float32{"affine": {0.1, 1.0 / 3}, "affine2": {-2.5, 1e-3}}
	for name, w := range weights {
		affineBundleAt(t, filepath.Join(repo, name), name, w[0], w[1])
	}
	r := rand.New(rand.NewPCG(3, 6))
	inputs := map[string][][]float32{}
	for _, batch := range []int{1, 4} {
		rows := make([][]float32, batch)
		for i := range rows {
			rows[i] = []float32{float32(r.NormFloat64() * 7), float32(r.NormFloat64() / 3)}
		}
		inputs[strconv.Itoa(batch)] = rows
	}
	line := regexp.MustCompile(`serving affine2 [^\n]* on http://(127\.0\.0\.1:[0-9]+)/v2/models/affine2/infer\n`)
	addr, done, _, stderr := startServeAt(t, line, repo)
	spec, _ := json.Marshal(map[string]any{"models": []string{"affine", "affine2"}, "inputs": inputs})
	run := func(script string) []byte {
		out, err := pythonRun(py, string(spec), script, addr)
		if err != nil {
			prereq.ServePython.Broken(t, fmt.Sprintf("%s: %v\nserve's stderr: %s", script, err, stderr.String()))
		}
		return out
	}
	out := run("testdata/triton_client.py")
	kserveOut := run("testdata/kserve_client.py")
	sigterm(t)
	wantExit0(t, done, stderr)
	var rep, kserve tritonReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := json.Unmarshal(kserveOut, &kserve); err != nil {
		t.Fatalf("%v: %s", err, kserveOut)
	}
	if !kserve.Live || !kserve.Ready {
		t.Errorf("KServe's client: live %v, ready %v", kserve.Live, kserve.Ready)
	}
	if !rep.Live || !rep.Ready || rep.Server.Name != "nitro" || len(rep.Server.Extensions) != 1 || rep.Server.Extensions[0] != "binary_tensor_data" {
		t.Errorf("server: live %v, ready %v, metadata %+v", rep.Live, rep.Ready, rep.Server)
	}
	if rep.UnknownModel.Status != "404" || !strings.Contains(rep.UnknownModel.Message, `unknown model "no_such_model"`) {
		t.Errorf("an unknown model: %+v", rep.UnknownModel)
	}
	for name := range weights {
		m, ok := rep.Models[name]
		if !ok {
			t.Fatalf("no report for model %s: %s", name, out)
		}
		if in := m.Metadata.Inputs; !m.Ready || !m.ReadyV1 || m.Metadata.Name != name || len(in) != 1 || in[0].Datatype != "FP32" || fmt.Sprint(in[0].Shape) != "[-1 2]" {
			t.Errorf("%s: ready %v/%v, metadata %+v", name, m.Ready, m.ReadyV1, m.Metadata)
		}
		if m.WrongDatatype.Status != "400" || !strings.Contains(m.WrongDatatype.Message, `inputs[0].datatype: "FP64", input "x" takes FP32`) {
			t.Errorf("%s: a wrong datatype: %+v", name, m.WrongDatatype)
		}
		km, ok := kserve.Models[name]
		if !ok || !km.Ready {
			t.Errorf("KServe's client: model %s not ready (%v)", name, ok)
		}
		for batch, rows := range inputs {
			want := runBundleBits(t, filepath.Join(repo, name), rows)
			checkInfer(t, "tritonclient "+name, m.Infer, batch, want, "all", "z", "none")
			checkInfer(t, "KServe "+name, km.Infer, batch, want, "all", "z")
		}
	}
}

// inferReport is one client's infer answers by batch/mode/ask.
type inferReport = map[string]struct {
	ID      *string
	Order   []string
	Outputs map[string]struct {
		Shape []int
		Dtype string
		Hex   string
	}
}

// checkInfer checks a client's answers at batch, JSON and binary, for each way of asking
// (all: y and z asked for, with the id req-<batch>; z: z alone; none: no outputs asked for):
// the outputs asked for, in order, bit for bit run-bundle's (want).
func checkInfer(t *testing.T, who string, infer inferReport, batch string, want map[string]string, asks ...string) {
	t.Helper()
	for _, mode := range []string{"json", "binary"} {
		for _, ask := range asks {
			key := batch + "/" + mode + "/" + ask
			got, ok := infer[key]
			if !ok {
				t.Fatalf("%s: no infer %s in the report", who, key)
			}
			order := "y,z"
			if ask == "z" {
				order = "z"
			}
			if strings.Join(got.Order, ",") != order {
				t.Errorf("%s %s: outputs %v, want %s", who, key, got.Order, order)
			}
			if ask == "all" && (got.ID == nil || *got.ID != "req-"+batch) {
				t.Errorf("%s %s: id %v, want req-%s echoed", who, key, got.ID, batch)
			}
			for _, o := range got.Order {
				g := got.Outputs[o]
				if g.Hex != want[o] || g.Dtype != "float32" || fmt.Sprint(g.Shape) != fmt.Sprintf("[%s 2]", batch) {
					t.Errorf("%s %s: output %s is %v %s %s; run-bundle's is %s", who, key, o, g.Shape, g.Dtype, g.Hex, want[o])
				}
			}
		}
	}
}

// pythonRun runs py with args and stdin, and returns its stdout; an error carries its stderr.
func pythonRun(py, stdin string, args ...string) ([]byte, error) {
	cmd := exec.Command(py, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return out, fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return out, err
}

// runBundleBits runs `nitro run-bundle` on rows and returns each output's float32 values as
// little-endian hex, the form the Python report gives.
func runBundleBits(t *testing.T, bundle string, rows [][]float32) map[string]string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"inputs": map[string]any{"x": rows}})
	code, out, errs := runCLI("run-bundle", bundle, "--inputs", writeTemp(t, string(body)))
	if code != 0 {
		t.Fatalf("run-bundle: exit %d: %s", code, errs)
	}
	var res struct{ Outputs map[string][][]float64 }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	bits := map[string]string{}
	for name, rows := range res.Outputs {
		var b []byte
		for _, row := range rows {
			for _, v := range row {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
			}
		}
		bits[name] = hex.EncodeToString(b)
	}
	return bits
}
