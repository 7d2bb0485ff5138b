package core

import (
	"math"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/prefetch"
)

type knobFields struct {
	Accum     int
	MaxEpochs int
}

func (knobFields) GradientClipNorm() float64 { return -1 }

type knobDefaults struct{}

// TestConfigValidateNamesFieldAndSource checks that every rule of config.validate refuses its
// value with an error naming the knob or option, the value, and where the value came from (run
// option, method, field), and that a config every rule accepts passes.
func TestConfigValidateNamesFieldAndSource(t *testing.T) {
	cases := []struct {
		name string
		e    any
		opts []Option
		want []string // "" means: no error
	}{
		{"defaults pass", &knobDefaults{}, nil, nil},
		{"MaxEpochs from field", &knobFields{Accum: 1, MaxEpochs: -2}, []Option{WithGradientClipNorm(0)}, []string{"MaxEpochs = -2 from field MaxEpochs", ">= 0"}},
		{"Accum from run option", &knobDefaults{}, []Option{WithAccum(0)}, []string{"Accum = 0 from run option", ">= 1"}},
		{"clip from method", &knobFields{Accum: 1}, nil, []string{"GradientClipNorm = -1 from method GradientClipNorm()", ">= 0"}},
		{"clip NaN from option", &knobFields{Accum: 1}, []Option{WithGradientClipNorm(math.NaN())}, []string{"GradientClipNorm = NaN from run option", "finite number >= 0"}},
		{"fused with Accum from field", &knobFields{Accum: 2}, []Option{WithFusedStep(), WithGradientClipNorm(0)}, []string{"WithFusedStep with Accum = 2 from field Accum", "set Accum to 1"}},
		{"log every", &knobDefaults{}, []Option{WithLogEvery(0)}, []string{"WithLogEvery(0)", ">= 1"}},
		{"learning rate", &knobDefaults{}, []Option{WithLearningRate(0)}, []string{"LearningRate = 0 from run option", "non-zero"}},
		{"specs and data", &knobDefaults{}, []Option{WithInputSpecs(), WithData(prefetch.Data{})}, []string{"WithInputSpecs and WithData both given"}},
		{"specs and resume", &knobDefaults{}, []Option{WithInputSpecs(), WithResume("auto")}, []string{`WithInputSpecs and WithResume("auto") both given`, "WithCheckpoint"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o options
			for _, opt := range c.opts {
				opt(&o)
			}
			cfg, err := resolveKnobs(c.e, "E", &o)
			if err != nil {
				t.Fatalf("resolveKnobs: %v", err)
			}
			err = cfg.validate(&o)
			if c.want == nil {
				if err != nil {
					t.Fatalf("validate: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate accepted the config; want an error with %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
