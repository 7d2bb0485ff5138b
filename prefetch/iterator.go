package prefetch

import (
	"fmt"
	"runtime"
	"sort"
	"sync/atomic"
)

// Options are a prefetch declaration's settings. Every count must be positive: a split that
// must run inline says so with NoPrefetch, never with a zero.
type Options struct {
	// Workers is how many goroutines build host batches at once (fan-out). More than one needs
	// a source that implements BeginEpoch as well as BatchAt (an EpochSource); any other source
	// is fed by one producer goroutine, with a warning.
	Workers int
	// DeviceBatches is how many transferred batches wait, staged ahead, for the consumer.
	// Resident device memory is DeviceBatches+2 batches: the staged ones, one in the transfer
	// goroutine's hand and one in the consumer's.
	DeviceBatches int
	// HostBatches is how many host batches may exist at once, built but not yet transferred:
	// the workers' hands, the hand-off channel and the reorder buffer together. It may not be
	// smaller than Workers.
	HostBatches int
	// Unordered emits batches as they finish instead of in index order. Every batch is still
	// delivered exactly once, but a fixed seed no longer reproduces a run bitwise across worker
	// counts. The zero value, ordered delivery, is the default.
	Unordered bool
}

// DefaultWorkers is the framework's default worker count: min(4, GOMAXPROCS).
func DefaultWorkers() int { return max(1, min(4, runtime.GOMAXPROCS(0))) }

// Defaults returns the framework's default settings: DefaultWorkers workers, one staged device
// batch, and two host batches per worker (so every worker can build one while another waits to
// be transferred).
func Defaults() Options {
	w := DefaultWorkers()
	return Options{Workers: w, DeviceBatches: 1, HostBatches: 2 * w}
}

// Validate reports the first setting Prefetch refuses, naming the field.
func (o Options) Validate() error {
	if o.Workers <= 0 {
		return fmt.Errorf("prefetch: Workers %d: must be positive (NoPrefetch declines prefetch)", o.Workers)
	}
	if o.DeviceBatches <= 0 {
		return fmt.Errorf("prefetch: DeviceBatches %d: must be positive; a split that must run inline declares it with NoPrefetch(src), not with a zero", o.DeviceBatches)
	}
	if o.HostBatches <= 0 {
		return fmt.Errorf("prefetch: HostBatches %d: must be positive", o.HostBatches)
	}
	if o.HostBatches < o.Workers {
		return fmt.Errorf("prefetch: HostBatches %d < Workers %d: every worker needs a host-batch credit to build, and with ordered delivery the batch the reorder buffer waits for must be inside the host window, or a straggler deadlocks delivery instead of stalling it; use HostBatches >= Workers (the default is 2*Workers)", o.HostBatches, o.Workers)
	}
	return nil
}

// Iterator is a prefetch declaration: a source and its settings,
// nothing else. It starts no goroutine; Start realizes it once the caller's transfer exists.
//
// It is itself a Source: Len, BatchAt, BeginEpoch, DropsPartial and SampleOrdered pass straight
// through to the wrapped source, so iterating it by hand yields the source's own batches in
// order, with no goroutine to leak. BeginEpoch is a no-op returning nil when the source has none; that makes
// every Iterator an EpochSource by type, so ask FanoutCapable, not a type assertion, whether
// the source underneath can fan out.
type Iterator struct {
	src    Source
	opts   Options
	warned atomic.Bool // the one-producer fallback was reported
}

var (
	_ EpochSource    = (*Iterator)(nil)
	_ PartialDropper = (*Iterator)(nil)
	_ SampleOrderer  = (*Iterator)(nil)
)

