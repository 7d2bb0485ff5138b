package metrics

import (
	"fmt"
	"math"
)

// ConfusionCounts counts one batch's (true, predicted) pairs into a classes x classes array:
// row i, column j counts examples of true class i predicted as j. Sum it over the split with
// Summed. A label outside [0, classes) is refused, naming the row.
func ConfusionCounts(truth, pred []int, classes int) (Array, error) {
	if len(truth) != len(pred) {
		return Array{}, fmt.Errorf("metrics: confusion: %d true labels, %d predictions; want one each per example", len(truth), len(pred))
	}
	if classes < 1 {
		return Array{}, fmt.Errorf("metrics: confusion: classes = %d, want >= 1", classes)
	}
	m := make([]float64, classes*classes)
	for r := range truth {
		t, p := truth[r], pred[r]
		if t < 0 || t >= classes || p < 0 || p >= classes {
			return Array{}, fmt.Errorf("metrics: confusion: row %d has true class %d, predicted %d; want both in [0, %d)", r, t, p, classes)
		}
		m[t*classes+p]++
	}
	return Array{Shape: []int{classes, classes}, Data: m}, nil
}

// Confusion reads a summed confusion array (square, whole counts) as the [][]int a logger's
// LogConfusion takes.
func Confusion(a Array) ([][]int, error) {
	if len(a.Shape) != 2 || a.Shape[0] != a.Shape[1] {
		return nil, fmt.Errorf("metrics: confusion: shape %v, want a square [classes, classes] array", a.Shape)
	}
	n := a.Shape[0]
	if len(a.Data) != n*n {
		return nil, fmt.Errorf("metrics: confusion: shape %v holds %d values, got %d", a.Shape, n*n, len(a.Data))
	}
	m := make([][]int, n)
	for i := range m {
		m[i] = make([]int, n)
		for j := range m[i] {
			v := a.Data[i*n+j]
			if v < 0 || v != math.Trunc(v) || v > math.MaxInt32 {
				return nil, fmt.Errorf("metrics: confusion: entry [%d][%d] is %g, want a whole count", i, j, v)
			}
			m[i][j] = int(v)
		}
	}
	return m, nil
}

// Normalize divides each row by its sum (the fraction of true class i predicted as j); a row
// with no examples stays all zeros.
func Normalize(m [][]int) [][]float64 {
	out := make([][]float64, len(m))
	for i, row := range m {
		out[i] = make([]float64, len(row))
		total := 0
		for _, v := range row {
			total += v
		}
		if total == 0 {
			continue
		}
		for j, v := range row {
			out[i][j] = float64(v) / float64(total)
		}
	}
	return out
}

// PerClassAccuracy is each class's recall: the diagonal over the row sum. A class with no
// examples is NaN (no accuracy to report, and not a perfect or a zero one).
func PerClassAccuracy(m [][]int) []float64 {
	acc := make([]float64, len(m))
	for i, row := range m {
		total := 0
		for _, v := range row {
			total += v
		}
		if total == 0 || i >= len(row) {
			acc[i] = math.NaN()
			continue
		}
		acc[i] = float64(row[i]) / float64(total)
	}
	return acc
}

// ArgMaxRows is each row's index of its largest value, for rows of width values laid out
// flat (logits [B, width] as a flat slice); the first of equal maxima wins.
func ArgMaxRows[T float32 | float64](flat []T, width int) ([]int, error) {
	if width < 1 || len(flat)%width != 0 {
		return nil, fmt.Errorf("metrics: argmax: %d values do not divide into rows of %d", len(flat), width)
	}
	out := make([]int, len(flat)/width)
	for r := range out {
		row := flat[r*width : (r+1)*width]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		out[r] = best
	}
	return out, nil
}
