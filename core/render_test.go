package core_test

import (
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// Vis is Reg with a Visualize hook that keeps what it was given and draws one pixel per sample.
type Vis struct {
	coretest.Base
	got   []core.VisualSamples
	fail  error
	empty bool
}

func (e *Vis) Visualize(s core.VisualSamples) (image.Image, error) {
	e.got = append(e.got, s)
	if e.fail != nil || e.empty {
		return nil, e.fail
	}
	img := image.NewGray(image.Rect(0, 0, s.Count, 1))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 10)
	}
	return img, nil
}

// WrongVis has a Visualize method of another signature.
type WrongVis struct{ coretest.Base }

func (*WrongVis) Visualize(n int) error { return nil }

func flat(t *testing.T, x *tensors.Tensor) []float32 {
	t.Helper()
	return slices.Clone(tensors.MustCopyFlatData[float32](x))
}

// TestRenderDataDrawsTheSplitHeadAndCompilesNothing: without predictions Render hands Visualize
// the split's first 20 samples (across two of its batches of 16), every field, no outputs, runs
// no program, and writes what Visualize drew to <RunDir>/render/val-20.png.
func TestRenderDataDrawsTheSplitHeadAndCompilesNothing(t *testing.T) {
	cache, dir, e := newCache(), t.TempDir(), &Vis{}
	n, err := core.New(e, coretest.GoOpts(cache, core.WithData(coretest.Data(t, 40)), core.WithRunDir(dir))...)
	if err != nil {
		t.Fatal(err)
	}
	path, err := n.Render("val", 20)
	if err != nil {
		t.Fatal(err)
	}
	if s := cache.Stats(); s.Misses != 0 || s.Entries != 0 {
		t.Errorf("Render without predictions compiled: %+v, want no program", s)
	}
	if want := filepath.Join(dir, "render", "val-20.png"); path != want {
		t.Errorf("path %s, want %s", path, want)
	}
	if len(e.got) != 1 {
		t.Fatalf("Visualize called %d times, want once", len(e.got))
	}
	s := e.got[0]
	if s.Split != "val" || s.Count != 20 || s.Outputs != nil || len(s.Batch) != 2 {
		t.Fatalf("samples: split %q count %d outputs %v fields %v; want val, 20, nil, x and y", s.Split, s.Count, s.Outputs, keys(s.Batch))
	}
	x, y := coretest.Synthetic(40, 2) // the val split's arrays
	if got, want := flat(t, s.Batch["x"]), flat(t, x)[:20*coretest.Features]; !slices.Equal(got, want) {
		t.Errorf("x is not the split's first 20 rows:\n got %v\nwant %v", got[:8], want[:8])
	}
	if got, want := flat(t, s.Batch["y"]), flat(t, y)[:20]; !slices.Equal(got, want) {
		t.Errorf("y = %v, want the split's first 20 %v", got, want)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() != 20 || color.GrayModel.Convert(img.At(3, 0)).(color.Gray).Y != 30 {
		t.Fatalf("the PNG is not what Visualize drew: %v, %v", img, err)
	}
	other := filepath.Join(t.TempDir(), "figs")
	if path, err := n.Render("train", 3, core.RenderDir(other)); err != nil || path != filepath.Join(other, "train-3.png") {
		t.Fatalf("Render with RenderDir wrote %q (%v), want %s/train-3.png", path, err, other)
	}
}

// TestRenderPredictionsRunTheValidationProgram: after Validate, Render with predictions compiles
// nothing more (it runs the eval program at the split's width, padding the short final batch),
// and its outputs are Predict's for the same rows.
func TestRenderPredictionsRunTheValidationProgram(t *testing.T) {
	cache, e := newCache(), &Vis{}
	n, err := core.New(e, coretest.GoOpts(cache, core.WithData(coretest.Data(t, 40)), core.WithRunDir(t.TempDir()))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	before := cache.Stats().Misses
	path, err := n.Render("val", 40, core.RenderPredictions())
	if err != nil {
		t.Fatal(err)
	}
	if m := cache.Stats().Misses; m != before {
		t.Errorf("Render with predictions after Validate compiled %d more programs, want 0", m-before)
	}
	if filepath.Base(path) != "val-40-pred.png" {
		t.Errorf("path %s, want val-40-pred.png", path)
	}
	out := e.got[0].Outputs
	if out == nil || !slices.Equal(out["pred"].Shape().Dimensions, []int{40, 1}) {
		t.Fatalf("outputs %v, want pred [40 1]", out)
	}
	x, _ := coretest.Synthetic(40, 2)
	want, err := n.Predict(prefetch.Batch{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	if got, w := flat(t, out["pred"]), flat(t, want["pred"]); !slices.Equal(got, w) {
		t.Errorf("Render's predictions differ from Predict's on the same rows:\n got %v\nwant %v", got[:4], w[:4])
	}
}

func TestRenderRefusals(t *testing.T) {
	d := coretest.Data(t, 40)
	cases := []struct {
		name  string
		e     any
		split string
		count int
		want  []string
	}{
		{"no hook", &coretest.Reg{}, "val", 4, []string{"experiment Reg has no Visualize hook", "func (e *Reg) Visualize(s core.VisualSamples) (image.Image, error)"}},
		{"wrong hook", &WrongVis{}, "val", 4, []string{"WrongVis's Visualize hook is func(*core_test.WrongVis, int) error", "want func (e *WrongVis) Visualize(s core.VisualSamples) (image.Image, error)"}},
		{"count 0", &Vis{}, "val", 0, []string{"count 0: draw at least 1 sample"}},
		{"count over the split", &Vis{}, "val", 41, []string{`count 41 is more than split "val"'s 40 samples`}},
		{"no split", &Vis{}, "test", 4, []string{`no split "test"`}},
		{"hook error", &Vis{fail: errors.New("no axes")}, "val", 4, []string{"Visualize: no axes"}},
		{"no image", &Vis{empty: true}, "val", 4, []string{"Visualize returned no image"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := coretest.MustNew(t, c.e, d, core.WithRunDir(t.TempDir()))
			path, err := n.Render(c.split, c.count)
			coretest.WantErr(t, err, c.want...)
			if path != "" {
				t.Errorf("a refused Render returned path %q", path)
			}
		})
	}
}
