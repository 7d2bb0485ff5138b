package exportbundle

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nitro-go/nitro/generate"
	"github.com/nitro-go/nitro/tensorfile"
)

// countingProgram is a decode step written by hand: its state is a step counter (I32 [1 1], +1
// per step), and its logits are w at (token + 1 + counter) mod 256 and 0 elsewhere. So a greedy
// run's bytes show that the state is carried from step to step and zero after each Reset.
const countingProgram = `module @counting {
  func.func public @main(%tok: tensor<1x1xi32>, %pos: tensor<1xi32>, %st: tensor<1x1xi32>, %w: tensor<256xf32>) -> (tensor<1x256xf32>, tensor<1x1xi32>) {
    %one = stablehlo.constant dense<1> : tensor<1x1xi32>
    %n = stablehlo.constant dense<256> : tensor<1x1xi32>
    %a = stablehlo.add %tok, %one : tensor<1x1xi32>
    %b = stablehlo.add %a, %st : tensor<1x1xi32>
    %c = stablehlo.remainder %b, %n : tensor<1x1xi32>
    %cb = stablehlo.broadcast_in_dim %c, dims = [0, 1] : (tensor<1x1xi32>) -> tensor<1x256xi32>
    %io = stablehlo.iota dim = 1 : tensor<1x256xi32>
    %eq = stablehlo.compare EQ, %io, %cb : (tensor<1x256xi32>, tensor<1x256xi32>) -> tensor<1x256xi1>
    %wb = stablehlo.broadcast_in_dim %w, dims = [1] : (tensor<256xf32>) -> tensor<1x256xf32>
    %z = stablehlo.constant dense<0.0> : tensor<1x256xf32>
    %l = stablehlo.select %eq, %wb, %z : tensor<1x256xi1>, tensor<1x256xf32>
    %s = stablehlo.add %st, %one : tensor<1x1xi32>
    return %l, %s : tensor<1x256xf32>, tensor<1x1xi32>
  }
}
`

// countingBundle is countingProgram as a generator bundle of the given context.
func countingBundle(context int) *Bundle {
	w := make([]float32, GeneratorVocab)
	for i := range w {
		w[i] = 4
	}
	wt, _ := NewTensor([]int{GeneratorVocab}, w)
	counter := TensorSpec{Name: "state/counter", DType: tensorfile.I32, Shape: []int{-1, 1}}
	return &Bundle{
		Name: "counting",
		Inputs: []TensorSpec{{Name: "token", DType: tensorfile.I32, Shape: []int{-1, 1}},
			{Name: "position", DType: tensorfile.I32, Shape: []int{-1}}, counter},
		Outputs:  []TensorSpec{{Name: "logits", DType: tensorfile.F32, Shape: []int{-1, GeneratorVocab}}, counter},
		Weights:  []Weight{{Name: "w", Tensor: wt}},
		Programs: map[int]Program{1: {Format: "mlir", Code: []byte(countingProgram)}},
		Generator: &GeneratorSpec{Context: context, Vocab: GeneratorVocab, Token: "token", Position: "position",
			Logits: "logits", State: []string{"state/counter"}},
	}
}

// countingFake is the same model in memory: generate.Fake with the counter as the window's
// length less one (the steps since the window's start).
func countingFake(context int) *generate.Fake {
	return &generate.Fake{Ctx: context, Vocab: GeneratorVocab, Logits: func(w []int) []float32 {
		l := make([]float32, GeneratorVocab)
		l[(w[len(w)-1]+1+len(w)-1)%GeneratorVocab] = 4
		return l
	}}
}

// openCounting writes countingBundle, reads it back and opens it.
func openCounting(t *testing.T, context int) *Runner {
	t.Helper()
	plugin := requirePlugin(t)
	dir := filepath.Join(t.TempDir(), "counting")
	if err := Write(dir, countingBundle(context)); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, plugin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if g := r.Generator(); g == nil || g.Context != context || !slices.Equal(g.State, []string{"state/counter"}) {
		t.Fatalf("the generator entry read back: %+v", g)
	}
	return r
}

// The bundle's Stepper gives Generate the tokens of the in-memory model, windows re-fed
// included: the state goes from step to step on the device and restarts at zero on Reset.
func TestGeneratorStepperCarriesState(t *testing.T) {
	r := openCounting(t, 8)
	for _, c := range []struct {
		prompt []int
		o      generate.Options
	}{
		{[]int{10, 20, 30}, generate.Options{Tokens: 4, TopK: 1}},  // within one window
		{[]int{10, 20, 30}, generate.Options{Tokens: 20, TopK: 1}}, // re-fed windows
		{[]int{250}, generate.Options{Tokens: 12, Temperature: 1, Seed: 5}},
	} {
		s, err := r.Stepper()
		if err != nil {
			t.Fatal(err)
		}
		got, err := generate.Generate(s, c.prompt, c.o)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		want, err := generate.Generate(countingFake(8), c.prompt, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("prompt %v, %+v: the bundle generated %v, the model %v", c.prompt, c.o, got, want)
		}
	}
	s, _ := r.Stepper()
	defer s.Close()
	if _, err := s.Step(1, 3); err == nil || !strings.Contains(err.Error(), "position 3: want 0") {
		t.Errorf("a step out of order: %v", err)
	}
	if _, err := s.Step(256, 0); err == nil || !strings.Contains(err.Error(), "token 256") {
		t.Errorf("a token past the vocabulary: %v", err)
	}
}

