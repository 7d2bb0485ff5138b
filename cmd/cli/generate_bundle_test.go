package cli_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/gpt"
	"github.com/nitro-go/nitro/export"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/generate"
	"github.com/nitro-go/nitro/internal/prereq"
)

// The gpt is exported as a text generator: the export looks for these two methods.
var (
	_ export.StepExporter = (*gpt.GPT)(nil)
	_ cli.TextGenerator   = (*gpt.GPT)(nil)
)

// generatorCase is one continuation asked for of both nitro sample and the bundle.
type generatorCase struct {
	prompt string
	opts   generate.Options
}

// generatorCases: sampled with top-k, greedy, and one past the tiny context (32) so its window is
// re-fed at least once.
var generatorCases = []generatorCase{
	{"func main() {", generate.Options{Tokens: 40, Temperature: 0.9, TopK: 50, Seed: 3}},
	{"package ", generate.Options{Tokens: 24, TopK: 1}},
	{"// A", generate.Options{Tokens: 70, Temperature: 1, Seed: 11}},
}

// sampleText is what nitro sample continues c.prompt with from the run dir (without the prompt
// and the newline it prints around it).
func sampleText(t *testing.T, dir string, c generatorCase) string {
	t.Helper()
	code, out, errs := runCLI("sample", dir, "--prompt", c.prompt, "--tokens", strconv.Itoa(c.opts.Tokens),
		"--temperature", strconv.FormatFloat(c.opts.Temperature, 'g', -1, 64), "--top-k", strconv.Itoa(c.opts.TopK),
		"--seed", strconv.FormatUint(c.opts.Seed, 10))
	if code != 0 {
		t.Fatalf("sample %+v: exit %d: %s", c, code, errs)
	}
	text, ok := strings.CutPrefix(strings.TrimSuffix(out, "\n"), c.prompt)
	if !ok || len(text) != c.opts.Tokens {
		t.Fatalf("sample %+v: stdout %q", c, out)
	}
	return text
}

