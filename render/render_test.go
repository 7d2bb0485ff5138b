package render_test

import (
	"bytes"
	"errors"
	"flag"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/render"
	"github.com/nitro-go/nitro/tensorfile"
)

var update = flag.Bool("update", false, "rewrite testdata/grid.png from the current drawing")

var (
	red   = color.RGBA{200, 0, 0, 255}
	green = color.RGBA{0, 150, 0, 255}
	blue  = color.RGBA{0, 0, 255, 255}
)

func solid(c color.Color, w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, c)
		}
	}
	return img
}

func rgba(img image.Image, x, y int) color.RGBA {
	return color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
}

// count is how many pixels of r in img are exactly c.
func count(img image.Image, r image.Rectangle, c color.Color) int {
	want := color.RGBAModel.Convert(c).(color.RGBA)
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if rgba(img, x, y) == want {
				n++
			}
		}
	}
	return n
}

func TestGrayMapsZeroToBlackAndOneToWhiteClamping(t *testing.T) {
	img, err := render.Gray([]float32{0, 0.5, 1, 2, -1, 0.25}, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint8{0, 128, 255, 255, 0, 64}
	if !bytes.Equal(img.Pix, want) || img.Bounds() != image.Rect(0, 0, 3, 2) {
		t.Fatalf("Gray = %v %v, want %v in 3x2", img.Pix, img.Bounds(), want)
	}
	nan := float32(0)
	nan = nan / nan
	for _, tc := range []struct {
		pix  []float32
		w, h int
		want string
	}{
		{[]float32{0, 0, 0}, 2, 2, "3 pixel values for a 2x2 image (want 4)"},
		{[]float32{0, nan}, 2, 1, "pixel 1 (x 1, y 0) is NaN"},
		{nil, 0, 1, "width 0, height 1"},
	} {
		if _, err := render.Gray(tc.pix, tc.w, tc.h); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Gray(%v, %d, %d) = %v, want an error with %q", tc.pix, tc.w, tc.h, err, tc.want)
		}
	}
}

// TestGridPlacesImagesAndCaptions checks the layout pixel by pixel: three 2x2 images at scale 3
// in two columns, each cell as wide as the widest caption ("ab", 14 px) and as tall as an image
// (6 px) plus one caption line (13 px), Pad 4 px around and between cells.
func TestGridPlacesImagesAndCaptions(t *testing.T) {
	cells := []render.Cell{
		{Image: solid(red, 2, 2), Caption: []render.Line{{Text: "ab", Color: green}}},
		{Image: solid(green, 2, 2), Caption: []render.Line{{Text: "c", Color: red}}},
		{Image: solid(blue, 2, 2)},
	}
	img, err := render.Grid(cells, render.GridOptions{Columns: 2, Scale: 3})
	if err != nil {
		t.Fatal(err)
	}
	const cw, ch = 14, 6 + render.LineHeight
	if got, want := img.Bounds(), image.Rect(0, 0, 4+2*(cw+4), 4+2*(ch+4)); got != want {
		t.Fatalf("bounds %v, want %v", got, want)
	}
	imgAt := func(col, row int) image.Rectangle { // the scaled image, centred in its cell
		x, y := 4+col*(cw+4)+(cw-6)/2, 4+row*(ch+4)
		return image.Rect(x, y, x+6, y+6)
	}
	capAt := func(col, row int) image.Rectangle {
		x, y := 4+col*(cw+4), 4+row*(ch+4)+6
		return image.Rect(x, y, x+cw, y+render.LineHeight)
	}
	for i, c := range []struct {
		col, row int
		fill     color.Color
	}{{0, 0, red}, {1, 0, green}, {0, 1, blue}} {
		r := imgAt(c.col, c.row)
		if n := count(img, r, c.fill); n != 36 {
			t.Errorf("cell %d: %d of 36 image pixels are its colour", i, n)
		}
		if got := rgba(img, r.Min.X-1, r.Min.Y); got != (color.RGBA{255, 255, 255, 255}) {
			t.Errorf("cell %d: the pixel left of the image is %v, want white", i, got)
		}
	}
	if n := count(img, capAt(0, 0), green); n < 10 {
		t.Errorf("cell 0's caption \"ab\" has %d green pixels, want its glyphs drawn (>= 10)", n)
	}
	if n := count(img, capAt(0, 0), red); n != 0 {
		t.Errorf("cell 0's caption region has %d red pixels: another cell's caption leaked in", n)
	}
	if n := count(img, capAt(1, 0), red); n < 5 {
		t.Errorf("cell 1's caption \"c\" has %d red pixels, want its glyph drawn", n)
	}
	white := color.White
	for _, r := range []image.Rectangle{capAt(0, 1), imgAt(1, 1), capAt(1, 1)} {
		if n := count(img, r, white); n != r.Dx()*r.Dy() {
			t.Errorf("%v: %d of %d pixels white; the captionless cell and the empty slot draw nothing", r, n, r.Dx()*r.Dy())
		}
	}
}

