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

// nested writes rows of a [N, D] float32 tensor as JSON nested arrays (shortest round-trip text).
func nested(x *tensors.Tensor) string {
	flat := tensors.MustCopyFlatData[float32](x)
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
			b.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 32))
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String()
}

// outputsOf parses {"outputs": {"logits": [[...]]}} into the logits rows.
func outputsOf(t *testing.T, body []byte) [][]float64 {
	t.Helper()
	var resp struct {
		Outputs map[string][][]float64 `json:"outputs"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("the outputs are not JSON: %v: %.300s", err, body)
	}
	logits, ok := resp.Outputs["logits"]
	if !ok {
		t.Fatalf("no logits in %.300s", body)
	}
	return logits
}

// compareLogits returns the largest |a-b| between JSON logits and a runner's, and how many rows'
// argmax equal the labels.
func compareLogits(t *testing.T, got [][]float64, want exportbundle.Tensor, labels []int32) (maxDiff float64, correct int) {
	t.Helper()
	w, err := exportbundle.Values[float32](want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want.Shape[0] {
		t.Fatalf("%d rows of logits, the runner gave %d", len(got), want.Shape[0])
	}
	for i, row := range got {
		if len(row) != 10 {
			t.Fatalf("row %d has %d logits", i, len(row))
		}
		best := 0
		for j, v := range row {
			maxDiff = max(maxDiff, math.Abs(float64(float32(v))-float64(w[i*10+j]))) // JSON holds float32 text
			if v > row[best] {
				best = j
			}
		}
		if int32(best) == labels[i] {
			correct++
		}
	}
	return maxDiff, correct
}

// TestExportRunBundleServe trains the tiny preset into a temporary run dir, exports its newest
// checkpoint at batch sizes 1 and 32 (once from the data, once from --input-spec with a DataDir
// that does not exist: no data read, the same bundle outputs), runs the bundle with run-bundle on
// a JSON file of 32 test images (the logits equal the runner's called directly, and the argmax
// agrees with most labels), then serves it on 127.0.0.1:0 through MainContext: POST /predict over
// loopback answers the runner's logits, a malformed body and a wrong shape get a 400 naming the
// fault, and cancelling the context shuts the server down with no goroutine left behind.
func TestExportRunBundleServe(t *testing.T) {
	plugin := needPlugin(t)
	images, labels := testImages(t, 32)
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
	for _, w := range []string{"bundle: " + bundle + "\n", "batch sizes: 1 32\n", "input:  image F32 [-1 784]\n", "output: logits F32 [-1 10]\n",
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

	// The same export from specs alone: BuildData would fail on this DataDir.
	specBundle := filepath.Join(t.TempDir(), "from_specs")
	code, out, errs = runCLI(append([]string{"export", "mnist-mlp", "--checkpoint", ckpt[1], "--out", specBundle, "--batch-sizes", "32", "--name", "tiny_specs",
		"--input-spec", "image=float32:784", "--set", "DataDir=" + filepath.Join(t.TempDir(), "nowhere")}, tiny...)...)
	if code != 0 || !strings.Contains(out, "input:  image F32 [-1 784]") {
		t.Fatalf("export --input-spec: exit %d: %s\n%s", code, errs, out)
	}

	// The runner, called directly, is the reference.
	r, err := exportbundle.Open(bundle, plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	x, err := exportbundle.NewTensor([]int{32, 784}, tensors.MustCopyFlatData[float32](images))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Run(32, map[string]exportbundle.Tensor{"image": x})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := exportbundle.Open(specBundle, plugin)
	if err != nil {
		t.Fatal(err)
	}
	fromSpecs, err := rs.Run(32, map[string]exportbundle.Tensor{"image": x})
	rs.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromSpecs["logits"].Data, ref["logits"].Data) {
		t.Errorf("the bundle exported from --input-spec (no data) answers other logits than the one exported with data")
	}

	// run-bundle: the whole request in a file, one input per file, and on stdin.
	body := `{"inputs": {"image": ` + nested(images) + `}}`
	reqFile := filepath.Join(t.TempDir(), "request.json")
	imgFile := filepath.Join(t.TempDir(), "image.json")
	if err := os.WriteFile(reqFile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(imgFile, []byte(nested(images)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run-bundle", bundle, "--inputs", reqFile}, {"run-bundle", "--input", "image=" + imgFile, bundle}} {
		code, out, errs = runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		d, correct := compareLogits(t, outputsOf(t, []byte(out)), ref["logits"], labels)
		if d != 0 {
			t.Errorf("%v: run-bundle's logits differ from the runner's by %g", args, d)
		}
		if correct < 24 {
			t.Errorf("%v: the argmax agrees with %d of 32 labels", args, correct)
		}
		t.Logf("%v: max |diff| vs the runner %g; argmax = label for %d of 32", args[2:], d, correct)
	}
	stdinOut := withStdin(t, `{"inputs": {"image": `+nested(rowsOf(images, 0, 1))+`}}`, func() (int, string, string) { return runCLI("run-bundle", bundle) })
	if d, _ := compareLogits(t, outputsOf(t, []byte(stdinOut)), rowsOfBundle(ref["logits"], 1), labels); d > 1e-5 {
		t.Errorf("run-bundle on stdin, batch 1: max |diff| %g from the batch-32 runner", d)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run-bundle", bundle, "--input", "image=" + writeTemp(t, nested(rowsOf(images, 0, 5)))}, "batch size 5: the bundle has programs for batch sizes [1 32]"},
		{[]string{"run-bundle", bundle, "--input", "image=" + writeTemp(t, `[[1,2,3]]`)}, `input "image": shape [1 3], the bundle takes [1 784]`},
		{[]string{"run-bundle", bundle, "--inputs", writeTemp(t, `{"inputs": {"pixels": [[1]]}}`)}, `input "pixels": not an input of this bundle`},
		{[]string{"run-bundle", bundle, "--inputs", writeTemp(t, `{"inputs": `)}, "malformed body"},
		{[]string{"run-bundle", bundle, "--inputs", reqFile, "--input", "image=" + imgFile}, "--inputs and --input both given"},
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
	if d, _ := compareLogits(t, outputsOf(t, resp), ref["logits"], labels); d != 0 {
		t.Errorf("serve's logits differ from the runner's by %g", d)
	}
	for _, c := range []struct{ body, want string }{
		{`{"inputs": {"image": [[1, 2`, "malformed body"},
		{`{"inputs": {"image": [[1, 2, 3]]}}`, `input \"image\": shape [1 3], the bundle takes [1 784]`},
		{`{"inputs": {"image": [["a"]]}}`, `input \"image\"`},
		{`{"inputs": {}}`, `input \"image\": missing`},
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
	serveSIGTERM(t, bundle, body, ref["logits"], labels)
}

// rowsOf keeps rows [from, to) of a [N, D] float32 tensor.
func rowsOf(x *tensors.Tensor, from, to int) *tensors.Tensor {
	d := x.Shape().Dimensions[1]
	flat := tensors.MustCopyFlatData[float32](x)
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
