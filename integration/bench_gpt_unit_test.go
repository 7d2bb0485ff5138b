package integration_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/nitro-go/nitro/compilecache"
)

// TestGPTFamilySelection: the GPT families are picked by name, at their own batch or another, and
// are not among the three a blank selection gives; their data are stride rows whose targets are
// the tokens shifted by one, and their flop count is TransformerFLOPsPerToken times the tokens.
func TestGPTFamilySelection(t *testing.T) {
	got, err := selectFamilies("gpt@64,gpt2")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "gpt" || got[0].batch != 64 || got[1].name != "gpt2" || got[1].batch != 1 {
		t.Fatalf("got %d families, want gpt@64 and gpt2 at batch 1", len(got))
	}
	if famTokens(got[0]) != 64*64 || famTokens(got[1]) != 1024 || famTokens(families()[2]) != 0 {
		t.Errorf("tokens a step: gpt@64 %d, gpt2@1 %d, transformer %d; want 4096, 1024, 0", famTokens(got[0]), famTokens(got[1]), famTokens(families()[2]))
	}
	blank, _ := selectFamilies("")
	for _, f := range blank {
		if _, ok := isGPT(f); ok {
			t.Errorf("a blank selection holds %s: the MPI families bench iterates over it", f.name)
		}
	}
	x, _, y, _ := gptData(rand.New(rand.NewPCG(1, 1)), 5, 16)
	tok := x.([]int32)
	for r := range 5 {
		k := (tok[r*16+1] - tok[r*16] + 256) % 256
		for i := range 16 {
			if want := (tok[r*16+i] + k) % 256; y[r*16+i] != want || k < 1 || k > 8 {
				t.Fatalf("row %d position %d: token %d, target %d, stride %d; want target %d and a stride in [1, 8]", r, i, tok[r*16+i], y[r*16+i], k, want)
			}
		}
	}
	// GPT-2 small's shape at batch 1: 6 FLOPs per weight of 12·12·768² + 256·768, plus the
	// attention's 12·12·768·1024, per token, times 1024 tokens.
	if got, want := got[1].flops(1), 1024*(6*(12*12*768*768+256*768)+12*12*768*1024.0); got != want {
		t.Errorf("gpt2@1 flops %v, want %v", got, want)
	}
}

// TestGPTFamilyLoopMatchesNitro: on a tiny GPT, the hand-written GoMLX loop (gptApplyRule:
// clipping, AdamW with the decay on the weight matrices only, WarmupCosine over the bench's
// horizon) started from nitro's initial parameters reports the same losses as nitro's two-program
// step over the same batches, so the bench's sides train alike.
func TestGPTFamilyLoopMatchesNitro(t *testing.T) {
	r := requireXLA(t)
	g := gptFamily{layers: 2, heads: 2, dim: 32, context: 16, beta2: 0.95, lambda: 0.1, clip: 0.5, warmup: 0.25}
	const batch, batches, epochs = 4, 2, 4
	f := gptFamilyOf("gpt-tiny", g, batch, batches, epochs-1, 3e-3) // horizon: epochs·batches steps
	d := newFamBatches(f, 3, batch*batches)
	nt, clock, err := newFamNitro(f, d, batch, compilecache.New())
	if err != nil {
		t.Fatal(err)
	}
	init, err := nt.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	for range epochs {
		if err := epoch(nt); err != nil {
			t.Fatal(err)
		}
	}
	ls := clock.losses
	if len(ls) != batches*epochs {
		t.Fatalf("nitro logged %d losses, want %d", len(ls), batches*epochs)
	}
	loop, err := newGPTLoop(r, f, g, init)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ls {
		x, y := d.batch(i%batches, batch)
		got, err := loop.step(x, y)
		if err != nil {
			t.Fatal(err)
		}
		if want := ls[i]; math.Abs(float64(got)-want) > 2e-4*math.Max(1, math.Abs(want)) {
			t.Errorf("step %d: GoMLX loop's loss %.6f, nitro's %.6f: the two sides do not do the same step (losses %.5f)", i+1, got, want, ls)
		}
	}
}
