package core_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
	"go.uber.org/goleak"
)

// TestPrefetchWorkersTrainBitwiseAlike: with a fixed seed and ordered delivery, the trained
// weights are bitwise the same fed inline and fanned out over 1, 2 and 4 workers (shuffled train
// split, dropout, accum 2): prefetch changes when a batch is read, never which batch a step sees.
// On each backend (on XLA the device read-ahead uploads batches ahead of the step).
func TestPrefetchWorkersTrainBitwiseAlike(t *testing.T) {
	onBackends(t, func(t *testing.T, on []core.Option) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		run := func(opt core.Option, declare func(prefetch.Data)) ([]float64, *core.Nitro) {
			d := shuffled(t)
			if declare != nil {
				declare(d)
			}
			n := coretest.New(t, &Dropped{}, append(coretest.GoOpts(nil, core.WithData(d), core.WithMaxEpochs(3), core.WithAccum(2), opt), on...)...)
			coretest.Train(t, n)
			return flatParams(t, n), n
		}
		inline, _ := run(core.WithMaxEpochs(3), func(d prefetch.Data) {
			for k, src := range d {
				d[k] = prefetch.NoPrefetch(src)
			}
		})
		for _, w := range []int{1, 2, 4} {
			got, n := run(core.WithPrefetch(prefetch.Options{Workers: w, DeviceBatches: 1, HostBatches: 2 * w}), nil)
			sameBits(t, fmt.Sprintf("parameters with %d workers", w), got, inline)
			wantContains(t, "binding report", n.BindingReport(), "prefetch train", "run option WithPrefetch")
			if w > 1 {
				wantContains(t, "binding report", n.BindingReport(), fmt.Sprintf("fan-out, %d workers", w))
			}
		}
	})
}

// TestPrefetchSettingsAreChecked: bad settings are a setup error naming the field.
func TestPrefetchSettingsAreChecked(t *testing.T) {
	err := newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithPrefetch(prefetch.Options{Workers: 4, DeviceBatches: 1, HostBatches: 2}))
	coretest.WantErr(t, err, "HostBatches")
}

// TestEvalSplitThatDropsIsWarnedOnce: an evaluation split that drops its partial batch is
// warned about at setup, naming the split and how many samples its metrics leave out.
func TestEvalSplitThatDropsIsWarnedOnce(t *testing.T) {
	var warnings []string
	d := coretest.Data(t, 0)
	d["val"] = coretest.Arrays(t, 40, 16, 2, prefetch.ArrayOptions{DropPartial: true}) // 8 of 40 never evaluated
	n := coretest.MustNew(t, &coretest.Reg{}, d, core.WithWarn(func(m string) { warnings = append(warnings, m) }))
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `split "val"`) || !strings.Contains(warnings[0], "8 of its 40 samples") {
		t.Errorf("warnings %q, want one naming split val and 8 of its 40 samples", warnings)
	}
}
