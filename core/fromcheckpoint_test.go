package core_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/markers"
)

// Rebuilt is an experiment whose presets change its shape (GraphConst Hidden) and its recipe
// (Host Note), with a Device value a run may move.
type Rebuilt struct {
	coretest.Base
	Hidden int                     `nitro:"graphconst" default:"2"`
	Act    string                  `nitro:"graphconst" default:"relu"`
	Sizes  []int                   `nitro:"graphconst"`
	Note   string                  `default:"recipe"`
	Scale  markers.Device[float32] `default:"1"`
}

func (Rebuilt) Presets() map[string]map[string]any {
	return map[string]map[string]any{"wide": {"Hidden": 6}, "narrow": {"Hidden": 3, "Note": "narrow recipe"}}
}

func (e *Rebuilt) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	h := layers.Dense(ctx.In("hidden"), in.X, true, e.Hidden)
	return core.Outputs{"pred": layers.Dense(ctx.In("out"), h, true, 1)}
}

// TestNewFromCheckpointRebuildsTheExperiment: a run built from preset wide with a Host and a
// GraphConst override, whose Device value moved during the run, is rebuilt from its checkpoint
// alone, file or run dir, weights or resume; overrides apply by the rules of each kind.
func TestNewFromCheckpointRebuildsTheExperiment(t *testing.T) {
	dir := t.TempDir()
	n, err := core.NewFromPreset[Rebuilt]("wide", map[string]any{"Note": "mine", "Act": "tanh", "Sizes": []int{4, 5}}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(2))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.SetDevice("Scale", float32(0.5)); err != nil { // as a hook would, mid-run
		t.Fatal(err)
	}
	coretest.Train(t, n)
	want := must(n.Validate())

	for _, from := range []string{dir, n.LastCheckpoint()} {
		con := &core.MemoryConsole{}
		w, err := core.NewFromCheckpoint[Rebuilt](from, nil, coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)), core.WithConsole(con))...)
		if err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		e := w.Experiment().(*Rebuilt)
		if !slices.Equal(e.Sizes, []int{4, 5}) {
			t.Errorf("%s: rebuilt Sizes %v, want [4 5]", from, e.Sizes)
		}
		if e.Hidden != 6 || e.Act != "tanh" || e.Note != "mine" || e.Scale.Value() != 0.5 || w.Preset() != "wide" || w.Step() != 0 {
			t.Errorf("%s: rebuilt Hidden %d Act %q Note %q Scale %v preset %q step %d; want 6 tanh mine 0.5 wide 0", from, e.Hidden, e.Act, e.Note, e.Scale.Value(), w.Preset(), w.Step())
		}
		sameBits(t, "weights", flatParams(t, w), flatParams(t, n))
		if got := must(w.Validate()); math.Float64bits(got["val_loss"]) != math.Float64bits(want["val_loss"]) {
			t.Errorf("%s: val_loss %v, the trained run's %v", from, got["val_loss"], want["val_loss"])
		}
		if !slices.ContainsFunc(con.Notices, func(s string) bool {
			return strings.Contains(s, `GraphConst field Act = "tanh", as recorded (the recipe gives "relu")`)
		}) {
			t.Errorf("%s: notices %q do not report the value set back", from, con.Notices)
		}
	}

	// ContinueRun resumes: the counters go on; a Host override wins and is reported.
	con := &core.MemoryConsole{}
	r, err := core.NewFromCheckpoint[Rebuilt](dir, map[string]any{"Note": "later"}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(3), core.ContinueRun(), core.WithConsole(con))...)
	if err != nil {
		t.Fatal(err)
	}
	if r.Step() != n.Step() || r.Epoch() != 2 || r.Experiment().(*Rebuilt).Note != "later" {
		t.Errorf("resumed at step %d epoch %d Note %q; want step %d epoch 2 Note later", r.Step(), r.Epoch(), r.Experiment().(*Rebuilt).Note, n.Step())
	}
	if !slices.ContainsFunc(con.Notices, func(s string) bool { return strings.Contains(s, "Host field Note: checkpoint mine, override later") }) {
		t.Errorf("notices %q do not report the Host override", con.Notices)
	}
	coretest.Train(t, r)

	// Continued with no WithRunDir, the run goes on in the checkpoint's folder, not runs/<E>.
	c, err := core.NewFromCheckpoint[Rebuilt](dir, nil, core.WithBackend("go"), core.WithConsole(nil), core.WithCache(newCache()),
		core.WithoutLogger(), core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(3), core.ContinueRun())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.Abs(c.RunDir()); got != must(filepath.Abs(dir)) {
		t.Errorf("a continued run's run dir is %q, want the checkpoint's folder %q", c.RunDir(), dir)
	}

	// Refusals, each naming what contradicts and both values.
	opts := coretest.CkptOpts(t.TempDir(), core.WithData(coretest.Data(t, 16)))
	_, err = core.NewFromCheckpoint[Rebuilt](dir, map[string]any{"Hidden": 3}, opts...)
	coretest.WantErr(t, err, "override Hidden = 3 contradicts the checkpoint", "GraphConst Hidden = 6", "WithCheckpoint")
	if ce := (*core.ContradictionError)(nil); !errors.As(err, &ce) || ce.Field != "Hidden" || ce.Recorded != "6" || ce.Given != "3" {
		t.Errorf("%v: want a *core.ContradictionError for Hidden, recorded 6, given 3", err)
	}
	_, err = core.NewFromCheckpoint[Rebuilt](dir, nil, append(opts, core.WithPreset("narrow"))...)
	coretest.WantErr(t, err, `WithPreset("narrow") contradicts the checkpoint`, "trained with preset wide")
	_, err = core.NewFromCheckpoint[Rebuilt](dir, nil, append(opts, core.WithCheckpoint(dir))...)
	coretest.WantErr(t, err, "drop them")
	_, err = core.NewFromCheckpoint[Rebuilt](dir, map[string]any{"Hiden": 6}, opts...)
	coretest.WantErr(t, err, "unknown field Hiden", "did you mean Hidden")
	_, err = core.NewFromCheckpoint[Rebuilt](t.TempDir(), nil, opts...)
	coretest.WantErr(t, err, "holds no checkpoint")
	_, err = core.New(must(markers.New[Rebuilt](nil)), append(opts, core.ContinueRun())...)
	coretest.WantErr(t, err, "ContinueRun is an option of NewFromCheckpoint")
	if d, err := core.ResolveRunDir(&Rebuilt{}); d != filepath.Join("runs", "Rebuilt") || err != nil {
		t.Errorf("ResolveRunDir: %q %v", d, err)
	}
	if d, _ := core.ResolveRunDir(&Rebuilt{}, core.WithRunDir("elsewhere")); d != "elsewhere" {
		t.Errorf("ResolveRunDir with WithRunDir: %q", d)
	}
	// The same preset given again is no contradiction.
	if _, err := core.NewFromCheckpoint[Rebuilt](dir, nil, append(opts, core.WithPreset("wide"))...); err != nil {
		t.Errorf("WithPreset of the recorded preset: %v", err)
	}
}
