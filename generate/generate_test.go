package generate_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/generate"
)

// TestOptionsCheck: each out-of-range option is refused naming its field and flag, all of them in
// one error; the boundary values pass.
func TestOptionsCheck(t *testing.T) {
	for _, o := range []generate.Options{
		{Tokens: 1, Temperature: 1},
		{Tokens: 1, TopK: 1},                   // greedy: temperature unused
		{Tokens: 1, TopK: 1, Temperature: -3},  // greedy: temperature unused
		{Tokens: 1, TopK: 256, Temperature: 1}, // the bound itself
		{Tokens: 1, Temperature: 1e-3},
	} {
		if err := o.Check(); err != nil {
			t.Errorf("%+v: %v, want accepted", o, err)
		}
	}
	for _, c := range []struct {
		o    generate.Options
		want []string
	}{
		{generate.Options{Tokens: 0, Temperature: 1}, []string{"Tokens (--tokens) = 0"}},
		{generate.Options{Tokens: -4, Temperature: 1}, []string{"Tokens (--tokens) = -4"}},
		{generate.Options{Tokens: 1, Temperature: 0}, []string{"Temperature (--temperature) = 0", "--top-k 1"}},
		{generate.Options{Tokens: 1, Temperature: -1, TopK: 5}, []string{"Temperature (--temperature) = -1"}},
		{generate.Options{Tokens: 1, Temperature: math.NaN()}, []string{"Temperature (--temperature) = NaN"}},
		{generate.Options{Tokens: 1, Temperature: math.Inf(1)}, []string{"Temperature (--temperature) = +Inf"}},
		{generate.Options{Tokens: 1, Temperature: 1, TopK: -1}, []string{"TopK (--top-k) = -1"}},
		{generate.Options{Tokens: 1, Temperature: 1, TopK: 257}, []string{"TopK (--top-k) = 257"}},
		{generate.Options{Tokens: 0, Temperature: 0, TopK: 300}, []string{"--tokens", "--temperature", "--top-k"}},
	} {
		err := c.o.Check()
		if err == nil {
			t.Errorf("%+v accepted", c.o)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q lacks %q", c.o, err, w)
			}
		}
	}
}