// Prefetch declares that src is fed through the prefetch pipeline with opts; the settings are
// checked here (see Options.Validate). When src is itself a declaration (an Iterator or a
// NoPrefetch), the outer one wins: the new Iterator wraps the source underneath.
func Prefetch(src Source, opts Options) (*Iterator, error) {
	if src == nil {
		return nil, fmt.Errorf("prefetch: Prefetch of a nil source")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Iterator{src: base(src), opts: opts}, nil
}

// Source returns the wrapped source.
func (it *Iterator) Source() Source { return it.src }

// Options returns the declared settings.
func (it *Iterator) Options() Options { return it.opts }

// Len is the source's Len.
func (it *Iterator) Len() int { return it.src.Len() }

// BatchAt is the source's BatchAt, on the caller's goroutine.
func (it *Iterator) BatchAt(i int) (Batch, error) { return it.src.BatchAt(i) }

// BeginEpoch is the source's BeginEpoch, or nil when it has none.
func (it *Iterator) BeginEpoch(epoch int) error { return beginEpoch(it.src, epoch) }

// DropsPartial is the source's DropsPartial, or false when it does not say.
func (it *Iterator) DropsPartial() bool { return dropsPartial(it.src) }

// SampleOrdered is the source's SampleOrdered, or false when it does not say.
func (it *Iterator) SampleOrdered() bool { return OrdersSamples(it.src) }

// Path is the path Start takes for this declaration: PathFanout when Workers > 1 and the
// source is FanoutCapable, PathProducer otherwise.
func (it *Iterator) Path() Path {
	if it.opts.Workers > 1 && FanoutCapable(it.src) {
		return PathFanout
	}
	return PathProducer
}

// Describe is the resolved settings in one line, for the binding report.
func (it *Iterator) Describe() string {
	o := it.opts
	order := "ordered"
	if o.Unordered {
		order = "unordered"
	}
	switch {
	case it.Path() == PathFanout:
		return fmt.Sprintf("prefetch: fan-out, %d workers, %d host batches, %d device batches staged (%d resident), %s",
			o.Workers, o.HostBatches, o.DeviceBatches, o.DeviceBatches+2, order)
	case o.Workers > 1:
		return fmt.Sprintf("prefetch: one producer (Workers %d unused: %T has no BeginEpoch), %d device batches staged (%d resident)",
			o.Workers, it.src, o.DeviceBatches, o.DeviceBatches+2)
	default:
		return fmt.Sprintf("prefetch: one producer, %d device batches staged (%d resident)", o.DeviceBatches, o.DeviceBatches+2)
	}
}

// NoPrefetchSource is a source marked to be fed inline (see NoPrefetch).
type NoPrefetchSource struct{ src Source }

var (
	_ EpochSource    = (*NoPrefetchSource)(nil)
	_ PartialDropper = (*NoPrefetchSource)(nil)
)

// NoPrefetch marks src to be fed inline: the consumer's Next calls BatchAt and the transfer on
// its own goroutine, and Wrap leaves it alone. It is the only way to decline prefetch, and it is
// deliberately a visible declaration rather than a zero in a numeric setting. Like Iterator it
// passes every Source method straight through. NoPrefetch of a declaration wraps the source
// underneath.
func NoPrefetch(src Source) *NoPrefetchSource { return &NoPrefetchSource{src: base(src)} }

// Source returns the wrapped source.
func (n *NoPrefetchSource) Source() Source { return n.src }

// Len is the source's Len.
func (n *NoPrefetchSource) Len() int { return n.src.Len() }

// BatchAt is the source's BatchAt.
func (n *NoPrefetchSource) BatchAt(i int) (Batch, error) { return n.src.BatchAt(i) }

// BeginEpoch is the source's BeginEpoch, or nil when it has none.
func (n *NoPrefetchSource) BeginEpoch(epoch int) error { return beginEpoch(n.src, epoch) }

// DropsPartial is the source's DropsPartial, or false when it does not say.
func (n *NoPrefetchSource) DropsPartial() bool { return dropsPartial(n.src) }

// SampleOrdered is the source's SampleOrdered, or false when it does not say.
func (n *NoPrefetchSource) SampleOrdered() bool { return OrdersSamples(n.src) }

// Describe is the declaration in one line, for the binding report.
func (n *NoPrefetchSource) Describe() string { return "prefetch: inline (NoPrefetch)" }

// Wrap is the automatic prefetch for one split: src declared with Prefetch(src, defaults),
// unless it already is a declaration (an *Iterator or a *NoPrefetchSource), which is returned
// as it is.
func Wrap(src Source, defaults Options) (Source, error) {
	switch src.(type) {
	case *Iterator, *NoPrefetchSource:
		return src, nil
	}
	return Prefetch(src, defaults)
}

// WrapData applies Wrap to every split, in a new Data.
func WrapData(d Data, defaults Options) (Data, error) {
	out := make(Data, len(d))
	names := make([]string, 0, len(d))
	for name := range d {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w, err := Wrap(d[name], defaults)
		if err != nil {
			return nil, fmt.Errorf("split %q: %w", name, err)
		}
		out[name] = w
	}
	return out, nil
}

// FanoutCapable reports whether the source underneath any declaration implements both halves
// of the index-addressable contract, BatchAt and BeginEpoch. Both, deliberately: a source that
// re-plans its epochs anywhere but BeginEpoch would, fanned out, serve every epoch on a stale
// plan, so such a source gets one producer and a warning instead.
func FanoutCapable(src Source) bool {
	_, ok := base(src).(EpochSource)
	return ok
}

// Path is which of the three feeding paths a stream takes.
type Path string

// The three paths, one consumer loop.
const (
	PathFanout   Path = "fan-out"      // N workers, one transfer goroutine, a reorder buffer
	PathProducer Path = "one producer" // one goroutine builds and transfers in order
	PathInline   Path = "inline"       // Next builds and transfers on the consumer's goroutine
)

// base strips prefetch declarations off src.
func base(src Source) Source {
	for {
		switch s := src.(type) {
		case *Iterator:
			src = s.src
		case *NoPrefetchSource:
			src = s.src
		default:
			return src
		}
	}
}

func beginEpoch(src Source, epoch int) error {
	if es, ok := src.(EpochSource); ok {
		return es.BeginEpoch(epoch)
	}
	return nil
}

func dropsPartial(src Source) bool {
	pd, ok := src.(PartialDropper)
	return ok && pd.DropsPartial()
}

// Describer is a source or declaration that can say in one line how it is fed (inline, fan-out,
// workers), for the run's config report.
type Describer interface {
	Describe() string
}

var (
	_ Describer = (*Iterator)(nil)
	_ Describer = (*NoPrefetchSource)(nil)
)
