package core_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// Run knobs resolve run option > method on the experiment > field > default.
type (
	// FieldKnobs sets every knob by a field.
	FieldKnobs struct {
		coretest.Base
		MaxEpochs        int
		Seed             int
		Accum            int
		GradientClipNorm float64
	}
	// knobFields is embedded by MethodKnobs, so its fields (depth 1) sit under the methods
	// (depth 0) of the same names: the methods must win.
	knobFields struct {
		MaxEpochs        int
		Seed             int
		Accum            int
		GradientClipNorm float64
	}
	MethodKnobs struct {
		coretest.Base
		knobFields
	}
)

func (*MethodKnobs) MaxEpochs() int            { return 3 }
func (*MethodKnobs) Seed() int                 { return 7 }
func (*MethodKnobs) Accum() int                { return 2 }
func (*MethodKnobs) GradientClipNorm() float64 { return 0.5 }

func newFieldKnobs() *FieldKnobs {
	return &FieldKnobs{MaxEpochs: 2, Seed: 9, Accum: 4, GradientClipNorm: 0.25}
}

// newMethodKnobs sets the shadowed fields to values no method returns.
func newMethodKnobs() *MethodKnobs {
	return &MethodKnobs{knobFields: knobFields{MaxEpochs: 5, Seed: 11, Accum: 1, GradientClipNorm: 2}}
}

// reportRow is one row of ConfigReport, as it prints it.
func reportRow(key, value string) string { return fmt.Sprintf("  %-20s %s\n", key, value) }

func reportRows(rows ...[2]string) (out []string) {
	for _, r := range rows {
		out = append(out, reportRow(r[0], r[1]))
	}
	return out
}

func TestAccessorResolutionOrder(t *testing.T) {
	cases := []struct {
		name  string
		e     any
		opts  []core.Option
		rows  [][2]string
		total int // TotalSteps: max_epochs * (4 train batches / accum)
	}{
		{"default", &coretest.Reg{}, nil, [][2]string{
			{"seed", "42 (default)"},
			{"accum", "1 (default)"},
			{"max epochs", "1 (default)"},
			{"gradient clip norm", "0 (default), off"},
			{"learning rate", "0.001 (default)"},
		}, 4},
		{"field", newFieldKnobs(), nil, [][2]string{
			{"seed", "9 (field Seed)"},
			{"accum", "4 (field Accum)"},
			{"max epochs", "2 (field MaxEpochs)"},
			{"gradient clip norm", "0.25 (field GradientClipNorm)"},
		}, 2},
		{"method over field", newMethodKnobs(), nil, [][2]string{
			{"seed", "7 (method Seed())"},
			{"accum", "2 (method Accum())"},
			{"max epochs", "3 (method MaxEpochs())"},
			{"gradient clip norm", "0.5 (method GradientClipNorm())"},
		}, 6},
		{"run option over method", newMethodKnobs(),
			[]core.Option{core.WithSeed(13), core.WithAccum(4), core.WithMaxEpochs(6), core.WithGradientClipNorm(1.5), core.WithLearningRate(0.01)},
			[][2]string{
				{"seed", "13 (run option)"},
				{"accum", "4 (run option)"},
				{"max epochs", "6 (run option)"},
				{"gradient clip norm", "1.5 (run option)"},
				{"learning rate", "0.01 (run option)"},
			}, 6},
		{"run option over field", newFieldKnobs(),
			[]core.Option{core.WithSeed(1), core.WithAccum(1), core.WithMaxEpochs(1), core.WithGradientClipNorm(0)},
			[][2]string{
				{"seed", "1 (run option)"},
				{"accum", "1 (run option)"},
				{"max epochs", "1 (run option)"},
				{"gradient clip norm", "0 (run option), off"},
			}, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := coretest.MustNew(t, c.e, coretest.Data(t, 0), c.opts...)
			rep := n.ConfigReport()
			wantContains(t, "ConfigReport", rep, reportRows(c.rows...)...)
			wantContains(t, "ConfigReport", rep, reportRow("total opt steps", fmt.Sprint(c.total)))
			if got := n.TotalSteps(); got != c.total {
				t.Errorf("TotalSteps() = %d, want %d", got, c.total)
			}
		})
	}
}

func TestBindingReportNamesTheKnobSources(t *testing.T) {
	n := coretest.MustNew(t, newMethodKnobs(), coretest.Data(t, 0), core.WithMaxEpochs(6))
	rep := n.BindingReport()
	for _, want := range [][]string{
		{"max_epochs", "6", "run option"},
		{"accum", "2", "method Accum()"},
		{"gradient_clip_norm", "0.5", "method GradientClipNorm()"},
		{"total_steps", "12"},
	} {
		found := false
		for _, line := range strings.Split(rep, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == want[0] {
				found = true
				wantContains(t, "binding report line", line, want[1:]...)
			}
		}
		if !found {
			t.Errorf("binding report has no %s line:\n%s", want[0], rep)
		}
	}
}

func TestSeedDrivesInitialization(t *testing.T) {
	params := func(opts ...core.Option) []float32 {
		n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0), opts...)
		p, err := n.Parameters()
		if err != nil {
			t.Fatal(err)
		}
		w, ok := p["dense_0/dense/weights"]
		if !ok {
			t.Fatalf("no dense_0/dense/weights among %v", keys(p))
		}
		return w.Value().([][]float32)[0]
	}
	a, b, c := params(core.WithSeed(1)), params(core.WithSeed(1)), params(core.WithSeed(2))
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("the same seed initialized differently: %v vs %v", a, b)
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Errorf("seeds 1 and 2 initialized identically: %v", a)
	}
}

func TestConfigReportPrintedOnceAcrossEntryPoints(t *testing.T) {
	var buf bytes.Buffer
	n, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.WithData(coretest.Data(t, 32)), core.WithOutput(&buf), core.WithCache(newCache()), core.WithoutLogger(), core.WithoutCheckpoints())
	if err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Errorf("New printed %q; setup prints nothing", buf.String())
	}
	for i := 0; i < 2; i++ {
		if _, err := n.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Predict(prefetch.Batch{"x": must(coretest.Arrays(t, 16, 16, 3, prefetch.ArrayOptions{}).BatchAt(0))["x"]}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if c := strings.Count(out, "fixed at construction"); c != 1 {
		t.Errorf("config report printed %d times, want once:\n%s", c, out)
	}
	if c := strings.Count(out, "binding report"); c != 1 {
		t.Errorf("binding report printed %d times, want once:\n%s", c, out)
	}
	if !strings.HasPrefix(out, "nitro Reg: fixed at construction") {
		t.Errorf("the report is not the first thing printed:\n%s", out)
	}
	if !strings.Contains(out, "epoch 1/1") {
		t.Errorf("Train printed no epoch line:\n%s", out)
	}
}

func TestQuietPrintsNothing(t *testing.T) {
	var buf bytes.Buffer
	n, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.WithData(coretest.Data(t, 32)), core.WithOutput(&buf), core.Quiet(), core.WithCache(newCache()), core.WithoutLogger(), core.WithoutCheckpoints())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Errorf("Quiet printed %q", buf.String())
	}
	// The reports stay available on demand.
	if !strings.Contains(n.ConfigReport(), "fixed at construction") || !strings.Contains(n.BindingReport(), "binding report") {
		t.Errorf("reports empty under Quiet")
	}
}
