package gpt_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/cmd/examples/gpt"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/generate"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

// trainedTiny is the tiny preset trained as the preset says (60 steps), on the XLA plugin.
func trainedTiny(t *testing.T) (*core.Nitro, *gpt.GPT) {
	t.Helper()
	prereq.Plugin(t)
	e, err := markers.FromPreset[gpt.GPT]("tiny", map[string]any{"ValBatches": 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	n, err := core.New(e, core.WithPreset("tiny"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithRunDir(t.TempDir()), core.WithBackend("xla"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	return n, e
}

// steppers are the model's cached and uncached steppers.
func steppers(t *testing.T, n *core.Nitro, e *gpt.GPT) (cached, uncached generate.Stepper) {
	t.Helper()
	err := n.ViewModel("Sample", func(m *core.ModelView) error {
		var err error
		if cached, err = e.Stepper(m); err == nil {
			uncached, err = e.UncachedStepper(m)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return cached, uncached
}

// window is a Context-long run of text, as tokens.
func window(e *gpt.GPT) []int {
	const text = "func main() {\n\tfmt.Println(\"hello, world\")\n}\n"
	out := make([]int, e.Context)
	for i := range out {
		out[i] = int(text[i%len(text)])
	}
	return out
}

// TestCachedStepMatchesForward feeds one window through the cached decode step and the uncached
// one, position by position, and compares each position's logits with each other and with
// Predict's (the model as core runs it) for the whole window: the cache, the mask and the
// weights the steppers load are the model's. A second pass after Reset gives the same logits
// (stale cache entries are masked).
func TestCachedStepMatchesForward(t *testing.T) {
	n, e := trainedTiny(t)
	cached, uncached := steppers(t, n, e)
	tokens := window(e)
	flat := make([]int32, len(tokens))
	for i, tok := range tokens {
		flat[i] = int32(tok)
	}
	p, err := n.Predict(prefetch.Batch{"tokens": tensors.FromFlatDataAndDimensions(flat, 1, e.Context)})
	if err != nil {
		t.Fatal(err)
	}
	want := tensors.MustCopyFlatData[float32](p["logits"]) // [1, Context, 256]
	var first [][]float32
	for pass := range 2 {
		for _, s := range []generate.Stepper{cached, uncached} {
			if err := s.Reset(); err != nil {
				t.Fatal(err)
			}
		}
		for pos, tok := range tokens {
			c, err := cached.Step(tok, pos)
			if err != nil {
				t.Fatal(err)
			}
			u, err := uncached.Step(tok, pos)
			if err != nil {
				t.Fatal(err)
			}
			row := want[pos*gpt.Vocab : (pos+1)*gpt.Vocab]
			if d := maxDiff(c, row); d > 1e-4 {
				t.Fatalf("pass %d, position %d: the cached step's logits differ from Predict's by %g", pass, pos, d)
			}
			if d := maxDiff(u, row); d > 1e-4 {
				t.Fatalf("pass %d, position %d: the uncached step's logits differ from Predict's by %g", pass, pos, d)
			}
			if pass == 0 {
				first = append(first, c)
			} else if d := maxDiff(c, first[pos]); d > 1e-5 {
				t.Fatalf("position %d: after Reset the cached step's logits differ from the first pass's by %g", pos, d)
			}
		}
	}
	if _, err := cached.Step(1, e.Context); err == nil || !strings.Contains(err.Error(), "below Context") {
		t.Errorf("a Step at position Context: error %v, want a refusal", err)
	}
	if _, err := cached.Step(256, 0); err == nil || !strings.Contains(err.Error(), "token 256") {
		t.Errorf("token 256: error %v, want a refusal", err)
	}
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestCachedGenerationMatchesUncached generates 3 windows' worth of bytes (so the window is
// re-fed twice) with the cached and the uncached steppers, greedy and sampled with one seed:
// the same bytes; and one seed gives one text twice, another seed another.
func TestCachedGenerationMatchesUncached(t *testing.T) {
	n, e := trainedTiny(t)
	cached, uncached := steppers(t, n, e)
	prompt := window(e)[:10]
	name := map[generate.Stepper]string{cached: "cached", uncached: "uncached"}
	run := func(s generate.Stepper, o generate.Options) []int {
		start := time.Now()
		out, err := generate.Generate(s, prompt, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %+v: %.2f ms a token: %q", name[s], o, float64(time.Since(start).Microseconds())/1e3/float64(o.Tokens), bytesOf(out))
		return out
	}
	for _, o := range []generate.Options{
		{Tokens: 3 * e.Context, TopK: 1},
		{Tokens: 3 * e.Context, Temperature: 0.8, TopK: 40, Seed: 5},
		{Tokens: 3 * e.Context, Temperature: 1, Seed: 6},
	} {
		c, u := run(cached, o), run(uncached, o)
		if !slices.Equal(c, u) {
			t.Errorf("%+v: cached generation gave %q, uncached %q", o, bytesOf(c), bytesOf(u))
		}
		if again := run(cached, o); !slices.Equal(c, again) {
			t.Errorf("%+v: the same seed gave %q, then %q", o, bytesOf(c), bytesOf(again))
		}
	}
	o := generate.Options{Tokens: 3 * e.Context, Temperature: 1, Seed: 6}
	a := run(cached, o)
	o.Seed = 7
	if b := run(cached, o); slices.Equal(a, b) {
		t.Errorf("seeds 6 and 7 gave the same text %q", bytesOf(a))
	}
}

func bytesOf(tokens []int) string {
	b := make([]byte, len(tokens))
	for i, t := range tokens {
		b[i] = byte(t)
	}
	return string(b)
}

// BenchmarkStepSmall times one generated byte at the small preset (4 blocks of width 128,
// context 64; initial weights: the cost does not depend on them), a full window per iteration:
// with the key/value cache and by running Forward over the window.
func BenchmarkStepSmall(b *testing.B) {
	prereq.Plugin(b)
	e, err := markers.FromPreset[gpt.GPT]("small", nil)
	if err != nil {
		b.Fatal(err)
	}
	n, err := core.New(e, core.WithPreset("small"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithRunDir(b.TempDir()), core.WithBackend("xla"),
		core.WithInputSpecs(e.GenerateSpecs()...))
	if err != nil {
		b.Fatal(err)
	}
	var cached, uncached generate.Stepper
	if err := n.ViewModel("Sample", func(m *core.ModelView) error {
		if cached, err = e.Stepper(m); err == nil {
			uncached, err = e.UncachedStepper(m)
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    generate.Stepper
	}{{"cached", cached}, {"uncached", uncached}} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := c.s.Step('a', 0); err != nil { // compile outside the timing
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				_ = c.s.Reset()
				for pos := range e.Context {
					if _, err := c.s.Step('a'+pos%26, pos); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*e.Context), "µs/token")
		})
	}
}
