package mnist

import (
	"fmt"
	"image"
	"image/color"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/render"
)

// The caption colours of a predicted label: right, wrong. The true label is black.
var (
	RightColor = color.RGBA{0, 130, 0, 255}
	WrongColor = color.RGBA{210, 0, 0, 255}
)

// Visualize draws the samples as a grid of digits, each captioned with its true label and, when
// Render ran predictions, the predicted one (the logits' argmax) in RightColor or WrongColor. The
// title says the split, the count and, with predictions, how many are right.
func (e *MLP) Visualize(s core.VisualSamples) (image.Image, error) {
	const side = 28
	pix, err := flatOf[float32](s.Batch, "image", side*side)
	if err != nil {
		return nil, err
	}
	labels, err := flatOf[int32](s.Batch, "label", 1)
	if err != nil {
		return nil, err
	}
	var preds []int
	if s.Outputs != nil {
		logits, err := flatOf[float32](s.Outputs, "logits", 10)
		if err != nil {
			return nil, err
		}
		for i := range s.Count {
			row := logits[i*10 : (i+1)*10]
			preds = append(preds, slices.Index(row, slices.Max(row)))
		}
	}
	title := fmt.Sprintf("%s: %d samples", s.Split, s.Count)
	cells := make([]render.Cell, s.Count)
	right := 0
	for i := range cells {
		img, err := render.Gray(pix[i*side*side:(i+1)*side*side], side, side)
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		cells[i] = render.Cell{Image: img, Caption: []render.Line{{Text: fmt.Sprintf("label %d", labels[i])}}}
		if preds != nil {
			c := WrongColor
			if preds[i] == int(labels[i]) {
				c, right = RightColor, right+1
			}
			cells[i].Caption = append(cells[i].Caption, render.Line{Text: fmt.Sprintf("pred %d", preds[i]), Color: c})
		}
	}
	if preds != nil {
		title += fmt.Sprintf(", %d predicted right", right)
	}
	return render.Grid(cells, render.GridOptions{Scale: 2, Title: title})
}

// flatOf is field name of m as a flat []T of per values per sample.
func flatOf[T float32 | int32](m map[string]*tensors.Tensor, name string, per int) ([]T, error) {
	t := m[name]
	if t == nil {
		return nil, fmt.Errorf("Visualize needs field %q: the samples have %v", name, sortedNames(m))
	}
	dims := t.Shape().Dimensions
	if want := dtypes.FromGenericsType[T](); t.DType() != want || len(dims) == 0 || t.Shape().Size() != dims[0]*per {
		return nil, fmt.Errorf("Visualize: field %q is %s, want %s with %d values per sample", name, t.Shape(), want, per)
	}
	var out []T
	err := tensors.ConstFlatData[T](t, func(flat []T) { out = slices.Clone(flat) })
	return out, err
}

func sortedNames(m map[string]*tensors.Tensor) []string {
	var names []string
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
