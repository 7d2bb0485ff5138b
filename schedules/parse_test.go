package schedules_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/schedules"
)

// parseCases are the texts the golden table holds: each accepted form, spacing and case
// variants, and the refusals.
var parseCases = []string{
	"0.001", " 5e-4 ", "-1", "constant:0.5", "linear:1,0", "cosine:1,0", "COSINE: 1 , 0.1",
	"warmup_cosine:0.25,1,0", "warmup_cosine_steps:3,1,0.1", "step_decay:1,0.5,2",
	"piecewise:1,3,0.1,5,0.01", "piecewise:2",
	// refused
	"", "cosin:1,0", "cosine", "cosine:1", "cosine:1,0,0", "cosine:1,x", "cosine:1,NaN", "Inf",
	"warmup_cosine_steps:2.5,1,0", "step_decay:1,0.5,1e12", "piecewise:1,3", "piecewise:1,0.5,2", "piecewise:1,0,2",
	// accepted by Parse, refused when Resolve builds them (the factory's own checks)
	"warmup_cosine:1.5,1,0", "warmup_cosine_steps:8,1,0", "piecewise:1,5,0.1,3,0.01", "step_decay:1,0.5,0",
}

// TestParseGolden: every text form, as the values it gives over 8 steps through Resolve, or the
// error Parse or Resolve gives, matches testdata/parse_forms.golden (go test -update rewrites it).
func TestParseGolden(t *testing.T) {
	var b strings.Builder
	for _, text := range parseCases {
		fmt.Fprintf(&b, "%q\n", text)
		p, err := schedules.Parse(text)
		if err != nil {
			fmt.Fprintf(&b, "  parse error: %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  | "))
			continue
		}
		if p.String() != strings.TrimSpace(text) {
			t.Errorf("Parse(%q).String() = %q; want the text, trimmed", text, p.String())
		}
		bound, err := schedules.Resolve(map[string]any{"eta": p}, schedules.Space{RuleFields: []string{"eta"}}, 8)
		if err != nil {
			fmt.Fprintf(&b, "  resolve error: %s\n", err)
			continue
		}
		b.WriteString(" ")
		for step := 1; step <= 8; step++ {
			v, err := bound.At(step)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, " %.4g", v[schedules.Target{Scope: schedules.ScopeOpt, Name: "eta"}])
		}
		b.WriteString("\n")
	}
	got := b.String()
	path := filepath.Join("testdata", "parse_forms.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./schedules -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("parse table differs from %s (go test ./schedules -update rewrites it):\n%s", path, got)
	}
}

// A parsed form is the factory it names: the same values at every step.
func TestParseIsTheFactory(t *testing.T) {
	for text, f := range map[string]schedules.Factory{
		"cosine:0.05,0.001":         schedules.Cosine(0.05, 0.001),
		"warmup_cosine:0.1,0.05,0":  schedules.WarmupCosine(0.1, 0.05, 0),
		"step_decay:0.1,0.5,7":      schedules.StepDecay(0.1, 0.5, 7),
		"piecewise:0.1,10,0.01":     schedules.Piecewise([]int{10}, []float64{0.1, 0.01}),
		"linear:0.3,0.1":            schedules.Linear(0.3, 0.1),
		"warmup_cosine_steps:5,1,0": schedules.WarmupCosineSteps(5, 1, 0),
	} {
		p, err := schedules.Parse(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		got, want := p.Factory(50), f(50)
		for step := 1; step <= 50; step++ {
			if got(step) != want(step) {
				t.Fatalf("%s at step %d: %v, want %v", text, step, got(step), want(step))
			}
		}
	}
}
