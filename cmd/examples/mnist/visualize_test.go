package mnist_test

import (
	"image"
	"image/color"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/render"
)

// samples is three synthetic digits (sample i lit on its row i*9 .. i*9+2) labelled 1, 2, 3,
// with logits whose argmax is 1, 0, 3 when preds.
func samples(preds bool) core.VisualSamples {
	pix := make([]float32, 3*784)
	for i := range 3 {
		for j := i * 9 * 28; j < (i*9+3)*28; j++ {
			pix[i*784+j] = 1
		}
	}
	s := core.VisualSamples{Split: "test", Count: 3, Batch: prefetch.Batch{
		"image": tensors.FromFlatDataAndDimensions(pix, 3, 784),
		"label": tensors.FromFlatDataAndDimensions([]int32{1, 2, 3}, 3),
	}}
	if preds {
		logits := make([]float32, 30)
		for i, p := range []int{1, 0, 3} {
			logits[i*10+p] = 5
		}
		s.Outputs = core.Prediction{"logits": tensors.FromFlatDataAndDimensions(logits, 3, 10)}
	}
	return s
}

func count(img image.Image, r image.Rectangle, c color.Color) int {
	want := color.RGBAModel.Convert(c)
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == want {
				n++
			}
		}
	}
	return n
}

// TestVisualizeDrawsDigitsAndMarksPredictions: three cells in two columns, each digit's lit rows
// white at scale 2, and the pred line green for the right predictions (cells 0 and 2), red for
// the wrong one (cell 1); without outputs, no pred line at all.
func TestVisualizeDrawsDigitsAndMarksPredictions(t *testing.T) {
	img, err := (&mnist.MLP{}).Visualize(samples(true))
	if err != nil {
		t.Fatal(err)
	}
	const side, top = 56, render.Pad + render.LineHeight + render.Pad
	ch := side + 2*render.LineHeight
	w := max(render.Pad+2*(side+render.Pad), 2*render.Pad+render.TextWidth("test: 3 samples, 2 predicted right")) // the title is wider
	if want := image.Rect(0, 0, w, top+2*(ch+render.Pad)); img.Bounds() != want {
		t.Fatalf("figure %v, want %v", img.Bounds(), want)
	}
	for i, right := range []bool{true, false, true} {
		x0, y0 := render.Pad+(i%2)*(side+render.Pad), top+(i/2)*(ch+render.Pad)
		lit := image.Rect(x0, y0+i*18, x0+side, y0+i*18+6) // rows i*9 .. i*9+2 at scale 2
		if n := count(img, lit, color.White); n != side*6 {
			t.Errorf("cell %d: %d of %d pixels of its lit rows are white", i, n, side*6)
		}
		if n := count(img, image.Rect(x0, y0, x0+side, y0+side), color.White); n != side*6 {
			t.Errorf("cell %d: %d white pixels in the digit, want %d (its lit rows only)", i, n, side*6)
		}
		pred := image.Rect(x0, y0+side+render.LineHeight, x0+side, y0+ch)
		g, r := count(img, pred, mnist.RightColor), count(img, pred, mnist.WrongColor)
		if right && (g == 0 || r != 0) || !right && (r == 0 || g != 0) {
			t.Errorf("cell %d (right %v): pred line has %d right- and %d wrong-coloured pixels", i, right, g, r)
		}
	}
	plain, err := (&mnist.MLP{}).Visualize(samples(false))
	if err != nil {
		t.Fatal(err)
	}
	if h := plain.Bounds().Dy(); h != top+2*(side+render.LineHeight+render.Pad) {
		t.Errorf("without outputs the figure is %d tall: want one caption line per cell", h)
	}
	if n := count(plain, plain.Bounds(), mnist.RightColor) + count(plain, plain.Bounds(), mnist.WrongColor); n != 0 {
		t.Errorf("without outputs %d pixels are in prediction colours", n)
	}
}

func TestVisualizeNamesAMissingOrMisshapenField(t *testing.T) {
	s := samples(true)
	delete(s.Batch, "image")
	if _, err := (&mnist.MLP{}).Visualize(s); err == nil || !strings.Contains(err.Error(), `needs field "image"`) {
		t.Errorf("no image field: %v", err)
	}
	s = samples(true)
	s.Outputs["logits"] = tensors.FromFlatDataAndDimensions(make([]float32, 27), 3, 9)
	if _, err := (&mnist.MLP{}).Visualize(s); err == nil || !strings.Contains(err.Error(), `field "logits" is (Float32)[3 9], want Float32 with 10 values per sample`) {
		t.Errorf("9 logits: %v", err)
	}
}
