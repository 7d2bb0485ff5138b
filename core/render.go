package core

import (
	"errors"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/render"
)

// VisualSamples is what Render hands the Visualize hook: the first Count samples of Split, in the
// split source's own order (the batches Evaluate and Train read), on the host.
type VisualSamples struct {
	Split string
	Count int
	// Batch is every field the split's batches carry, Count rows each.
	Batch prefetch.Batch
	// Outputs is Forward's outputs for those rows in eval mode, Count rows each; nil unless
	// Render was asked for predictions, so one Visualize can draw both kinds.
	Outputs Prediction
}

// Visualizer is the Visualize hook: it draws the samples Render pulled as one image, which
// Render writes. It is called only by Render, on the host; without it Render is an error.
type Visualizer interface {
	Visualize(s VisualSamples) (image.Image, error)
}

// visualizeSig is the hook's signature, as its errors print it.
const visualizeSig = "Visualize(s core.VisualSamples) (image.Image, error)"

// RenderOption configures one Render call.
type RenderOption func(*renderOptions)

type renderOptions struct {
	predictions bool
	dir         string
}

// RenderPredictions runs Forward on the samples (the eval program Evaluate and Predict share, so
// after validating at the split's batch size nothing compiles) and hands its outputs to
// Visualize. Without it Render runs no forward pass and compiles nothing.
func RenderPredictions() RenderOption { return func(o *renderOptions) { o.predictions = true } }

// RenderDir writes the figure into dir instead of <RunDir>/render; dir is created if missing.
func RenderDir(dir string) RenderOption { return func(o *renderOptions) { o.dir = dir } }

// Render draws the first count samples of split through the experiment's Visualize hook and
// writes the image as <RunDir>/render/<split>-<count>.png (-pred.png with RenderPredictions),
// durably: the file is the previous one or the whole new one. It returns the path written. The
// samples are the head of the split in its source's order; for a shuffled split that is the
// order of the epoch the source was last set to. It needs no Train.
func (n *Nitro) Render(split string, count int, opts ...RenderOption) (path string, err error) {
	prev := n.tracker.Phase()
	defer n.enter("render", &err, func(error) { n.setPhase(prev, nil) })()
	var o renderOptions
	for _, opt := range opts {
		opt(&o)
	}
	vis, err := n.spec.visualizer()
	if err != nil {
		return "", err
	}
	n.report()
	if count < 1 {
		return "", fmt.Errorf("Render: count %d: draw at least 1 sample", count)
	}
	s, err := n.renderSamples(split, count, o.predictions)
	if err != nil {
		return "", err
	}
	img, err := vis.Visualize(s)
	if err != nil {
		return "", fmt.Errorf("Visualize: %w", err)
	}
	if img == nil || img.Bounds().Empty() {
		return "", fmt.Errorf("Visualize returned no image (nil or empty) for %d samples of split %q: return the figure to write", count, split)
	}
	dir := o.dir
	if dir == "" {
		dir = filepath.Join(n.RunDir(), "render")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("Render: the figure's directory: %w", err)
	}
	name := fmt.Sprintf("%s-%d.png", split, count)
	if o.predictions {
		name = fmt.Sprintf("%s-%d-pred.png", split, count)
	}
	path = filepath.Join(dir, name)
	if err := render.WritePNG(path, img); err != nil {
		return "", err
	}
	return path, nil
}

// visualizer finds the Visualize hook, naming its signature when it is missing or wrong.
func (su *runSpec) visualizer() (Visualizer, error) {
	if v, ok := su.e.(Visualizer); ok {
		return v, nil
	}
	if m, ok := reflect.TypeOf(su.e).MethodByName("Visualize"); ok {
		return nil, fmt.Errorf("experiment %s's Visualize hook is %v: want func (e *%s) %s", su.typeName, m.Type, su.typeName, visualizeSig)
	}
	return nil, fmt.Errorf("experiment %s has no Visualize hook, which Render draws through: define func (e *%s) %s (s.Outputs is nil unless Render runs predictions)", su.typeName, su.typeName, visualizeSig)
}

// renderSamples pulls batches from the head of split until count rows are in hand, with
// Forward's outputs when predictions, and keeps the first count rows of each field.
func (n *Nitro) renderSamples(split string, count int, predictions bool) (VisualSamples, error) {
	s := VisualSamples{Split: split, Count: count}
	src, ok := n.spec.data[split]
	if !ok && n.spec.specOnly() {
		return s, n.spec.noDataError("render")
	}
	if !ok {
		return s, &SplitError{Split: split, Have: sortedKeys(n.spec.data)}
	}
	var batches []prefetch.Batch
	var preds []Prediction
	width, rows := n.spec.splitWidth[split], 0
	if predictions {
		n.setPhase(monitors.EvalStepping{}, nil)
	}
	for i := 0; i < src.Len() && rows < count; i++ {
		b, err := src.BatchAt(i)
		if err != nil {
			return s, fmt.Errorf("split %q, batch %d: %w", split, i, err)
		}
		real, err := batchWidth(b)
		if err != nil {
			return s, fmt.Errorf("split %q, batch %d: %w", split, i, err)
		}
		if predictions {
			p, err := n.predictPadded(b, width, real)
			if err != nil {
				return s, fmt.Errorf("split %q, batch %d: %w", split, i, err)
			}
			preds = append(preds, p)
		}
		batches, rows = append(batches, b), rows+real
	}
	if rows < count {
		return s, fmt.Errorf("Render: count %d is more than split %q's %d samples", count, split, rows)
	}
	var err error
	if s.Batch, err = headRows(batches, count); err != nil {
		return s, fmt.Errorf("split %q: %w", split, err)
	}
	if predictions {
		if s.Outputs, err = headRows(preds, count); err != nil {
			return s, fmt.Errorf("split %q's outputs: %w", split, err)
		}
	}
	return s, nil
}

// headRows joins the batches' fields along the batch axis and keeps the first count rows.
func headRows[M ~map[string]*tensors.Tensor](batches []M, count int) (M, error) {
	out := M{}
	for name, t0 := range batches[0] {
		t := tensors.FromShape(shapes.Make(t0.DType(), append([]int{count}, t0.Shape().Dimensions[1:]...)...))
		var inner error
		err := t.MutableBytes(func(dst []byte) {
			at := 0
			for i, b := range batches {
				if at == len(dst) || inner != nil {
					return
				}
				if f := b[name]; f == nil || f.DType() != t0.DType() || !slices.Equal(f.Shape().Dimensions[1:], t0.Shape().Dimensions[1:]) {
					inner = fmt.Errorf("batch %d's field %q is not batch 0's %s per sample", i, name, t0.Shape())
					return
				}
				inner = b[name].ConstBytes(func(src []byte) { at += copy(dst[at:], src) })
			}
		})
		if err = errors.Join(err, inner); err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}
