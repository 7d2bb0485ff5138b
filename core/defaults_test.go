package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/markers"
)

// Tagged declares its configuration in `default:` tags, as a ported experiment does.
type Tagged struct {
	coretest.Base
	Width        int     `nitro:"graphconst" default:"8"`
	LearningRate float64 `default:"0.01"`
	Note         string  `default:""`
	Dropout      float64 `default:"0.1" doc:"read by no hook; the field a test sets to zero on purpose"`
}

func (e *Tagged) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	h := layers.Dense(ctx.In("hidden"), in.X, true, e.Width)
	return core.Outputs{"pred": layers.Dense(ctx.In("out"), graph.Tanh(h), true, 1)}
}

// A struct literal never had its defaults applied: core.New refuses it at once, naming the
// zeroed fields, their defaults and markers.New (not "parameter group has no elements" later).
func TestNewRefusesUnappliedDefaults(t *testing.T) {
	err := newErr(t, &Tagged{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "Width (default 8)", "LearningRate (default 0.01)", "markers.New[Tagged]", "on purpose")
	if contains(err.Error(), "Note") {
		t.Errorf("Note's default is the zero value, nothing was lost: %v", err)
	}
	// Partly filled in: the field left zero is still named.
	err = newErr(t, &Tagged{Width: 4}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "LearningRate (default 0.01)", "Dropout (default 0.1)")
	if contains(err.Error(), "Width") {
		t.Errorf("Width was set: %v", err)
	}
}

// Every field set by hand, or built by markers.New (with a zero chosen on purpose): accepted, and
// the chosen zero stays zero.
func TestNewAcceptsAppliedDefaults(t *testing.T) {
	coretest.MustNew(t, &Tagged{Width: 4, LearningRate: 0.1, Dropout: 0.2}, coretest.Data(t, 0))
	e, err := markers.New[Tagged](nil)
	if err != nil {
		t.Fatal(err)
	}
	coretest.MustNew(t, e, coretest.Data(t, 0))
	z, err := markers.New[Tagged](map[string]any{"Dropout": 0})
	if err != nil {
		t.Fatal(err)
	}
	n := coretest.MustNew(t, z, coretest.Data(t, 0))
	if got := n.Experiment().(*Tagged).Dropout; got != 0 || z.Width != 8 {
		t.Errorf("a deliberate zero was overridden: Dropout %v, Width %d", got, z.Width)
	}
	// A copy of a built struct is a new struct literal: its deliberate zero cannot be told apart.
	c := *z
	coretest.WantErr(t, newErr(t, &c, coretest.Data(t, 0)), "Dropout")
}
