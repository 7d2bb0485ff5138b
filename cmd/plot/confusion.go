package plot

import (
	"encoding/json"
	"fmt"
	"image/color"
	"strconv"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Confusion is one confusion line: Matrix[i][j] counts examples of true class i predicted as
// class j; Labels names the classes in that order (nil when the line has none).
type Confusion struct {
	Epoch  int
	Labels []string
	Matrix [][]int
}

// confusion reads a confusion line: an epoch, a square matrix of counts and, when present, one
// label a class.
func (p *parser) confusion(fields map[string]json.RawMessage) error {
	var c Confusion
	if err := field(fields, "epoch", &c.Epoch); err != nil {
		return err
	}
	raw, ok := fields["matrix"]
	if !ok {
		return fmt.Errorf("%w: no %q field", ErrMalformed, "matrix")
	}
	if err := json.Unmarshal(raw, &c.Matrix); err != nil || len(c.Matrix) == 0 {
		return fmt.Errorf("%w: \"matrix\" is %s, want a non-empty array of arrays of counts", ErrMalformed, excerpt(raw))
	}
	for i, row := range c.Matrix {
		if len(row) != len(c.Matrix) {
			return fmt.Errorf("%w: confusion matrix row %d has %d entries, want %d (a square matrix)", ErrMalformed, i, len(row), len(c.Matrix))
		}
	}
	if raw, ok := fields["labels"]; ok {
		if err := json.Unmarshal(raw, &c.Labels); err != nil {
			return fmt.Errorf("%w: \"labels\" is %s, want an array of strings", ErrMalformed, excerpt(raw))
		}
		if c.Labels != nil && len(c.Labels) != len(c.Matrix) {
			return fmt.Errorf("%w: %d confusion labels for %d classes", ErrMalformed, len(c.Labels), len(c.Matrix))
		}
	}
	p.run.Confusions = append(p.run.Confusions, c)
	return nil
}

// cellGrid is a confusion matrix as a heat map's grid: column j is predicted class j, row r is
// true class n-1-r (class 0 at the top, as the matrix is read), and the value is the cell's
// fraction of its row, so a rare class's errors show as clearly as a common one's.
type cellGrid struct{ m [][]int }

func (g cellGrid) Dims() (c, r int)   { return len(g.m), len(g.m) }
func (g cellGrid) X(c int) float64    { return float64(c) }
func (g cellGrid) Y(r int) float64    { return float64(r) }
func (g cellGrid) Z(c, r int) float64 { return rowFraction(g.m, len(g.m)-1-r, c) }

func rowFraction(m [][]int, i, j int) float64 {
	total := 0
	for _, v := range m[i] {
		total += v
	}
	if total == 0 {
		return 0
	}
	return float64(m[i][j]) / float64(total)
}

// shades runs from white to the figures' dark blue.
type shades []color.Color

func (s shades) Colors() []color.Color { return s }

func blues(n int) shades {
	s := make(shades, n)
	for i := range s {
		f := float64(i) / float64(n-1)
		mix := func(to uint8) uint8 { return uint8(255 - f*(255-float64(to)) + 0.5) }
		s[i] = color.RGBA{R: mix(smoothColor.R), G: mix(smoothColor.G), B: mix(smoothColor.B), A: 0xff}
	}
	return s
}

// confusionFigure draws c as a heat map with each cell's count written in it (white on the
// darker half of the shades).
func confusionFigure(file string, c Confusion) figure {
	n := len(c.Matrix)
	p := gplot.New()
	p.Title.Text = fmt.Sprintf("Confusion matrix, epoch %d (shade: fraction of the true class)", c.Epoch)
	p.X.Label.Text = "predicted class"
	p.Y.Label.Text = "true class"
	h := plotter.NewHeatMap(cellGrid{c.Matrix}, blues(64))
	h.Min, h.Max = 0, 1
	p.Add(h)
	name := func(i int) string {
		if c.Labels != nil {
			return c.Labels[i]
		}
		return strconv.Itoa(i)
	}
	var xt, yt []gplot.Tick
	var dark, light plotter.XYLabels
	total, diag := 0, 0
	for i := 0; i < n; i++ {
		xt = append(xt, gplot.Tick{Value: float64(i), Label: name(i)})
		yt = append(yt, gplot.Tick{Value: float64(n - 1 - i), Label: name(i)})
		for j := 0; j < n; j++ {
			total += c.Matrix[i][j]
			if i == j {
				diag += c.Matrix[i][j]
			}
			set := &dark
			if rowFraction(c.Matrix, i, j) > 0.5 {
				set = &light
			}
			set.XYs = append(set.XYs, plotter.XY{X: float64(j), Y: float64(n - 1 - i)})
			set.Labels = append(set.Labels, strconv.Itoa(c.Matrix[i][j]))
		}
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = gplot.ConstantTicks(xt), gplot.ConstantTicks(yt)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = -0.5, float64(n)-0.5, -0.5, float64(n)-0.5
	p.X.Padding, p.Y.Padding = 0, 0
	for _, set := range []struct {
		l     plotter.XYLabels
		color color.Color
	}{{dark, color.Black}, {light, color.White}} {
		if len(set.l.XYs) == 0 {
			continue
		}
		labels, err := plotter.NewLabels(set.l)
		if err != nil {
			continue // only an empty set fails, and none is drawn
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Color = set.color
			labels.TextStyle[i].XAlign, labels.TextStyle[i].YAlign = -0.5, -0.5
			labels.TextStyle[i].Font.Size = vg.Points(fontSize(n))
		}
		p.Add(labels)
	}
	acc := "no examples"
	if total > 0 {
		acc = fmt.Sprintf("accuracy %s", num(float64(diag)/float64(total)))
	}
	return figure{file: file, plot: p,
		about:  fmt.Sprintf("confusion matrix of epoch %d as a heat map (true class down, predicted across, counts in the cells)", c.Epoch),
		values: fmt.Sprintf("%d classes, %d examples, %s", n, total, acc)}
}

// fontSize shrinks the cell counts as the classes grow, so that they fit their cells.
func fontSize(classes int) float64 {
	switch {
	case classes <= 12:
		return 11
	case classes <= 30:
		return 7
	}
	return 4
}