// TestGreedy: TopK 1 takes the arg-max, the lowest index among equal largest logits, ignoring
// -Inf, whatever the seed.
func TestGreedy(t *testing.T) {
	for seed := range uint64(5) {
		s, err := generate.NewSampler(generate.Options{Tokens: 1, TopK: 1, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			logits []float32
			want   int
		}{
			{[]float32{0, 3, 1}, 1},
			{[]float32{2, -1, 2}, 0},
			{[]float32{float32(math.Inf(-1)), -5, -7}, 1},
		} {
			if got, err := s.Next(c.logits); err != nil || got != c.want {
				t.Errorf("seed %d, logits %v: %d, %v; want %d", seed, c.logits, got, err, c.want)
			}
		}
	}
}

// draws is n draws of one Sampler from logits.
func draws(t *testing.T, o generate.Options, logits []float32, n int) []int {
	t.Helper()
	s, err := generate.NewSampler(o)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, n)
	for i := range out {
		if out[i], err = s.Next(logits); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestSeed: one seed gives one sequence of draws; another seed another.
func TestSeed(t *testing.T) {
	flat := make([]float32, 256)
	o := generate.Options{Tokens: 1, Temperature: 1, Seed: 11}
	a, b := draws(t, o, flat, 64), draws(t, o, flat, 64)
	if !slices.Equal(a, b) {
		t.Errorf("seed 11 drew %v, then %v", a, b)
	}
	o.Seed = 12
	if c := draws(t, o, flat, 64); slices.Equal(a, c) {
		t.Errorf("seeds 11 and 12 drew the same 64 tokens from 256 equally likely: %v", a)
	}
}

// TestDistribution: at temperature 1 the draws follow the softmax of the logits; top-k 2 draws
// only the two most likely, renormalised; a low temperature sharpens, a high one flattens.
func TestDistribution(t *testing.T) {
	logits := []float32{float32(math.Log(0.2)), float32(math.Log(0.5)), float32(math.Log(0.3))}
	const n = 20000
	freq := func(ds []int) []float64 {
		f := make([]float64, len(logits))
		for _, d := range ds {
			f[d] += 1.0 / float64(len(ds))
		}
		return f
	}
	near := func(what string, got, want []float64) {
		for i := range want {
			if math.Abs(got[i]-want[i]) > 0.015 {
				t.Errorf("%s: token %d drawn %.3f of the time, want %.3f", what, i, got[i], want[i])
			}
		}
	}
	near("temperature 1", freq(draws(t, generate.Options{Tokens: 1, Temperature: 1, Seed: 1}, logits, n)), []float64{0.2, 0.5, 0.3})
	near("top-k 2", freq(draws(t, generate.Options{Tokens: 1, Temperature: 1, TopK: 2, Seed: 2}, logits, n)), []float64{0, 0.5 / 0.8, 0.3 / 0.8})
	// At temperature T each probability goes as p^(1/T).
	sharp := []float64{math.Pow(0.2, 4), math.Pow(0.5, 4), math.Pow(0.3, 4)}
	sum := sharp[0] + sharp[1] + sharp[2]
	for i := range sharp {
		sharp[i] /= sum
	}
	near("temperature 0.25", freq(draws(t, generate.Options{Tokens: 1, Temperature: 0.25, Seed: 3}, logits, n)), sharp)
	near("temperature 1000", freq(draws(t, generate.Options{Tokens: 1, Temperature: 1000, Seed: 4}, logits, n)), []float64{1.0 / 3, 1.0 / 3, 1.0 / 3})
}

// TestBadLogits: logits no token can be drawn from are refused, saying why.
func TestBadLogits(t *testing.T) {
	s, err := generate.NewSampler(generate.Options{Tokens: 1, Temperature: 1})
	if err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		logits []float32
		want   string
	}{
		{nil, "no logits"},
		{[]float32{0, float32(math.NaN())}, "logit 1 of 2 is NaN"},
		{[]float32{inf, 0}, "logit 0 of 2 is +Inf"},
		{[]float32{-inf, -inf}, "all 2 logits are -Inf"},
	} {
		if _, err := s.Next(c.logits); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("logits %v: error %v, want one saying %q", c.logits, err, c.want)
		}
	}
}

// TestWindow: generating past the context resets the model and re-feeds the last half of the
// sequence, never a position at or past Context (the Fake refuses one); the model sees the
// tokens it wrote; the prompt may fill the whole window.
func TestWindow(t *testing.T) {
	for _, c := range []struct {
		ctx, prompt, tokens, resets int
	}{
		{ctx: 8, prompt: 3, tokens: 5, resets: 1},  // fits: the prompt's feed only
		{ctx: 8, prompt: 3, tokens: 6, resets: 1},  // the last token is drawn at position 8 but never fed
		{ctx: 8, prompt: 3, tokens: 7, resets: 2},  // one re-feed of 4
		{ctx: 8, prompt: 8, tokens: 2, resets: 2},  // a full prompt: the first drawn token re-feeds at once
		{ctx: 1, prompt: 1, tokens: 5, resets: 5},  // every token its own window
		{ctx: 5, prompt: 2, tokens: 20, resets: 5}, // keep 2: a re-feed every 4 tokens drawn
	} {
		m := &generate.Fake{Ctx: c.ctx, Vocab: 50}
		prompt := make([]int, c.prompt)
		for i := range prompt {
			prompt[i] = i
		}
		out, err := generate.Generate(m, prompt, generate.Options{Tokens: c.tokens, TopK: 1})
		if err != nil {
			t.Errorf("%+v: %v", c, err)
			continue
		}
		want := make([]int, c.tokens)
		for i := range want {
			want[i] = (c.prompt + i) % 50
		}
		if !slices.Equal(out, want) {
			t.Errorf("%+v: generated %v, want %v", c, out, want)
		}
		if m.Resets != c.resets {
			t.Errorf("%+v: %d resets, want %d", c, m.Resets, c.resets)
		}
	}
}

