package integration_test

import (
	"testing"

	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
)

// TestDonationSoak trains a few hundred steps on each donation path, validating after every
// epoch, and checks the bookkeeping the donations rest on. Every step donates the parameters,
// the optimizer state and the layer state into the program that replaces them (and, with accum,
// the running gradient sums into the next micro-batch's gradient program), finalizes the loss
// and metric outputs, and drops the batch's device copy. A tensor donated and then read, a
// donated tensor finalized again, or an output installed in the wrong slot shows here as an
// error from Train or Evaluate, a non-finite loss, a wrong step count, or parameters uploaded
// again. It is the harness for the heap checks in docs/profiling.md, e.g.
//
//	LD_PRELOAD=/lib/x86_64-linux-gnu/libc_malloc_debug.so.0 MALLOC_CHECK_=3 go test -run TestDonationSoak ./integration/
//	GOEXPERIMENT=cgocheck2 go test -run TestDonationSoak ./integration/
func TestDonationSoak(t *testing.T) {
	requireXLA(t)
	const (
		trainN, valN, batch = 256, 64, 8 // 32 train batches per epoch
		epochs              = 10
	)
	cases := []struct {
		name  string
		opts  []core.Option
		steps int // optimizer steps in all
		progs int // programs compiled: the step's and eval
	}{
		{"two programs", nil, epochs * trainN / batch, 3},
		{"two programs, accum 2", []core.Option{core.WithAccum(2)}, epochs * trainN / batch / 2, 3},
		{"fused", []core.Option{core.WithFusedStep()}, epochs * trainN / batch, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := splits(trainN, valN, batch)
			if err != nil {
				t.Fatal(err)
			}
			c := compilecache.New()
			e := newClf(t, map[string]any{"LearningRate": 0.003})
			opts := append([]core.Option{core.WithData(d), core.WithMaxEpochs(epochs), core.WithCache(c)}, tc.opts...)
			n := build(t, e, opts...)
			before := n.Uploads()
			if err := n.Train(); err != nil {
				t.Fatalf("Train: %v", err)
			}
			if got := n.Step(); got != tc.steps {
				t.Errorf("Step() = %d after %d epochs, want %d", got, epochs, tc.steps)
			}
			h := n.History()
			if len(h) != epochs {
				t.Fatalf("History has %d epochs, want %d", len(h), epochs)
			}
			for _, r := range h {
				if !finite(r.TrainLoss) {
					t.Fatalf("epoch %d: train loss %v", r.Epoch, r.TrainLoss)
				}
				for k, v := range r.Val {
					if !finite(v) {
						t.Fatalf("epoch %d: %s = %v", r.Epoch, k, v)
					}
				}
			}
			if first, last := h[0].TrainLoss, h[len(h)-1].TrainLoss; !(last < first) {
				t.Errorf("train loss went from %.4f (epoch 1) to %.4f (epoch %d): the updates did not land", first, last, epochs)
			}
			// The parameters and optimizer state stay resident: donation hands each step's outputs
			// to the next step, so nothing of theirs is uploaded again however many steps run.
			after := n.Uploads()
			if after.Params != before.Params || after.OptState != before.OptState {
				t.Errorf("uploads during %d steps: params %d -> %d, optimizer state %d -> %d; want none",
					tc.steps, before.Params, after.Params, before.OptState, after.OptState)
			}
			// The parameters the last step donated its outputs into are still readable: evaluating
			// twice gives the same, finite metrics.
			m1, err := n.Evaluate("val")
			if err != nil {
				t.Fatalf("Evaluate after training: %v", err)
			}
			m2, err := n.Evaluate("val")
			if err != nil {
				t.Fatalf("second Evaluate: %v", err)
			}
			for k, v := range m1 {
				if !finite(v) || m2[k] != v {
					t.Errorf("val %s: %v, then %v; want the same finite value", k, v, m2[k])
				}
			}
			if s := healthy(t, c, tc.name); s.Misses != tc.progs {
				t.Errorf("compiled %d programs, want %d: %q", s.Misses, tc.progs, c.Explanations())
			}
		})
	}
}
