package cli_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/export"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/internal/prereq"
)

// needPlugin returns the XLA plugin run-bundle and serve load (the one backend.FindPlugin finds),
// or stops the test as prereq does.
func needPlugin(t *testing.T) string {
	t.Helper()
	p, searched, err := backend.FindPlugin()
	if err != nil {
		prereq.XLAPlugin.Broken(t, err)
	}
	if p == "" {
		prereq.XLAPlugin.Absent(t, fmt.Sprintf("searched %v", searched))
	}
	return p
}

// testImages is the first k MNIST test images ([k, 784] float32) and their labels.
func testImages(t *testing.T, k int) (*tensors.Tensor, []int32) {
	t.Helper()
	dir, err := mnist.DataDir("")
	if err != nil {
		prereq.MNIST.Absent(t, err)
	}
	s, err := mnist.Load(dir, "t10k", k)
	if err != nil {
		t.Fatal(err)
	}
	return s.Images, tensors.MustCopyFlatData[int32](s.Labels)
}

// pixelsOf is the uint8 pixels [N, 784] the float32 images [N, 784] were normalized from (p/255):
// what a client of the MNIST bundle sends.
func pixelsOf(images *tensors.Tensor) *tensors.Tensor {
	flat := tensors.MustCopyFlatData[float32](images)
	px := make([]uint8, len(flat))
	for i, v := range flat {
		px[i] = uint8(math.Round(float64(v) * 255))
	}
	return tensors.FromFlatDataAndDimensions(px, images.Shape().Dimensions...)
}

// nested writes rows of a [N, D] uint8 tensor as JSON nested arrays.
func nested(x *tensors.Tensor) string {
	flat := tensors.MustCopyFlatData[uint8](x)
	d := x.Shape().Dimensions[1]
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < len(flat)/d; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for j, v := range flat[i*d : (i+1)*d] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(v)))
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String()
}

// answer is the MNIST bundle's outputs as JSON gives them: the probabilities' rows and the classes.
type answer struct {
	probs [][]float64
	class []int32
}

