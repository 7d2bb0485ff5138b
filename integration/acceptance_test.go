package integration_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
)

// The acceptance check of spec/recompilation.txt, each count against a fresh private cache:
// train-only compiles 2 programs (gradient, optimizer, separate even at accum = 1), validation
// adds 1, and neither grows with the number of steps. With core.WithFusedStep() the step is one
// program (train_step): train-only compiles 1 and train+val 2. Predict shares validation's eval
// program: after validation, Predict and PredictAll at the validation width add no miss.
func TestAcceptanceCounts(t *testing.T) {
	requireXLA(t)
	cases := []struct {
		name   string
		e      func() *Clf
		opts   []core.Option
		epochs int
		want   int
		val    bool // the data has a val split, so Train validated
	}{
		{"train+val, 1 epoch", func() *Clf { return newClf(t, nil) }, nil, 1, 3, true},
		{"train+val, 2 epochs", func() *Clf { return newClf(t, nil) }, []core.Option{core.WithMaxEpochs(2)}, 2, 3, true},
		{"train only (WithData, no val split)", func() *Clf { return newClf(t, nil) }, []core.Option{withTrainOnly(t)}, 1, 2, false},
		{"fused train+val, 2 epochs", func() *Clf { return newClf(t, nil) }, []core.Option{core.WithMaxEpochs(2), core.WithFusedStep()}, 2, 2, true},
		{"fused train only", func() *Clf { return newClf(t, nil) }, []core.Option{withTrainOnly(t), core.WithFusedStep()}, 1, 1, false},
	}
	var oneEpochHits int
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := compilecache.New()
			n := train(t, tc.e(), append(tc.opts, core.WithCache(c))...)
			s := healthy(t, c, tc.name)
			if s.Misses != tc.want || s.Entries != tc.want {
				t.Errorf("misses %d, entries %d; want %d each; explanations %q", s.Misses, s.Entries, tc.want, c.Explanations())
			}
			if got := len(n.History()); got != tc.epochs {
				t.Errorf("History has %d epochs, want %d", got, tc.epochs)
			}
			if tc.val {
				predictAddsNothing(t, n, c, s)
			}
			// A Nitro asks the process cache once per program and keeps what it got, so neither
			// misses nor lookups grow with steps or epochs.
			switch tc.epochs {
			case 1:
				if tc.want == 3 {
					oneEpochHits = s.Hits
				}
			case 2:
				if s.Hits != oneEpochHits {
					t.Errorf("two epochs made %d hits, one epoch %d: lookups must not grow with epochs", s.Hits, oneEpochHits)
				}
			}
		})
	}
}

// predictAddsNothing: Predict and PredictAll at the validation width (32) run the program
// validation compiled, so the cache gains no miss and no entry.
func predictAddsNothing(t *testing.T, n *core.Nitro, c *compilecache.Cache, before compilecache.Stats) {
	t.Helper()
	x, y := synthetic(32, 3)
	if _, err := n.Predict(prefetch.Batch{"x": x}); err != nil {
		t.Fatal(err)
	}
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, 32, prefetch.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range n.PredictAll(src) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Misses != before.Misses || s.Entries != before.Entries {
		t.Errorf("Predict after validation: misses %d -> %d, entries %d -> %d; want no new program (explanations %q)",
			before.Misses, s.Misses, before.Entries, s.Entries, c.Explanations())
	}
}

