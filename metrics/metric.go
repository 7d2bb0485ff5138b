package metrics

import (
	"fmt"
	"slices"
)

// Kind is how a metric's per-batch values combine over a split.
type Kind int

const (
	// KindMean sums a scalar numerator and a scalar denominator over the split and divides.
	KindMean Kind = iota
	// KindTotal sums a scalar and does not divide.
	KindTotal
	// KindSummed sums an array elementwise and does not divide; the finalizer reads the array.
	KindSummed
	// KindCollected appends values over the split; the finalizer reads them in batch order.
	KindCollected
)

func (k Kind) String() string {
	switch k {
	case KindMean:
		return "mean"
	case KindTotal:
		return "total"
	case KindSummed:
		return "summed array"
	case KindCollected:
		return "collected"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Array is a dense row-major array of float64 values; a nil or empty Shape is a scalar.
type Array struct {
	Shape []int
	Data  []float64
}

// NewArray checks that data holds exactly the values shape asks for.
func NewArray(data []float64, shape ...int) (Array, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return Array{}, fmt.Errorf("metrics: array shape %v has a negative dimension", shape)
		}
		n *= d
	}
	if n != len(data) {
		return Array{}, fmt.Errorf("metrics: array shape %v holds %d values, got %d", shape, n, len(data))
	}
	return Array{Shape: slices.Clone(shape), Data: data}, nil
}

// Clone is a deep copy.
func (a Array) Clone() Array { return Array{Shape: slices.Clone(a.Shape), Data: slices.Clone(a.Data)} }

// Metric is one batch's contribution to one metric; build it with Mean, Total, Summed or
// Collected.
type Metric struct {
	Kind   Kind
	Sum    float64 // KindMean and KindTotal: the numerator
	Count  float64 // KindMean: the denominator
	Array  Array   // KindSummed: the array; its shape must be the same in every batch
	Values []float64
}

// Mean is a scalar sum over a scalar count; the split's value is sum of sums / sum of counts.
func Mean(sum, count float64) Metric { return Metric{Kind: KindMean, Sum: sum, Count: count} }

// Total is a scalar summed over the split and not divided (a count of errors, of items).
func Total(sum float64) Metric { return Metric{Kind: KindTotal, Sum: sum} }

// Summed is an array summed elementwise over the split and not divided: the "no count" rule
// for arrays, which a confusion matrix needs.
func Summed(a Array) Metric { return Metric{Kind: KindSummed, Array: a} }

// Collected is values appended over the split, in batch order: scores to rank for an AUC,
// detections to match for an mAP.
func Collected(values []float64) Metric { return Metric{Kind: KindCollected, Values: values} }
