package core_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
)

// Bent fits Line's data through a hidden layer whose width is a GraphConst; preset "wide"
// widens it.
type Bent struct {
	Hidden    int `nitro:"graphconst" default:"4" doc:"hidden width"`
	MaxEpochs int `default:"2"`
}

func (Bent) Presets() map[string]map[string]any {
	return map[string]map[string]any{"wide": {"Hidden": 16}}
}

func (e *Bent) BuildModel(*context.Context) error { return nil }

func (e *Bent) BuildData() (prefetch.Data, error) { return newLine().BuildData() }

func (e *Bent) Forward(ctx *context.Context, in LineIn) core.Outputs {
	h := graph.Tanh(layers.Dense(ctx.In("hidden"), in.X, true, e.Hidden))
	return core.Outputs{"y": layers.Dense(ctx.In("out"), h, true, 1)}
}

func (e *Bent) Loss(out core.Outputs, in LineTarget) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(out["y"], in.Y)))
}

// NewFromCheckpoint rebuilds the experiment from what the checkpoint recorded (its preset and its
// values), so a run trained with preset "wide" is evaluated, or resumed, from its run dir alone.
// A GraphConst override that contradicts the checkpoint is refused, naming both values.
func ExampleNewFromCheckpoint() {
	dir, err := os.MkdirTemp("", "nitro-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	cache := compilecache.New()
	quiet := []core.Option{core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithCache(cache)}
	n, err := core.NewFromPreset[Bent]("wide", nil, append(quiet, core.WithRunDir(dir))...)
	if err == nil {
		err = n.Train()
	}
	if err != nil {
		fmt.Println(err)
		return
	}

	// The weights, into the experiment the run trained: no preset given.
	w, err := core.NewFromCheckpoint[Bent](dir, nil, append(quiet, core.WithoutCheckpoints())...)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("preset:", w.Preset(), "hidden:", w.Experiment().(*Bent).Hidden, "step:", w.Step())

	// The whole run, continued for one more epoch.
	r, err := core.NewFromCheckpoint[Bent](dir, nil, append(quiet, core.WithRunDir(dir), core.WithMaxEpochs(3), core.ContinueRun())...)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("resumed at epoch", r.Epoch(), "step", r.Step())

	_, err = core.NewFromCheckpoint[Bent](dir, map[string]any{"Hidden": 4}, append(quiet, core.WithoutCheckpoints())...)
	_, why, _ := strings.Cut(err.Error(), "): ")
	fmt.Println(why[:strings.Index(why, ":")])
	// Output:
	// preset: wide hidden: 16 step: 0
	// resumed at epoch 2 step 8
	// override Hidden = 4 contradicts the checkpoint, which records GraphConst Hidden = 16
}

// ResolveRunDir is where a run of the experiment keeps its checkpoints, found before anything is
// set up: WithRunDir, else the experiment's RunDir method or field, else runs/<Experiment>.
func ExampleResolveRunDir() {
	dir, err := core.ResolveRunDir(&Bent{})
	fmt.Println(dir, err)
	dir, _ = core.ResolveRunDir(&Bent{}, core.WithRunDir("elsewhere"))
	fmt.Println(dir)
	// Output:
	// runs/Bent <nil>
	// elsewhere
}