// TestWindowContent: after a reset the model's window is the sequence's last Context/2 tokens,
// the newest last.
func TestWindowContent(t *testing.T) {
	var windows [][]int
	m := &generate.Fake{Ctx: 4, Vocab: 100, Logits: func(w []int) []float32 {
		windows = append(windows, w)
		l := make([]float32, 100)
		l[w[len(w)-1]+10] = 1 // the next token is the last plus 10
		return l
	}}
	out, err := generate.Generate(m, []int{1, 2, 3}, generate.Options{Tokens: 3, TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 1 2 3 → 13 (fed at position 3) → 23 (window full: re-feed 13 23) → 33.
	if !slices.Equal(out, []int{13, 23, 33}) {
		t.Fatalf("generated %v, want [13 23 33]", out)
	}
	if got := windows[len(windows)-1]; !slices.Equal(got, []int{13, 23}) {
		t.Errorf("the last window was %v, want [13 23]", got)
	}
}

// TestPromptRefused: an empty prompt, one longer than the context and a negative token are
// refused before the model is touched.
func TestPromptRefused(t *testing.T) {
	for _, c := range []struct {
		prompt []int
		want   string
	}{
		{nil, "(--prompt) is empty"},
		{[]int{1, 2, 3, 4, 5}, "(--prompt) is 5 tokens, more than the model's context of 4"},
		{[]int{1, -2}, "token 1 is -2"},
	} {
		m := &generate.Fake{Ctx: 4, Vocab: 10}
		_, err := generate.Generate(m, c.prompt, generate.Options{Tokens: 1, TopK: 1})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("prompt %v: error %v, want one saying %q", c.prompt, err, c.want)
		}
		if m.Steps+m.Resets != 0 {
			t.Errorf("prompt %v: the model saw %d steps and %d resets before the refusal", c.prompt, m.Steps, m.Resets)
		}
	}
	m := &generate.Fake{Ctx: 4, Vocab: 10}
	if _, err := generate.Generate(m, []int{1}, generate.Options{Tokens: 0, TopK: 1}); err == nil || m.Steps != 0 {
		t.Errorf("Tokens 0: error %v after %d steps, want a refusal before any", err, m.Steps)
	}
}

// failing is a Stepper whose Step fails or panics at one position.
type failing struct {
	generate.Fake
	at    int
	panic bool
}

func (f *failing) Step(token, pos int) ([]float32, error) {
	if pos == f.at {
		if f.panic {
			panic("boom")
		}
		return nil, errors.New("device lost")
	}
	return f.Fake.Step(token, pos)
}

// TestStepperFails: a Stepper's error or panic is returned naming the call and position.
func TestStepperFails(t *testing.T) {
	for _, p := range []bool{false, true} {
		m := &failing{Fake: generate.Fake{Ctx: 8, Vocab: 10}, at: 3, panic: p}
		_, err := generate.Generate(m, []int{1, 2}, generate.Options{Tokens: 4, TopK: 1})
		want := "Step(token 4, position 3): device lost"
		if p {
			want = "Step(token 4, position 3) panicked: boom"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("panic %v: error %v, want one saying %q", p, err, want)
		}
	}
	if _, err := generate.Generate(nil, []int{1}, generate.Options{Tokens: 1, TopK: 1}); err == nil {
		t.Error("a nil Stepper was accepted")
	}
	if _, err := generate.Generate(&generate.Fake{Ctx: 0, Vocab: 3}, []int{1}, generate.Options{Tokens: 1, TopK: 1}); err == nil || !strings.Contains(err.Error(), "Context() is 0") {
		t.Errorf("Context 0: error %v", err)
	}
}

// TestGenerateSeeded: sampled generation repeats under one seed.
func TestGenerateSeeded(t *testing.T) {
	run := func(seed uint64) []int {
		m := &generate.Fake{Ctx: 6, Vocab: 30, Logits: func(w []int) []float32 {
			l := make([]float32, 30)
			for i := range l {
				l[i] = float32((i * (w[len(w)-1] + 3)) % 7)
			}
			return l
		}}
		out, err := generate.Generate(m, []int{5}, generate.Options{Tokens: 40, Temperature: 0.8, TopK: 10, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if a, b := run(3), run(3); !slices.Equal(a, b) {
		t.Errorf("seed 3 generated %v, then %v", a, b)
	}
	if a, b := run(3), run(4); slices.Equal(a, b) {
		t.Errorf("seeds 3 and 4 generated the same 40 tokens %v", a)
	}
}
