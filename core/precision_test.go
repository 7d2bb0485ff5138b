package core_test

import (
	"math"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

// TestMixedPrecisionRefusesUnknownModes: a mode that is not one is refused by New, naming the
// option, the value and the modes; every spelling of float32 is the default mode.
func TestMixedPrecisionRefusesUnknownModes(t *testing.T) {
	for _, bad := range []string{"fp16", "BF16", "bfloat16"} {
		coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithMixedPrecision(bad)),
			`WithMixedPrecision("`+bad+`")`, `"bf16"`, `"f32"`, `"none"`)
	}
	for _, f32 := range []string{"", "none", "f32"} {
		n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithMixedPrecision(f32))
		wantContains(t, "config report", n.ConfigReport(), "mixed precision      f32 (run option)")
	}
	wantContains(t, "config report", coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0)).ConfigReport(), "mixed precision      f32 (default)")
}

// TestMixedPrecisionIsInTheProgramKeys: in one compile cache, a bf16 run compiles its own
// programs (none of a float32 run's is reused, the optimizer's included: it belongs to the bf16
// backend), a second bf16 run reuses them all, and "none" shares the float32 run's.
func TestMixedPrecisionIsInTheProgramKeys(t *testing.T) {
	c := compilecache.New()
	run := func(mode string) compilecache.Stats {
		t.Helper()
		n, err := core.New(&Deep{}, append(coretest.GoOpts(c, core.WithData(coretest.Data(t, 16))), core.WithMixedPrecision(mode))...)
		if err != nil {
			t.Fatal(err)
		}
		coretest.Train(t, n)
		return c.Stats()
	}
	f32 := run("f32")
	bf := run("bf16")
	if bf.Misses != 2*f32.Misses || bf.Hits != f32.Hits {
		t.Fatalf("bf16 after f32: %d misses and %d hits, want %d and %d (every program its own)", bf.Misses, bf.Hits, 2*f32.Misses, f32.Hits)
	}
	again := run("bf16")
	none := run("none")
	if again.Misses != bf.Misses || none.Misses != bf.Misses {
		t.Fatalf("a second bf16 run and a \"none\" run compiled %d and %d programs, want 0 and 0", again.Misses-bf.Misses, none.Misses-again.Misses)
	}
}

// TestMixedPrecisionTrains: the regression converges under bf16 about as far as under float32
// (bfloat16 products carry ~3 significant digits, so the loss floor is a little higher).
func TestMixedPrecisionTrains(t *testing.T) {
	final := map[string]float64{}
	for _, mode := range []string{"f32", "bf16"} {
		n := coretest.MustNew(t, &Deep{}, coretest.Data(t, 16), core.WithMixedPrecision(mode), core.WithMaxEpochs(60), core.WithLearningRate(0.02))
		coretest.Train(t, n)
		h := n.History()
		first, last := h[0].TrainLoss, h[len(h)-1].TrainLoss
		if !(last < first/50) || math.IsNaN(last) {
			t.Errorf("%s: train loss %.4g -> %.4g, want a 50-fold fall", mode, first, last)
		}
		t.Logf("%s: train loss %.4g -> %.4g", mode, first, last)
		final[mode] = last
	}
	if final["bf16"] > 0.05 || final["bf16"] > 10*final["f32"]+0.01 {
		t.Errorf("final train loss bf16 %.4g vs f32 %.4g: bf16 trained much worse", final["bf16"], final["f32"])
	}
}

// TestMixedPrecisionIsRecordedAndExplainedOnResume: a checkpoint records its run's mode, and a
// resume under another mode goes on (both keep float32 state) with a notice naming both.
func TestMixedPrecisionIsRecordedAndExplainedOnResume(t *testing.T) {
	dir := t.TempDir()
	first := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMixedPrecision("bf16"))...)
	coretest.Train(t, first)
	rec, err := checkpoint.Read(first.LastCheckpoint())
	if err != nil {
		t.Fatal(err)
	}
	if rec.MixedPrecision != "bf16" {
		t.Fatalf("checkpoint records mixed precision %q, want bf16", rec.MixedPrecision)
	}
	con := &core.MemoryConsole{}
	second := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(2), core.WithResume(core.ResumeAuto), core.WithConsole(con))...)
	if second.Epoch() != 1 {
		t.Fatalf("resumed at epoch %d, want 1", second.Epoch())
	}
	wantContains(t, "resume notices", strings.Join(con.Notices, "\n"), "mixed precision f32, the checkpoint's run trained with bf16", "float32 in both")
	con.Notices = nil
	third := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(2), core.WithResume(core.ResumeAuto), core.WithConsole(con), core.WithMixedPrecision("bf16"))...)
	if third.Epoch() != 1 || strings.Contains(strings.Join(con.Notices, "\n"), "mixed precision") {
		t.Fatalf("a resume under the checkpoint's own mode: epoch %d, notices %q; want epoch 1 and no precision notice", third.Epoch(), con.Notices)
	}
}
