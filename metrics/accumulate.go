package metrics

import (
	"fmt"
	"slices"
	"sort"
)

// Result is a split's accumulated metrics: Scalars holds each Mean divided and each Total
// summed, Arrays each Summed array, Collected each Collected list. A metric is in exactly one.
type Result struct {
	Scalars   map[string]float64
	Arrays    map[string]Array
	Collected map[string][]float64
}

// Names lists every metric of r, sorted.
func (r Result) Names() []string {
	var names []string
	for k := range r.Scalars {
		names = append(names, k)
	}
	for k := range r.Arrays {
		names = append(names, k)
	}
	for k := range r.Collected {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Accumulator adds a split's batches of metrics. The zero value is ready to use.
type Accumulator struct {
	kinds   map[string]Kind
	sums    map[string]float64
	counts  map[string]float64
	arrays  map[string]Array
	lists   map[string][]float64
	batches int
}

// Batches is how many batches Add has taken.
func (a *Accumulator) Batches() int { return a.batches }

// Add takes one batch's metrics. A metric must keep its kind, and a Summed array its shape,
// from batch to batch; Add refuses a change naming the metric, and then adds nothing of the
// batch.
func (a *Accumulator) Add(batch map[string]Metric) error {
	if a.kinds == nil {
		a.kinds, a.sums, a.counts = map[string]Kind{}, map[string]float64{}, map[string]float64{}
		a.arrays, a.lists = map[string]Array{}, map[string][]float64{}
	}
	names := make([]string, 0, len(batch))
	for k := range batch {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names { // check the whole batch first, so a refusal adds nothing
		if err := a.check(name, batch[name]); err != nil {
			return err
		}
	}
	for _, name := range names {
		m := batch[name]
		a.kinds[name] = m.Kind
		switch m.Kind {
		case KindMean:
			a.sums[name] += m.Sum
			a.counts[name] += m.Count
		case KindTotal:
			a.sums[name] += m.Sum
		case KindSummed:
			acc, ok := a.arrays[name]
			if !ok {
				a.arrays[name] = m.Array.Clone()
				continue
			}
			for i, v := range m.Array.Data {
				acc.Data[i] += v
			}
		case KindCollected:
			a.lists[name] = append(a.lists[name], m.Values...)
		}
	}
	a.batches++
	return nil
}

func (a *Accumulator) check(name string, m Metric) error {
	switch m.Kind {
	case KindMean:
		if m.Count < 0 {
			return fmt.Errorf("metrics: metric %q, batch %d: a Mean's count is %g; a count is never negative", name, a.batches, m.Count)
		}
	case KindTotal, KindCollected:
	case KindSummed:
		if _, err := NewArray(m.Array.Data, m.Array.Shape...); err != nil {
			return fmt.Errorf("metric %q, batch %d: %w", name, a.batches, err)
		}
		if prev, ok := a.arrays[name]; ok && !slices.Equal(prev.Shape, m.Array.Shape) {
			return fmt.Errorf("metrics: metric %q, batch %d: array shape %v, earlier batches %v; a summed array keeps its shape over the split", name, a.batches, m.Array.Shape, prev.Shape)
		}
	default:
		return fmt.Errorf("metrics: metric %q, batch %d: unknown kind %v; build it with Mean, Total, Summed or Collected", name, a.batches, m.Kind)
	}
	if k, ok := a.kinds[name]; ok && k != m.Kind {
		return fmt.Errorf("metrics: metric %q, batch %d: a %v, earlier batches a %v; a metric keeps its kind over the split", name, a.batches, m.Kind, k)
	}
	return nil
}

// Result is the split so far: means divided (0/0 is NaN), totals, arrays and lists as copies
// the caller may keep.
func (a *Accumulator) Result() Result {
	r := Result{Scalars: map[string]float64{}, Arrays: map[string]Array{}, Collected: map[string][]float64{}}
	for name, k := range a.kinds {
		switch k {
		case KindMean:
			r.Scalars[name] = a.sums[name] / a.counts[name]
		case KindTotal:
			r.Scalars[name] = a.sums[name]
		case KindSummed:
			r.Arrays[name] = a.arrays[name].Clone()
		case KindCollected:
			r.Collected[name] = slices.Clone(a.lists[name])
		}
	}
	return r
}