// A manifest's generator entry is checked field by field: each bad one is refused by its name,
// at write and at read, never a panic.
func TestGeneratorManifestRefusesBadEntries(t *testing.T) {
	for _, c := range []struct {
		edit func(b *Bundle)
		want string
	}{
		{func(b *Bundle) { b.Generator.Context = 0 }, "generator.context: 0"},
		{func(b *Bundle) { b.Generator.Context = 1 << 30 }, "generator.context: 1073741824"},
		{func(b *Bundle) { b.Generator.Vocab = 50000 }, "generator.vocab: 50000"},
		{func(b *Bundle) { b.Generator.Token = "" }, "generator.token: empty"},
		{func(b *Bundle) { b.Generator.Token = "tok" }, `generator.token: "tok" is not one of the inputs`},
		{func(b *Bundle) { b.Generator.Position = "token" }, `generator.position: "token" is I32[-1 1]`},
		{func(b *Bundle) { b.Generator.Logits = "state/counter" }, `generator.logits: "state/counter" is I32[-1 1]`},
		{func(b *Bundle) { b.Generator.State = nil }, `generator: input "state/counter" has no part`},
		{func(b *Bundle) { b.Generator.State = []string{"token"} }, `generator.state[0]: input "token" has another part`},
		{func(b *Bundle) { b.Generator.State = append(b.Generator.State, "state/counter") }, `generator.state[1]: input "state/counter" has another part`},
		{func(b *Bundle) { b.Outputs = b.Outputs[:1] }, `generator.state[0]: "state/counter" is not one of the outputs`},
		{func(b *Bundle) { b.Outputs[1].DType = tensorfile.F32 }, `generator.state[0]: "state/counter" goes in as I32[-1 1] and comes out as F32[-1 1]`},
		{func(b *Bundle) { b.Programs[2] = b.Programs[1] }, "generator: batch_sizes [1 2]"},
	} {
		b := countingBundle(8)
		c.edit(b)
		err := Write(filepath.Join(t.TempDir(), "b"), b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write: %v, want an error naming %q", err, c.want)
		}
	}
	// The same rules at read: a written manifest whose entry is edited is refused by name.
	dir := filepath.Join(t.TempDir(), "b")
	if err := Write(dir, countingBundle(8)); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"context": 8`, `"context": -3`, "generator.context: -3"},
		{`"vocab": 256`, `"vocab": 0`, "generator.vocab: 0"},
		{`"logits": "logits"`, `"logits": "nothing"`, `generator.logits: "nothing" is not one of the outputs`},
		{`"context": 8`, `"context": "8"`, "generator.context"},
		{`"context": 8`, `"context": 8, "extra": 1`, `unknown field "extra"`},
	} {
		bad := strings.Replace(string(good), c.from, c.to, 1)
		if bad == string(good) {
			t.Fatalf("the manifest has no %s: %s", c.from, good)
		}
		if _, err := ParseManifest([]byte(bad)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: ParseManifest: %v, want an error naming %q", c.to, err, c.want)
		}
	}
}

// generateHTTP answers one request to a server of the counting generator.
func generateHTTP(t *testing.T, h http.Handler, path, body string, header map[string]string) (int, string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	out, _ := io.ReadAll(rec.Body)
	return rec.Code, string(out), rec.Header()
}

// A generator answers infer with the continuation, as JSON and as binary, from a BYTES or a
// UINT8 prompt, the same bytes Generate gives; its metadata is the prompt and the text.
func TestServeGenerator(t *testing.T) {
	r := openCounting(t, 8)
	h, err := ModelsHandler([]*Runner{r})
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate.Generate(countingFake(8), []int{'h', 'i'}, generate.Options{Tokens: 10, TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	wantText := make([]byte, len(want))
	for i, b := range want {
		wantText[i] = byte(b)
	}
	const infer = "/v2/models/counting/infer"
	params := `"parameters": {"max_tokens": 10, "top_k": 1}`
	code, body, _ := generateHTTP(t, h, infer, `{"id": "7", `+params+`, "inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "data": ["hi"]}]}`, nil)
	var ans struct {
		ID      string `json:"id"`
		Outputs []struct {
			Name, Datatype string
			Shape          []int
			Data           json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(body), &ans); code != 200 || err != nil {
		t.Fatalf("infer: %d %s (%v)", code, body, err)
	}
	tokens, _ := json.Marshal(want)
	if len(ans.Outputs) != 2 || ans.ID != "7" || ans.Outputs[0].Name != "text" || ans.Outputs[1].Name != "tokens" || string(ans.Outputs[1].Data) != string(tokens) {
		t.Errorf("infer: %s, want tokens %s", body, tokens)
	}

	// A UINT8 prompt, the text asked for as binary: a 4-byte length, then the bytes.
	code, body, hdr := generateHTTP(t, h, infer, `{`+params+`, "inputs": [{"name": "prompt", "shape": [2], "datatype": "UINT8", "data": [104, 105]}],
		"outputs": [{"name": "text", "parameters": {"binary_data": true}}]}`, nil)
	n := hdr.Get(inferenceHeaderLength)
	if code != 200 || n == "" {
		t.Fatalf("binary text: %d %q", code, body)
	}
	var hl int
	json.Unmarshal([]byte(n), &hl)
	raw := body[hl:]
	if len(raw) < 4 || int(binary.LittleEndian.Uint32([]byte(raw))) != len(wantText) || raw[4:] != string(wantText) {
		t.Errorf("binary text: %q, want %q", raw, wantText)
	}

	// A binary BYTES prompt.
	header := `{` + params + `, "inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "parameters": {"binary_data_size": 6}}], "outputs": [{"name": "tokens"}]}`
	code, body, _ = generateHTTP(t, h, infer, header+"\x02\x00\x00\x00hi", map[string]string{inferenceHeaderLength: itoa(len(header))})
	if code != 200 || !strings.Contains(body, string(tokens)) {
		t.Errorf("a binary BYTES prompt: %d %s, want tokens %s", code, body, tokens)
	}

	req := httptest.NewRequest(http.MethodGet, "/v2/models/counting", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if got := rec.Body.String(); !strings.Contains(got, `"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1]}]`) || !strings.Contains(got, `{"name":"text","datatype":"BYTES","shape":[1]}`) {
		t.Errorf("metadata: %s", got)
	}
	if code, body, _ := generateHTTP(t, h, "/predict", `{}`, nil); code != 404 || !strings.Contains(body, "text generator") {
		t.Errorf("/predict: %d %s", code, body)
	}

	// Requests at once each have their own state: each gets the continuation alone would.
	var wg sync.WaitGroup
	answers := make([]string, 6)
	for i := range answers {
		wg.Go(func() {
			_, answers[i], _ = generateHTTP(t, h, infer, `{`+params+`, "inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "data": ["hi"]}], "outputs": [{"name": "tokens"}]}`, nil)
		})
	}
	wg.Wait()
	for i, a := range answers {
		if !strings.Contains(a, `"data":`+string(tokens)) {
			t.Errorf("concurrent request %d: %s, want tokens %s", i, a, tokens)
		}
	}

	// A request whose client has gone stops generating at the next step.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, rerr := generateInfer(ctx, r, strings.NewReader(`{`+params+`, "inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "data": ["hi"]}]}`), "", nil, time.Second)
	if rerr == nil || rerr.Status != http.StatusServiceUnavailable || !strings.Contains(rerr.Msg, "cancelled") {
		t.Errorf("a cancelled request: %v", rerr)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Bad requests are 400s naming the input, parameter or field, never a 500.
func TestServeGeneratorRefusesBadRequests(t *testing.T) {
	r := openCounting(t, 8)
	h, err := ModelsHandler([]*Runner{r})
	if err != nil {
		t.Fatal(err)
	}
	prompt := func(text string) string {
		return `"inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "data": ["` + text + `"]}]`
	}
	hi := prompt("hi")
	binaryPrompt := func(size int, raw string) (string, map[string]string) {
		header := `{"inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "parameters": {"binary_data_size": ` + itoa(size) + `}}]}`
		return header + raw, map[string]string{inferenceHeaderLength: itoa(len(header))}
	}
	longSize, longHeader := binaryPrompt(9, "\x05\x00\x00\x00hi")
	lyingLength, lyingHeader := binaryPrompt(6, "\x05\x00\x00\x00hi")
	for _, c := range []struct {
		body   string
		header map[string]string
		code   int
		want   string
	}{
		{`{` + prompt("123456789") + `}`, nil, 400, "inputs[0].data: the prompt is 9 bytes, more than the model's context of 8"},
		{`{` + prompt("") + `}`, nil, 400, "inputs[0].data: the prompt is empty"},
		{`{"parameters": {"max_tokens": 0}, ` + hi + `}`, nil, 400, "parameters.max_tokens: 0"},
		{`{"parameters": {"tokens": 5000}, ` + hi + `}`, nil, 400, "parameters.tokens: 5000: want a whole number from 1 to 4096"},
		{`{"parameters": {"tokens": 5, "max_tokens": 5}, ` + hi + `}`, nil, 400, "parameters.tokens: given with max_tokens"},
		{`{"parameters": {"temperature": 0}, ` + hi + `}`, nil, 400, "temperature = 0: want a finite number > 0, or top_k 1"},
		{`{"parameters": {"temperature": -1, "top_k": 3}, ` + hi + `}`, nil, 400, "temperature = -1"},
		{`{"parameters": {"temperature": "hot"}, ` + hi + `}`, nil, 400, `parameters.temperature: "hot" is not a number`},
		{`{"parameters": {"top_k": 300}, ` + hi + `}`, nil, 400, "parameters.top_k: 300"},
		{`{"parameters": {"seed": 1.5}, ` + hi + `}`, nil, 400, "parameters.seed: 1.5"},
		{`{"parameters": {"temprature": 1}, ` + hi + `}`, nil, 400, "parameters.temprature: not a parameter of a text generator"},
		{`{"inputs": []}`, nil, 400, `inputs: 0 inputs: a text generator takes one, "prompt"`},
		{`{"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": ["a"]}]}`, nil, 400, `inputs[0].name: "x" is not an input`},
		{`{"inputs": [{"name": "prompt", "shape": [1], "datatype": "FP32", "data": [1]}]}`, nil, 400, `inputs[0].datatype: "FP32"`},
		{`{"inputs": [{"name": "prompt", "shape": [2], "datatype": "BYTES", "data": ["a", "b"]}]}`, nil, 400, "inputs[0].shape: [2]: a BYTES prompt is one string"},
		{`{"inputs": [{"name": "prompt", "shape": [2], "datatype": "UINT8", "data": [1, 256]}]}`, nil, 400, "inputs[0].data: element 1 is 256"},
		{`{"inputs": [{"name": "prompt", "shape": [3], "datatype": "UINT8", "data": [1, 2]}]}`, nil, 400, "inputs[0].data: 2 elements, shape [3] holds 3"},
		{`{"inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES"}]}`, nil, 400, "inputs[0].data: missing"},
		{`{"inputs": [{"name": "prompt", "shape": [4294967296, 4294967296], "datatype": "UINT8", "data": [1]}]}`, nil, 400, "inputs[0].shape: [4294967296 4294967296] is not the shape of a prompt"},
		{`{"inputs": [{"name": "prompt", "shape": [1048576, 1048576], "datatype": "UINT8", "data": [1]}]}`, nil, 400, "is not the shape of a prompt"},
		{`{` + hi + `, "outputs": [{"name": "logits"}]}`, nil, 400, `outputs[0].name: "logits" is not an output`},
		{`{` + hi + `, "model_name": "other"}`, nil, 400, `model_name: "other"`},
		{`{` + hi + `, "inputs": []}`, nil, 400, "malformed body"},
		{`{` + hi, nil, 400, "malformed body"},
		{`{` + hi + `, "extra": 1}`, nil, 400, `unknown field "extra"`},
		{longSize, longHeader, 400, "inputs[0].parameters.binary_data_size: 9 bytes, but the body holds 6"},
		{lyingLength, lyingHeader, 400, "a BYTES element is a 4-byte little-endian length"},
		{`{` + prompt(strings.Repeat("a", 70<<10)) + `}`, nil, 413, "request body over"},
	} {
		code, body, _ := generateHTTP(t, h, "/v2/models/counting/infer", c.body, c.header)
		var refusal struct{ Error string }
		json.Unmarshal([]byte(body), &refusal)
		if code != c.code || !strings.Contains(refusal.Error, c.want) {
			t.Errorf("%.120q: %d %s, want %d naming %q", c.body, code, body, c.code, c.want)
		}
	}
}

// FuzzDecodeGenerate: a generator's request decoder never panics on any body or header.
func FuzzDecodeGenerate(f *testing.F) {
	f.Add([]byte(`{"parameters": {"max_tokens": 3}, "inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "data": ["hi"]}]}`), "")
	f.Add([]byte(`{"inputs": [{"name": "prompt", "shape": [2], "datatype": "UINT8", "parameters": {"binary_data_size": 2}}]}hi`), "92")
	f.Fuzz(func(t *testing.T, data []byte, header string) {
		req, err := decodeGenerate(data, header, "m", 8)
		if err == nil && (len(req.prompt) == 0 || len(req.prompt) > 8 || req.opts.Check() != nil) {
			t.Fatalf("accepted %q: prompt %v, options %+v", data, req.prompt, req.opts)
		}
	})
}
