package render

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"unicode/utf8"

	"github.com/nitro-go/nitro/tensorfile"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The font's cell: every rune advances GlyphWidth pixels, every line is LineHeight tall.
const (
	GlyphWidth = 7
	LineHeight = 13
)

// MaxPixels bounds a figure Grid draws (width x height), so that a count or a scale typed wrong
// is an error rather than gigabytes of memory.
const MaxPixels = 1 << 26

// Pad is the margin, in pixels, around the grid and between its cells.
const Pad = 4

var face = basicfont.Face7x13

// Line is one line of a caption, drawn in Color (nil: black).
type Line struct {
	Text  string
	Color color.Color
}

// Cell is one image of a grid with the caption lines drawn under it.
type Cell struct {
	Image   image.Image
	Caption []Line
}

// GridOptions lays out a grid. Zero values choose: Columns ceil(sqrt(cells)), Scale 1.
type GridOptions struct {
	Columns int    // cells per row
	Scale   int    // each image pixel is drawn as a Scale x Scale square (nearest neighbour)
	Title   string // one line above the grid; empty: none
}

// Gray is a w x h grayscale image of pix, row-major, 0 black and 1 white; values outside [0, 1]
// are clamped. A NaN is refused: it would draw as black and hide a broken input.
func Gray(pix []float32, w, h int) (*image.Gray, error) {
	if w < 1 || h < 1 {
		return nil, fmt.Errorf("render.Gray: width %d, height %d: both must be >= 1", w, h)
	}
	if len(pix) != w*h {
		return nil, fmt.Errorf("render.Gray: %d pixel values for a %dx%d image (want %d): pass one row of the batch, reshaped to width x height", len(pix), w, h, w*h)
	}
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i, v := range pix {
		if v != v {
			return nil, fmt.Errorf("render.Gray: pixel %d (x %d, y %d) is NaN", i, i%w, i/w)
		}
		img.Pix[i] = uint8(math.Round(float64(min(max(v, 0), 1)) * 255))
	}
	return img, nil
}

// TextWidth is the width in pixels Text draws s in.
func TextWidth(s string) int { return utf8.RuneCountInString(s) * GlyphWidth }

// Text draws s with its top-left corner at (x, y), in c (nil: black), clipped to dst.
func Text(dst draw.Image, x, y int, s string, c color.Color) {
	if c == nil {
		c = color.Black
	}
	d := font.Drawer{Dst: dst, Src: image.NewUniform(c), Face: face, Dot: fixed.P(x, y+face.Ascent)}
	d.DrawString(s)
}

// Grid draws cells in rows of opt.Columns on white, every cell the size of the largest image
// (scaled) and the widest caption, each image centred at its cell's top with its caption lines
// below, left-aligned. The cells' order is row by row.
func Grid(cells []Cell, opt GridOptions) (*image.RGBA, error) {
	if len(cells) == 0 {
		return nil, errors.New("render.Grid: no cells: pass at least one")
	}
	if opt.Columns < 0 || opt.Scale < 0 {
		return nil, fmt.Errorf("render.Grid: Columns %d, Scale %d: neither may be negative (0 chooses)", opt.Columns, opt.Scale)
	}
	scale, cols := max(opt.Scale, 1), opt.Columns
	if cols == 0 {
		cols = int(math.Ceil(math.Sqrt(float64(len(cells)))))
	}
	cols = min(cols, len(cells))
	rows := (len(cells) + cols - 1) / cols
	cw, imgH, lines := 0, 0, 0
	for i, c := range cells {
		if c.Image == nil || c.Image.Bounds().Empty() {
			return nil, fmt.Errorf("render.Grid: cell %d has no image (nil or empty): every cell needs one", i)
		}
		b := c.Image.Bounds()
		cw, imgH, lines = max(cw, b.Dx()*scale), max(imgH, b.Dy()*scale), max(lines, len(c.Caption))
		for _, l := range c.Caption {
			cw = max(cw, TextWidth(l.Text))
		}
	}
	ch := imgH + lines*LineHeight
	top := Pad
	if opt.Title != "" {
		top += LineHeight + Pad
	}
	w, h := Pad+cols*(cw+Pad), top+rows*(ch+Pad)
	if opt.Title != "" {
		w = max(w, 2*Pad+TextWidth(opt.Title))
	}
	if int64(w)*int64(h) > MaxPixels {
		return nil, fmt.Errorf("render.Grid: a %dx%d figure (%d cells at scale %d) is over MaxPixels = %d: draw fewer cells or a smaller scale", w, h, len(cells), scale, MaxPixels)
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(dst, dst.Bounds(), image.White, image.Point{}, draw.Src)
	if opt.Title != "" {
		Text(dst, Pad, Pad, opt.Title, color.Black)
	}
	for i, c := range cells {
		x0, y0 := Pad+(i%cols)*(cw+Pad), top+(i/cols)*(ch+Pad)
		b := c.Image.Bounds()
		drawScaled(dst, image.Pt(x0+(cw-b.Dx()*scale)/2, y0), c.Image, scale)
		for j, l := range c.Caption {
			Text(dst, x0, y0+imgH+j*LineHeight, l.Text, l.Color)
		}
	}
	return dst, nil
}

// drawScaled draws src at at, each pixel as a scale x scale square.
func drawScaled(dst *image.RGBA, at image.Point, src image.Image, scale int) {
	b := src.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			px := image.Rect(0, 0, scale, scale).Add(at.Add(image.Pt((x-b.Min.X)*scale, (y-b.Min.Y)*scale)))
			draw.Draw(dst, px, image.NewUniform(src.At(x, y)), image.Point{}, draw.Src)
		}
	}
}

// WritePNG encodes img as PNG into path durably: path holds the previous file or the whole new
// one, and on a failure no temporary file is left (tensorfile.WriteStream). The directory must
// exist.
func WritePNG(path string, img image.Image) error {
	if img == nil || img.Bounds().Empty() {
		return fmt.Errorf("render.WritePNG %s: no image (nil or empty)", path)
	}
	return tensorfile.WriteStream(path, 0o644, func(w io.Writer) error { return png.Encode(w, img) })
}