// withTrainOnly supplies the synthetic data with no "val" split.
func withTrainOnly(t testing.TB) core.Option {
	d, err := splits(256, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	return core.WithData(d)
}

// The practical rule, against one shared cache: a new handle on the same values, a Device change and
// a Host change hit; a GraphConst change misses and is explained by the field's name; accum misses
// the gradient program only and clip the optimizer program only.
func TestAcceptanceWhatMisses(t *testing.T) {
	requireXLA(t)
	c := compilecache.New()
	opt := core.WithCache(c)

	n1 := train(t, newClf(t, nil), opt)
	base := healthy(t, c, "first run")
	if base.Misses != 3 {
		t.Fatalf("first train+validate run: %d misses, want 3", base.Misses)
	}

	// A step taken: each check below compares against the previous stats.
	prev := base
	expect := func(what string, newMisses int) compilecache.Stats {
		t.Helper()
		s := healthy(t, c, what)
		if got := s.Misses - prev.Misses; got != newMisses {
			t.Errorf("%s: %d new misses, want %d; explanations %q", what, got, newMisses, newExplanations(c, 0))
		}
		// A new Nitro asks the cache once per program: whatever did not miss must have hit.
		if want := prev.Hits + (3 - newMisses); newMisses < 3 && s.Hits < want {
			t.Errorf("%s: hits %d -> %d, want at least %d: the new Nitro did not look its programs up", what, prev.Hits, s.Hits, want)
		}
		prev = s
		return s
	}

	t.Run("same type and values, new Nitro", func(t *testing.T) {
		train(t, newClf(t, nil), opt)
		expect("second Nitro on equal values", 0)
	})

	t.Run("Device field via SetDevice", func(t *testing.T) {
		before, err := n1.Validate()
		if err != nil {
			t.Fatal(err)
		}
		if err := n1.SetDevice("Temperature", float32(4)); err != nil {
			t.Fatalf("SetDevice: %v", err)
		}
		v, err := n1.DeviceValue("Temperature")
		if err != nil || v != float32(4) {
			t.Fatalf("DeviceValue(Temperature) = %v, %v; want 4", v, err)
		}
		after, err := n1.Validate()
		if err != nil {
			t.Fatal(err)
		}
		if before[core.ValLoss] == after[core.ValLoss] {
			t.Errorf("val_loss %v unchanged after Temperature 1 -> 4: the new Device value did not reach the program", after[core.ValLoss])
		}
		// And on a fresh handle, set before training: the gradient program must hit too.
		n := build(t, newClf(t, nil), opt)
		if err := n.SetDevice("Temperature", float32(0.5)); err != nil {
			t.Fatal(err)
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		expect("Device field changed", 0)
	})

	t.Run("Host field", func(t *testing.T) {
		train(t, newClf(t, map[string]any{"Note": "a different note"}), opt)
		expect("Host field Note changed", 0)
		// The learning rate is a Host accessor field too: it reaches the optimizer as an input.
		train(t, newClf(t, map[string]any{"LearningRate": 0.003}), opt)
		expect("Host field LearningRate changed", 0)
	})

	t.Run("GraphConst field", func(t *testing.T) {
		k := len(c.Explanations())
		train(t, newClf(t, map[string]any{"Width": 24}), opt)
		expect("GraphConst Width 16 -> 24", 3) // gradient, optimizer and eval all bake the width
		ex := newExplanations(c, k)
		if len(ex) != 3 {
			t.Errorf("%d new explanations, want one per recompiled program (3): %q", len(ex), ex)
		}
		for _, line := range ex {
			if !containsFold(line, "Width") || !strings.Contains(line, "16") || !strings.Contains(line, "24") {
				t.Errorf("explanation %q does not name the GraphConst field Width and its values 16 -> 24", line)
			}
		}
	})

	t.Run("accum misses only the gradient program", func(t *testing.T) {
		k := len(c.Explanations())
		train(t, newClf(t, nil), opt, core.WithAccum(2)) // 8 train batches: divisible by 2
		expect("accum 1 -> 2", 1)
		ex := newExplanations(c, k)
		if len(ex) != 1 || !strings.HasPrefix(ex[0], compilecache.KindGradient+" program") || !strings.Contains(ex[0], "accum: 1 -> 2") {
			t.Errorf("explanations %q: want exactly one, for the gradient program, naming accum: 1 -> 2", ex)
		}
	})

	t.Run("clip misses only the optimizer program", func(t *testing.T) {
		k := len(c.Explanations())
		train(t, newClf(t, nil), opt, core.WithGradientClipNorm(1))
		expect("clip 0 -> 1", 1)
		ex := newExplanations(c, k)
		if len(ex) != 1 || !strings.HasPrefix(ex[0], compilecache.KindOptimizer+" program") || !strings.Contains(ex[0], "clip") {
			t.Errorf("explanations %q: want exactly one, for the optimizer program, naming clip", ex)
		}
	})
}