// outputsOf parses {"outputs": {"probs": [[...]], "class": [...]}}.
func outputsOf(t *testing.T, body []byte) answer {
	t.Helper()
	var resp struct {
		Outputs struct {
			Probs [][]float64 `json:"probs"`
			Class []int32     `json:"class"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("the outputs are not JSON: %v: %.300s", err, body)
	}
	if resp.Outputs.Probs == nil || len(resp.Outputs.Class) != len(resp.Outputs.Probs) {
		t.Fatalf("no probs and class rows in %.300s", body)
	}
	return answer{resp.Outputs.Probs, resp.Outputs.Class}
}

// compareOutputs returns the largest |a-b| between JSON probabilities and a runner's, and how
// many rows' class equals the label; a class that is not the argmax of its row's probabilities
// fails the test.
func compareOutputs(t *testing.T, got answer, want exportbundle.Tensor, labels []int32) (maxDiff float64, correct int) {
	t.Helper()
	w, err := exportbundle.Values[float32](want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.probs) != want.Shape[0] {
		t.Fatalf("%d rows of probs, the runner gave %d", len(got.probs), want.Shape[0])
	}
	for i, row := range got.probs {
		if len(row) != 10 {
			t.Fatalf("row %d has %d probabilities", i, len(row))
		}
		best := 0
		for j, v := range row {
			maxDiff = max(maxDiff, math.Abs(float64(float32(v))-float64(w[i*10+j]))) // JSON holds float32 text
			if v > row[best] {
				best = j
			}
		}
		if int32(best) != got.class[i] {
			t.Errorf("row %d: class %d, the argmax of its probabilities is %d", i, got.class[i], best)
		}
		if got.class[i] == labels[i] {
			correct++
		}
	}
	return maxDiff, correct
}

// TestExportRunBundleServe trains the tiny preset into a temporary run dir, exports its newest
// checkpoint at batch sizes 1 and 32 (once from the data, once from --input-spec with a DataDir
// that does not exist: no data read, the same bundle outputs), runs the bundle with run-bundle on
// a JSON file of the uint8 pixels of 32 test images, the MNIST contract's wire input (the probabilities and classes equal the runner's called directly, and the class
// agrees with most labels), then serves it on 127.0.0.1:0 through MainContext: POST /predict over
// loopback answers the runner's probabilities, a malformed body and a wrong shape get a 400 naming the
// fault, and cancelling the context shuts the server down with no goroutine left behind.
func TestExportRunBundleServe(t *testing.T) {
	plugin := needPlugin(t)
	images, labels := testImages(t, 32)
	pixels := pixelsOf(images)
	runDir := t.TempDir()
	tiny := []string{"--preset", "tiny", "--set", "TestLimit=500"}
	code, out, errs := runCLI(append([]string{"train", "mnist-mlp", "--no-progress", "--no-log", "--run-dir", runDir}, tiny...)...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errs, out)
	}
	ranOn(t, "train", out)
	ckpt := regexp.MustCompile(`\ncheckpoint: (\S+)\n`).FindStringSubmatch(out)
	if ckpt == nil {
		t.Fatalf("train names no checkpoint:\n%s", out)
	}

	bundle := filepath.Join(t.TempDir(), "mnist_tiny")
	code, out, errs = runCLI(append([]string{"export", "mnist-mlp", "--checkpoint", runDir, "--out", bundle, "--batch-sizes", "1,32"}, tiny...)...)
	if code != 0 {
		t.Fatalf("export: exit %d: %s\n%s", code, errs, out)
	}
	for _, w := range []string{"bundle: " + bundle + "\n", "batch sizes: 1 32\n", "input:  pixels U8 [-1 784]\n", "output: probs F32 [-1 10]\n", "output: class I32 [-1]\n",
		"file:   " + filepath.Join(bundle, "manifest.json") + " (", filepath.Join(bundle, "program-b1.mlir"), filepath.Join(bundle, "program-b32.mlir"), filepath.Join(bundle, "weights.safetensors")} {
		if !strings.Contains(out, w) {
			t.Errorf("export output lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(errs, "weights from "+ckpt[1]) {
		t.Errorf("export does not say where the weights came from (%s) on stderr: %q", ckpt[1], errs)
	}
	if entries, _ := os.ReadDir(runDir); len(entries) != 3 { // two checkpoints and the manifest: export wrote nothing there
		t.Errorf("the run dir holds %d entries after export, want the training run's 3", len(entries))
	}
	b, err := exportbundle.Read(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "mnist_tiny" || b.Provenance["preset"] != "tiny" || b.Provenance["experiment"] != "MLP" {
		t.Errorf("bundle name %q, provenance %v", b.Name, b.Provenance)
	}
	// --checkpoint RUN_DIR: the manifest names the file restored (the newest) and its sha256.
	newest, _ := filepath.Abs(ckpt[1])
	raw, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if p := b.Provenance; p["checkpoint"] != newest || p["checkpoint_sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("provenance checkpoint %q sha256 %q, want %q %x", p["checkpoint"], p["checkpoint_sha256"], newest, sum)
	}
	if w := fmt.Sprintf("weights: %s (sha256 %x)\n", newest, sum); !strings.Contains(out, w) {
		t.Errorf("export output lacks %q:\n%s", w, out)
	}

	// The experiment owns its contract: export.Export from Go on the same checkpoint, given only a
	// name and the batch sizes, writes the bundle nitro export wrote (the same inputs, outputs,
	// weights and program text; only the provenance may differ).
	goBundle := filepath.Join(t.TempDir(), "go_export")
	n, err := core.NewFromCheckpoint[mnist.MLP](ckpt[1], nil, core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints())
	if err != nil {
		t.Fatal(err)
	}
	gb, err := export.Export(n, goBundle, export.ExportSpec{Name: "mnist_tiny", BatchSizes: []int{1, 32}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gb.Inputs, gb.Outputs) != fmt.Sprint(b.Inputs, b.Outputs) || len(gb.Programs) != len(b.Programs) ||
		!bytes.Equal(gb.Programs[1].Code, b.Programs[1].Code) || !bytes.Equal(gb.Programs[32].Code, b.Programs[32].Code) {
		t.Errorf("export.Export wrote inputs %v outputs %v (programs equal: %v, %v); nitro export wrote %v %v",
			gb.Inputs, gb.Outputs, bytes.Equal(gb.Programs[1].Code, b.Programs[1].Code), bytes.Equal(gb.Programs[32].Code, b.Programs[32].Code), b.Inputs, b.Outputs)
	}
	if len(gb.Weights) != len(b.Weights) || len(b.Weights) == 0 {
		t.Errorf("export.Export wrote %d weights, nitro export %d", len(gb.Weights), len(b.Weights))
	}
	for i, w := range gb.Weights {
		if i >= len(b.Weights) || w.Name != b.Weights[i].Name || !bytes.Equal(w.Tensor.Data, b.Weights[i].Tensor.Data) {
			t.Errorf("export.Export's weight %d (%s) differs from nitro export's", i, w.Name)
		}
	}

	// The same export from specs alone: BuildData would fail on this DataDir.
	specBundle := filepath.Join(t.TempDir(), "from_specs")
	code, out, errs = runCLI(append([]string{"export", "mnist-mlp", "--checkpoint", ckpt[1], "--out", specBundle, "--batch-sizes", "32", "--name", "tiny_specs",
		"--input-spec", "image=float32:784", "--set", "DataDir=" + filepath.Join(t.TempDir(), "nowhere")}, tiny...)...)
	if code != 0 || !strings.Contains(out, "input:  pixels U8 [-1 784]") {
		t.Fatalf("export --input-spec: exit %d: %s\n%s", code, errs, out)
	}

	// The runner, called directly, is the reference.
	r, err := exportbundle.Open(bundle, plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	x, err := exportbundle.NewTensor([]int{32, 784}, tensors.MustCopyFlatData[uint8](pixels))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Run(32, map[string]exportbundle.Tensor{"pixels": x})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := exportbundle.Open(specBundle, plugin)
	if err != nil {
		t.Fatal(err)
	}
	fromSpecs, err := rs.Run(32, map[string]exportbundle.Tensor{"pixels": x})
	rs.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromSpecs["probs"].Data, ref["probs"].Data) || !bytes.Equal(fromSpecs["class"].Data, ref["class"].Data) {
		t.Errorf("the bundle exported from --input-spec (no data) answers other outputs than the one exported with data")
	}

	// run-bundle: the whole request in a file, one input per file, and on stdin.
	body := `{"inputs": {"pixels": ` + nested(pixels) + `}}`
	reqFile := filepath.Join(t.TempDir(), "request.json")
	imgFile := filepath.Join(t.TempDir(), "pixels.json")
	if err := os.WriteFile(reqFile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(imgFile, []byte(nested(pixels)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run-bundle", bundle, "--inputs", reqFile}, {"run-bundle", "--input", "pixels=" + imgFile, bundle}} {
		code, out, errs = runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		d, correct := compareOutputs(t, outputsOf(t, []byte(out)), ref["probs"], labels)
		if d != 0 {
			t.Errorf("%v: run-bundle's probabilities differ from the runner's by %g", args, d)
		}
		if correct < 24 {
			t.Errorf("%v: the argmax agrees with %d of 32 labels", args, correct)
		}
		t.Logf("%v: max |diff| vs the runner %g; argmax = label for %d of 32", args[2:], d, correct)
	}
	stdinOut := withStdin(t, `{"inputs": {"pixels": `+nested(rowsOf(pixels, 0, 1))+`}}`, func() (int, string, string) { return runCLI("run-bundle", bundle) })
	if d, _ := compareOutputs(t, outputsOf(t, []byte(stdinOut)), rowsOfBundle(ref["probs"], 1), labels); d > 1e-5 {
		t.Errorf("run-bundle on stdin, batch 1: max |diff| %g from the batch-32 runner", d)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run-bundle", bundle, "--input", "pixels=" + writeTemp(t, nested(rowsOf(pixels, 0, 5)))}, "batch size 5: the bundle has programs for batch sizes [1 32]"},
		{[]string{"run-bundle", bundle, "--input", "pixels=" + writeTemp(t, `[[1,2,3]]`)}, `input "pixels": shape [1 3], the bundle takes [1 784]`},
		{[]string{"run-bundle", bundle, "--input", "pixels=" + writeTemp(t, `[[256]]`)}, `input "pixels": 256 is not a 8-bit unsigned integer (dtype U8)`},
		{[]string{"run-bundle", bundle, "--inputs", writeTemp(t, `{"inputs": {"image": [[1]]}}`)}, `input "image": not an input of this bundle`},
		{[]string{"run-bundle", bundle, "--inputs", writeTemp(t, `{"inputs": `)}, "malformed body"},
		{[]string{"run-bundle", bundle, "--inputs", reqFile, "--input", "pixels=" + imgFile}, "--inputs and --input both given"},
		{[]string{"run-bundle", t.TempDir(), "--inputs", reqFile}, "manifest.json"},
		{[]string{"export", "mnist-mlp", "--out", filepath.Join(t.TempDir(), "b")}, "export needs --checkpoint"},
		{[]string{"export", "mnist-mlp", "--checkpoint", runDir}, "export needs --out"},
		{[]string{"export", "mnist-mlp", "--checkpoint", runDir, "--out", filepath.Join(t.TempDir(), "b"), "--batch-sizes", "0"}, "--batch-sizes [0]"},
		{[]string{"export", "mnist-mlp", "--checkpoint", runDir, "--out", filepath.Join(t.TempDir(), "b"), "--input-spec", "image=float99:784"}, `unknown dtype "float99"`},
		{[]string{"export", "mnist-mlp", "--preset", "tiny", "--checkpoint", runDir, "--out", bundle}, "exists and is not empty"},
		{[]string{"serve", bundle, "--addr", ""}, "--addr: empty value"},
	} {
		if code, _, errs := runCLI(c.args...); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, errs, c.want)
		}
	}

	// serve, stopped by cancelling the context MainContext runs under.
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.MainContext(ctx, []string{"serve", bundle, "--addr", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	line := regexp.MustCompile(`serving mnist_tiny \(batch sizes 1 32\) on (http://127\.0\.0\.1:[0-9]+/predict)\n`)
	var url string
	for deadline := time.Now().Add(time.Minute); url == ""; time.Sleep(20 * time.Millisecond) {
		if m := line.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve printed no address: stdout %q, stderr %q", stdout.String(), stderr.String())
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		default:
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(body string) (int, []byte) {
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	status, resp := post(body)
	if status != http.StatusOK {
		t.Fatalf("POST %s: %d %s", url, status, resp)
	}
	if d, _ := compareOutputs(t, outputsOf(t, resp), ref["probs"], labels); d != 0 {
		t.Errorf("serve's probabilities differ from the runner's by %g", d)
	}
	for _, c := range []struct{ body, want string }{
		{`{"inputs": {"pixels": [[1, 2`, "malformed body"},
		{`{"inputs": {"pixels": [[1, 2, 3]]}}`, `input \"pixels\": shape [1 3], the bundle takes [1 784]`},
		{`{"inputs": {"pixels": [["a"]]}}`, `input \"pixels\"`},
		{`{"inputs": {}}`, `input \"pixels\": missing`},
	} {
		if status, resp := post(c.body); status != http.StatusBadRequest || !strings.Contains(string(resp), c.want) {
			t.Errorf("POST %.40s: %d %s; want 400 with %q", c.body, status, resp, c.want)
		}
	}
	client.CloseIdleConnections()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d after the cancel: %s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop within a minute of the cancel")
	}
	if !strings.Contains(stderr.String(), "serve: stopping") {
		t.Errorf("serve did not say it was stopping: %q", stderr.String())
	}
	if _, err := client.Post(url, "application/json", strings.NewReader(body)); err == nil {
		t.Errorf("%s still answers after serve returned", url)
	}
	client.CloseIdleConnections()
	var now int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if now = runtime.NumGoroutine(); now <= before || time.Now().After(deadline) {
			break
		}
	}
	if now > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after serve stopped, %d before it started:\n%s", now, before, buf[:runtime.Stack(buf, true)])
	}

	// serve again, stopped by SIGTERM while a request is in its handler.
	serveSIGTERM(t, bundle, body, ref["probs"], labels)
}

// rowsOf keeps rows [from, to) of a [N, D] uint8 tensor.
func rowsOf(x *tensors.Tensor, from, to int) *tensors.Tensor {
	d := x.Shape().Dimensions[1]
	flat := tensors.MustCopyFlatData[uint8](x)
	return tensors.FromFlatDataAndDimensions(slices.Clone(flat[from*d:to*d]), to-from, d)
}

// rowsOfBundle keeps the first k rows of a [N, 10] float32 bundle tensor.
func rowsOfBundle(x exportbundle.Tensor, k int) exportbundle.Tensor {
	return exportbundle.Tensor{DType: x.DType, Shape: []int{k, x.Shape[1]}, Data: x.Data[:k*x.Shape[1]*4]}
}

// writeTemp writes s to a fresh file and returns its path.
func writeTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// withStdin runs f with os.Stdin reading s, and returns its stdout (failing on a non-zero exit).
func withStdin(t *testing.T, s string, f func() (int, string, string)) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(w, s)
		w.Close()
	}()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old; r.Close() }()
	code, out, errs := f()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	return out
}