// exportGenerator exports the run dir's gpt with nitro export into a folder named gpt (the
// bundle's name) and returns it.
func exportGenerator(t *testing.T, dir string) string {
	t.Helper()
	b := filepath.Join(t.TempDir(), "gpt")
	code, out, errs := runCLI("export", "gpt", "--checkpoint", dir, "--out", b)
	if code != 0 {
		t.Fatalf("export gpt: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "text generator: context 32, vocabulary 256, 4 state tensors") || !strings.Contains(out, "input:  state/decode_cache/block_0/keys F32 [-1 2 32 16]") {
		t.Errorf("export gpt printed:\n%s", out)
	}
	return b
}

// bundleEqualsSample exports the trained tiny gpt and generates through the bundle with gopjrt
// alone (Runner.Stepper under generate.Generate): for each case, the same bytes as nitro sample
// on the checkpoint the bundle came from, with the same seed. That equality is what says the
// bundle is the model. --batch-sizes and --input-spec are refused for a generator, by name.
func bundleEqualsSample(t *testing.T, dir string) {
	plugin := needPlugin(t)
	b := exportGenerator(t, dir)
	r, err := exportbundle.Open(b, plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, c := range generatorCases {
		want := sampleText(t, dir, c)
		s, err := r.Stepper()
		if err != nil {
			t.Fatal(err)
		}
		prompt := make([]int, len(c.prompt))
		for i := range len(c.prompt) {
			prompt[i] = int(c.prompt[i])
		}
		out, err := generate.Generate(s, prompt, c.opts)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(out))
		for i, tok := range out {
			got[i] = byte(tok)
		}
		if string(got) != want {
			t.Errorf("%+v: the bundle generated %q, nitro sample %q", c, got, want)
		}
	}
	for _, args := range [][]string{{"--batch-sizes", "1,4"}, {"--input-spec", "tokens=int32:32"}} {
		code, _, errs := runCLI(append([]string{"export", "gpt", "--checkpoint", dir, "--out", filepath.Join(t.TempDir(), "x")}, args...)...)
		if code == 0 || !strings.Contains(errs, args[0]) || !strings.Contains(errs, "text generator") || !strings.Contains(errs, "--forward") {
			t.Errorf("export gpt %v: exit %d: %s", args, code, errs)
		}
	}
	// --forward: the whole window's logits, as any experiment's Forward is exported.
	code, out, errs := runCLI("export", "gpt", "--checkpoint", dir, "--out", filepath.Join(t.TempDir(), "fwd"), "--forward", "--input-spec", "tokens=int32:32", "--batch-sizes", "1,2")
	if code != 0 || strings.Contains(out, "text generator") || !strings.Contains(out, "output: logits F32 [-1 32 256]") {
		t.Errorf("export gpt --forward: exit %d: %s%s", code, out, errs)
	}
}

// generateReport is what testdata/triton_generate.py prints.
type generateReport struct {
	Ready    bool `json:"ready"`
	Metadata struct {
		Inputs, Outputs []struct {
			Name, Datatype string
			Shape          []int
		}
	} `json:"metadata"`
	Cases []map[string]struct {
		TextHex   string  `json:"text_hex"`
		TextShape []int   `json:"text_shape"`
		TokensHex string  `json:"tokens_hex"`
		ID        string  `json:"id"`
		Seconds   float64 `json:"seconds"`
	} `json:"cases"`
	Refused map[string]struct{ Status, Message string } `json:"refused"`
}

// tritonGenerates serves the exported tiny gpt with nitro serve and has Triton's Python client
// continue each case's prompt with its options as the request's parameters: the text (binary
// BYTES; JSON BYTES and a UINT8 prompt for the first case) is nitro sample's, byte for byte.
// Bad requests come back 400 naming the prompt or the parameter.
// Run alone: NITRO_SERVE_PYTHON=$PWD/.nitro/serve-venv/bin/python go test -run Sample/Triton ./cmd/cli/
func tritonGenerates(t *testing.T, dir string) {
	needPlugin(t)
	py := servePython(t)
	b := exportGenerator(t, dir)
	var cases []map[string]any
	var want []string
	for _, c := range generatorCases {
		want = append(want, sampleText(t, dir, c))
		cases = append(cases, map[string]any{"prompt": c.prompt, "parameters": map[string]any{
			"max_tokens": c.opts.Tokens, "temperature": c.opts.Temperature, "top_k": c.opts.TopK, "seed": c.opts.Seed}})
	}
	line := regexp.MustCompile(`serving gpt \(text generator, context 32, from [^\n]*\) on http://(127\.0\.0\.1:[0-9]+)/v2/models/gpt/infer\n`)
	addr, done, _, stderr := startServeAt(t, line, b)
	spec, _ := json.Marshal(map[string]any{"model": "gpt", "cases": cases, "too_long": strings.Repeat("x", 33)})
	out, err := pythonRun(py, string(spec), "testdata/triton_generate.py", addr)
	if err != nil {
		prereq.ServePython.Broken(t, fmt.Sprintf("triton_generate.py: %v\nserve's stderr: %s", err, stderr.String()))
	}
	sigterm(t)
	wantExit0(t, done, stderr)
	var rep generateReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	md := rep.Metadata
	if !rep.Ready || len(md.Inputs) != 1 || md.Inputs[0].Name != "prompt" || md.Inputs[0].Datatype != "BYTES" || len(md.Outputs) != 2 || md.Outputs[0].Name != "text" {
		t.Errorf("ready %v, metadata %+v", rep.Ready, md)
	}
	if len(rep.Cases) != len(want) {
		t.Fatalf("%d cases answered, %d asked: %s", len(rep.Cases), len(want), out)
	}
	for i, got := range rep.Cases {
		for mode, g := range got {
			wantHex := hex.EncodeToString([]byte(want[i]))
			if mode == "json" && !utf8.ValidString(want[i]) {
				wantHex = hex.EncodeToString([]byte(strings.ToValidUTF8(want[i], "\uFFFD"))) // JSON strings carry text
			}
			if g.TextHex != wantHex || g.TokensHex != hex.EncodeToString([]byte(want[i])) || fmt.Sprint(g.TextShape) != "[1]" || g.ID != "gen-1" {
				text, _ := hex.DecodeString(g.TextHex)
				t.Errorf("case %d (%+v), %s: served %q (shape %v, id %q), nitro sample %q", i, generatorCases[i], mode, text, g.TextShape, g.ID, want[i])
			}
		}
		if g, ok := got["binary"]; ok {
			t.Logf("case %d: %d bytes in %.1f ms through the server, %.2f ms a byte (the prompt's %d included)",
				i, generatorCases[i].opts.Tokens, g.Seconds*1e3, g.Seconds*1e3/float64(generatorCases[i].opts.Tokens), len(generatorCases[i].prompt))
		}
	}
	for name, want := range map[string]string{
		"too_long":  "inputs[0].data: the prompt is 33 bytes, more than the model's context of 32",
		"no_tokens": "parameters.max_tokens: 0",
		"cold":      "temperature = 0: want a finite number > 0, or top_k 1",
		"unknown":   "parameters.temprature: not a parameter of a text generator",
		"top_k":     "parameters.top_k: 1000",
	} {
		if got := rep.Refused[name]; got.Status != "400" || !strings.Contains(got.Message, want) {
			t.Errorf("refused %s: %+v, want 400 naming %q", name, got, want)
		}
	}
}