// TestTextDrawsDistinctGlyphsInTheirCell: "1" and "7" ink different pixels, inside the glyph's
// 7x13 cell at (x, y), and "" draws nothing.
func TestTextDrawsDistinctGlyphsInTheirCell(t *testing.T) {
	draw := func(s string) *image.RGBA {
		img := image.NewRGBA(image.Rect(0, 0, 30, 30))
		for i := range img.Pix {
			img.Pix[i] = 255
		}
		render.Text(img, 5, 7, s, blue)
		return img
	}
	one, seven := draw("1"), draw("7")
	all := image.Rect(0, 0, 30, 30)
	cell := image.Rect(5, 7, 5+render.GlyphWidth, 7+render.LineHeight)
	for s, img := range map[string]*image.RGBA{"1": one, "7": seven} {
		in, total := count(img, cell, blue), count(img, all, blue)
		if in == 0 || in != total {
			t.Errorf("%q: %d ink pixels inside its cell %v, %d in all: want all inside, some", s, in, cell, total)
		}
	}
	if bytes.Equal(one.Pix, seven.Pix) {
		t.Error(`"1" and "7" draw the same pixels`)
	}
	if n := count(draw(""), all, blue); n != 0 {
		t.Errorf(`"" drew %d pixels`, n)
	}
	if got := render.TextWidth("pred 7"); got != 6*render.GlyphWidth {
		t.Errorf("TextWidth(pred 7) = %d", got)
	}
}

// TestGridMatchesGolden compares a captioned, titled grid of gradients with testdata/grid.png
// pixel for pixel (go test -update rewrites it after a deliberate change; look at it first).
func TestGridMatchesGolden(t *testing.T) {
	var cells []render.Cell
	for i := 0; i < 5; i++ {
		pix := make([]float32, 8*8)
		for j := range pix {
			pix[j] = float32((j%8+j/8+i)%8) / 7
		}
		g, err := render.Gray(pix, 8, 8)
		if err != nil {
			t.Fatal(err)
		}
		cells = append(cells, render.Cell{Image: g, Caption: []render.Line{{Text: "label " + string(rune('0'+i))}, {Text: "pred " + string(rune('0'+(i*3)%5)), Color: map[bool]color.Color{true: green, false: red}[i == (i*3)%5]}}})
	}
	img, err := render.Grid(cells, render.GridOptions{Columns: 3, Scale: 2, Title: "test: 5 samples"})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "grid.png")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := render.WritePNG(golden, img); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatalf("%v (create it with go test -run TestGridMatchesGolden -update, then look at it)", err)
	}
	defer f.Close()
	want, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if want.Bounds() != img.Bounds() {
		t.Fatalf("bounds %v, golden %v", img.Bounds(), want.Bounds())
	}
	diff := 0
	for y := 0; y < want.Bounds().Dy(); y++ {
		for x := 0; x < want.Bounds().Dx(); x++ {
			if rgba(img, x, y) != rgba(want, x, y) {
				diff++
			}
		}
	}
	if diff != 0 {
		t.Fatalf("%d pixels differ from %s", diff, golden)
	}
}

func TestGridRefusesWhatItCannotDraw(t *testing.T) {
	ok := render.Cell{Image: solid(red, 2, 2)}
	for _, tc := range []struct {
		cells []render.Cell
		opt   render.GridOptions
		want  string
	}{
		{nil, render.GridOptions{}, "no cells"},
		{[]render.Cell{ok, {}}, render.GridOptions{}, "cell 1 has no image"},
		{[]render.Cell{ok}, render.GridOptions{Scale: -1}, "Scale -1"},
		{[]render.Cell{ok}, render.GridOptions{Scale: 5000}, "over MaxPixels"},
	} {
		if _, err := render.Grid(tc.cells, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Grid(%d cells, %+v) = %v, want an error with %q", len(tc.cells), tc.opt, err, tc.want)
		}
	}
}

// huge claims 2^32 columns: png.Encode refuses it before reading a pixel, a failed write.
type huge struct{ image.Gray }

func (huge) Bounds() image.Rectangle { return image.Rect(0, 0, 1<<32, 1) }

// TestWritePNGIsAtomic: a written file decodes to the image; a write that fails leaves the
// previous file as it was and no temporary file.
func TestWritePNGIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fig.png")
	img := solid(blue, 3, 2)
	if err := render.WritePNG(path, img); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := png.Decode(bytes.NewReader(before))
	if err != nil || got.Bounds() != img.Bounds() || rgba(got, 2, 1) != blue {
		t.Fatalf("read back %v, %v: want the 3x2 blue image", got, err)
	}
	err = render.WritePNG(path, &huge{})
	var we *tensorfile.WriteError
	if !errors.As(err, &we) || we.Op != "write" {
		t.Fatalf("WritePNG(2^32 columns) = %v, want a *tensorfile.WriteError at write", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("the failed write changed the previous file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("after a failed write the directory holds %v, want fig.png alone", entries)
	}
	if err := render.WritePNG(path, nil); err == nil || !strings.Contains(err.Error(), "no image") {
		t.Fatalf("WritePNG(nil) = %v", err)
	}
}
