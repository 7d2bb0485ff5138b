package cli_test

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/render"
)

// The MNIST figure's layout at 16 samples: 4 columns of 56x56 digits (28 px at scale 2) under a
// title line, each with one caption line (label) or two (label, pred).
const (
	digitPx  = 56
	gridTop  = render.Pad + render.LineHeight + render.Pad
	gridCols = 4
)

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s does not decode as PNG: %v", path, err)
	}
	return img
}

func countColor(img image.Image, r image.Rectangle, c color.RGBA) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == c {
				n++
			}
		}
	}
	return n
}

// predictedRight reads the 16-sample prediction figure cell by cell: how many "pred" lines are
// in RightColor; each must be in exactly one of RightColor and WrongColor.
func predictedRight(t *testing.T, img image.Image) int {
	t.Helper()
	ch := digitPx + 2*render.LineHeight
	right := 0
	for i := 0; i < 16; i++ {
		x0, y0 := render.Pad+(i%gridCols)*(digitPx+render.Pad), gridTop+(i/gridCols)*(ch+render.Pad)
		line := image.Rect(x0, y0+digitPx+render.LineHeight, x0+digitPx, y0+ch)
		r, w := countColor(img, line, mnist.RightColor), countColor(img, line, mnist.WrongColor)
		if (r > 0) == (w > 0) {
			t.Fatalf("cell %d's pred line has %d right-coloured and %d wrong-coloured pixels: want one colour", i, r, w)
		}
		if r > 0 {
			right++
		}
	}
	return right
}

// TestRenderTinyMNISTData: render without --predictions (flags on both sides of the name)
// writes <run dir>/render/test-16.png, a 4x4 grid of digits with one caption line each and no
// prediction colour, and compiles nothing.
func TestRenderTinyMNISTData(t *testing.T) {
	compilecache.Default().Reset() // the CLI reports the process-level cache, which other tests fill
	t.Cleanup(compilecache.Default().Reset)
	dir := t.TempDir()
	code, out, errs := runCLI("render", "--split", "test", "mnist-mlp", "--preset", "tiny", "--n", "16", "--run-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	path := filepath.Join(dir, "render", "test-16.png")
	for _, w := range []string{"render: " + path + " (16 samples of split test, predictions false)", "compile cache: 0 misses"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	img := decodePNG(t, path)
	ch := digitPx + render.LineHeight
	want := image.Rect(0, 0, render.Pad+gridCols*(digitPx+render.Pad), gridTop+4*(ch+render.Pad))
	if img.Bounds() != want {
		t.Fatalf("figure %v, want %v (4x4 cells of a digit and one caption line)", img.Bounds(), want)
	}
	all := img.Bounds()
	if r, w := countColor(img, all, mnist.RightColor), countColor(img, all, mnist.WrongColor); r+w != 0 {
		t.Errorf("a data render has prediction colours: %d right, %d wrong pixels", r, w)
	}
	// Each cell's digit is white ink on black: its square is mostly black, with some white.
	digit := image.Rect(render.Pad, gridTop, render.Pad+digitPx, gridTop+digitPx)
	black, white := countColor(img, digit, color.RGBA{0, 0, 0, 255}), countColor(img, digit, color.RGBA{255, 255, 255, 255})
	if black < digitPx*digitPx/2 || white == 0 {
		t.Errorf("the first digit has %d black and %d white pixels of %d: not an MNIST digit", black, white, digitPx*digitPx)
	}
}

// TestRenderTinyMNISTPredictions: trained weights from a checkpoint get most of the 16 test
// digits right; the initial weights, chance; each costs one program, the eval program.
func TestRenderTinyMNISTPredictions(t *testing.T) {
	compilecache.Default().Reset()
	t.Cleanup(compilecache.Default().Reset)
	small := []string{"--preset", "tiny", "--set", "TrainLimit=3000", "--set", "TestLimit=1000"}
	trained := t.TempDir()
	if code, out, errs := runCLI(append([]string{"train", "mnist-mlp", "--run-dir", trained, "--quiet"}, small...)...); code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errs, out)
	}
	render := func(extra ...string) (image.Image, string) {
		compilecache.Default().Reset()
		dir := t.TempDir()
		args := append([]string{"render", "mnist-mlp", "--predictions", "--run-dir", dir, "--quiet"}, append(small, extra...)...)
		code, out, errs := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s\n%s", args, code, errs, out)
		}
		if !strings.Contains(out, "compile cache: 1 misses") {
			t.Errorf("render --predictions should compile the eval program alone:\n%s", out)
		}
		return decodePNG(t, filepath.Join(dir, "render", "test-16-pred.png")), out
	}
	img, _ := render("--checkpoint", trained)
	if right := predictedRight(t, img); right < 12 {
		t.Errorf("trained weights predicted %d of 16 digits right, want >= 12 (the checkpoint was not loaded?)", right)
	}
	img, _ = render()
	if right := predictedRight(t, img); right > 6 {
		t.Errorf("the initial weights predicted %d of 16 right, want about chance (<= 6)", right)
	}
}

// TestRenderHelpAndCompletion: the root help lists render, its help names the hook and its
// flags, and shell completion offers the command and the experiment names after it.
func TestRenderHelpAndCompletion(t *testing.T) {
	_, out, _ := runCLI("help")
	if !strings.Contains(out, "render <experiment> [flags]") {
		t.Errorf("root help does not list render:\n%s", out)
	}
	_, out, _ = runCLI("help", "render")
	for _, w := range []string{"Visualize hook", "--predictions", "--n N", "--checkpoint", "render/<split>-<n>.png"} {
		if !strings.Contains(out, w) {
			t.Errorf("render help lacks %q:\n%s", w, out)
		}
	}
	_, out, _ = runCLI("__complete", "re")
	if !strings.Contains(out, "render\t") {
		t.Errorf("completion of \"re\" does not offer render:\n%s", out)
	}
	_, out, _ = runCLI("__complete", "render", "")
	if !strings.Contains(out, "mnist-mlp") {
		t.Errorf("completion after render does not offer the experiments:\n%s", out)
	}
}
