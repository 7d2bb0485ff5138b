package metrics

import (
	"fmt"
	"hash/fnv"
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

// Reduce makes the accumulator the whole run's over world processes: sum adds a flat buffer
// over them in place (every process calls Reduce at the same point), holding, names sorted, each
// Mean's sum and count, each Total's sum and each Summed array's values, then the batch count.
// Its first element is a hash of that layout (names, kinds, shapes): after the sum it must be
// world times this process's, or the processes accumulated different metrics and Reduce refuses
// rather than add unrelated numbers. A Collected metric is refused, naming it: its values need
// gathering, not summing.
func (a *Accumulator) Reduce(world int, sum func([]float64) error) error {
	names := make([]string, 0, len(a.kinds))
	for k := range a.kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	layout := fnv.New32a()
	buf := []float64{0}
	for _, name := range names {
		fmt.Fprintf(layout, "%s %v", name, a.kinds[name])
		switch a.kinds[name] {
		case KindMean:
			buf = append(buf, a.sums[name], a.counts[name])
		case KindTotal:
			buf = append(buf, a.sums[name])
		case KindSummed:
			fmt.Fprintf(layout, " %v", a.arrays[name].Shape)
			buf = append(buf, a.arrays[name].Data...)
		case KindCollected:
			return fmt.Errorf("metrics: metric %q is Collected: its values cannot be summed over %d processes; make it a Mean, Total or Summed array, or run one process", name, world)
		}
		layout.Write([]byte{0})
	}
	buf[0] = float64(layout.Sum32())
	buf = append(buf, float64(a.batches))
	mine := buf[0]
	if err := sum(buf); err != nil {
		return err
	}
	if buf[0] != float64(world)*mine {
		return fmt.Errorf("metrics: the %d processes accumulated different metrics (names, kinds or array shapes; this one has %v): every process must evaluate the same metrics", world, names)
	}
	i := 1
	for _, name := range names {
		switch a.kinds[name] {
		case KindMean:
			a.sums[name], a.counts[name] = buf[i], buf[i+1]
			i += 2
		case KindTotal:
			a.sums[name] = buf[i]
			i++
		case KindSummed:
			i += copy(a.arrays[name].Data, buf[i:])
		}
	}
	a.batches = int(buf[i])
	return nil
}
