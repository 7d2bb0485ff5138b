package core_test

import (
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
)

// LinePlot learns Line's task (y = 2x + 1, Line's data) and has a Visualize hook: one column per
// sample, a black dot at the true y and, with predictions, a red dot at the predicted y.
type LinePlot struct{ MaxEpochs int }

func (e *LinePlot) BuildModel(ctx *context.Context) error { return nil }
func (e *LinePlot) BuildData() (prefetch.Data, error)     { return newLine().BuildData() }
func (e *LinePlot) Loss(out core.Outputs, in LineTarget) *graph.Node {
	return newLine().Loss(out, in)
}
func (e *LinePlot) Forward(ctx *context.Context, in LineIn) core.Outputs {
	return core.Outputs{"y": layers.Dense(ctx.In("line"), in.X, true, 1)}
}

func (e *LinePlot) Visualize(s core.VisualSamples) (image.Image, error) {
	img := image.NewRGBA(image.Rect(0, 0, s.Count, 40))
	dot := func(col int, y float32, c color.Color) { img.Set(col, 20-int(y*4), c) }
	for i, y := range tensors.MustCopyFlatData[float32](s.Batch["y"]) {
		dot(i, y, color.Black)
	}
	if s.Outputs != nil {
		for i, y := range tensors.MustCopyFlatData[float32](s.Outputs["y"]) {
			dot(i, y, color.RGBA{255, 0, 0, 255})
		}
	}
	return img, nil
}

// Render draws the head of a split through the experiment's Visualize hook into the run dir.
// Without predictions it runs no program; with them, after Train, the eval program validation
// compiled serves, so nothing more compiles.
func ExampleNitro_Render() {
	dir, _ := os.MkdirTemp("", "render-example-")
	defer os.RemoveAll(dir)
	cache := compilecache.New()
	n, err := core.New(&LinePlot{MaxEpochs: 2}, core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(cache), core.WithRunDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	path, err := n.Render("test", 8)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(filepath.Base(path), "programs compiled:", cache.Stats().Entries)
	if err := n.Train(); err != nil {
		fmt.Println(err)
		return
	}
	before := cache.Stats().Entries
	path, err = n.Render("test", 8, core.RenderPredictions())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(filepath.Base(path), "programs compiled by it:", cache.Stats().Entries-before)
	// Output:
	// test-8.png programs compiled: 0
	// test-8-pred.png programs compiled by it: 0
}