// TestExportCommandsHelp: export, run-bundle and serve each have their help, and the root help
// lists them.
func TestExportCommandsHelp(t *testing.T) {
	_, root, _ := runCLI("--help")
	for cmd, want := range map[string][]string{
		"export":     {"--checkpoint PATH", "--out DIR", "--batch-sizes SIZES", "--name NAME", "--provenance-root DIR", "--input-spec NAME=DTYPE:DIMS", "--preset NAME", "--set FIELD=VALUE"},
		"run-bundle": {"--inputs FILE", "--input NAME=FILE", `{"outputs"`},
		"serve":      {"--addr ADDR", "SIGINT", "/predict"},
	} {
		code, out, errs := runCLI("help", cmd)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "usage: nitro "+cmd) {
			t.Errorf("help %s: exit %d, stderr %q:\n%s", cmd, code, errs, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("help %s lacks %q:\n%s", cmd, w, out)
			}
		}
		if !strings.Contains(root, "\n  "+cmd+" ") {
			t.Errorf("the root help does not list %s:\n%s", cmd, root)
		}
	}
}

// export --out repo/mnist, where repo does not exist yet, makes repo as mkdir -p would and writes
// the bundle there; before, it failed with "stat repo: no such file or directory".
func TestExportMakesOutParents(t *testing.T) {
	needPlugin(t)
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	if code, out, errs := runCLI(append([]string{"train", "mnist-mlp", "--run-dir", run, "--no-log"}, quick...)...); code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errs, out)
	}
	out := filepath.Join(dir, "repo", "deeper", "mnist")
	if code, stdout, errs := runCLI("export", "mnist-mlp", "--checkpoint", run, "--out", out); code != 0 {
		t.Fatalf("export --out %s (its parents not there): exit %d: %s\n%s", out, code, errs, stdout)
	}
	if _, err := exportbundle.Read(out); err != nil {
		t.Errorf("the bundle export wrote under new parents: %v", err)
	}
}
