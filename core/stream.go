package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/prefetch"
)

// The batch stream: every split is a prefetch declaration (wrapped at the defaults at setup
// unless it already is one, or prefetch.NoPrefetch), and the train and eval loops consume one
// prefetch.Stream per epoch. Core gives it the engine's transfer (Place) and free; prefetch owns the
// goroutines, ordering, credits and teardown.

// batchStream starts split's stream for one epoch over batches [from, to) (to 0: all), placing
// the routed fields and padding short batches to pad rows when pad > 0 (eval).
func (n *Nitro) batchStream(src prefetch.Source, epoch int, keys []string, pad, from, to int) (*prefetch.Stream[prefetch.Batch], error) {
	return prefetch.Start(context.Background(), src, epoch, n.streamConfig(keys, pad, from, to))
}

// streamConfig is batchStream's configuration.
func (n *Nitro) streamConfig(keys []string, pad, from, to int) prefetch.StreamConfig[prefetch.Batch] {
	return prefetch.StreamConfig[prefetch.Batch]{
		Transfer: func(b prefetch.Batch) (prefetch.Batch, error) {
			placed, err := n.eng.Place(b, keys)
			return placed, err
		},
		Free: func(b prefetch.Batch) error { return engine.FreeBatch(b, keys) },
		Pad:  pad, From: from, To: to, Warn: n.spec.warn,
	}
}

// next takes the stream's next placed batch, counting its uploads; running out early is an
// internal error (the stream was bounded to whole optimizer steps). A failed batch is reported
// as what (e.g. "train") batch i and its own error.
func (n *Nitro) next(s *prefetch.Stream[prefetch.Batch], keys []string, what string) (prefetch.Item[prefetch.Batch], error) {
	it, ok, err := s.Next()
	var be *prefetch.BatchError
	switch {
	case errors.As(err, &be) && (be.Op == "Transfer" || be.Op == "BatchAt"):
		return it, fmt.Errorf("%s batch %d: %w", what, be.Index, be.Err)
	case err != nil:
		return it, err
	}
	if !ok {
		return it, fmt.Errorf("internal: the batch stream ended early")
	}
	n.eng.CountBatchUploads(len(keys))
	return it, nil
}

// wrapData declares every split for prefetch at the run's defaults (WithPrefetch), leaving
// sources that already are declarations (prefetch.Prefetch, prefetch.NoPrefetch) as they are.
func (bld *builder) wrapData() error {
	su := &bld.n.spec
	defaults := prefetch.Defaults()
	if su.opts.prefetch != nil {
		defaults = *su.opts.prefetch
	}
	source := "default (prefetch.Defaults)"
	if su.opts.prefetch != nil {
		source = "run option WithPrefetch"
	}
	d, err := prefetch.WrapData(su.data, defaults)
	if err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	su.prefetchFrom = map[string]string{}
	for name, src := range su.data {
		su.prefetchFrom[name] = source
		if d[name] == src {
			su.prefetchFrom[name] = "declared by BuildData"
		}
	}
	su.data = d
	return nil
}

// describePrefetch is a split's prefetch declaration in one line, for the binding report.
func describePrefetch(src prefetch.Source) string {
	if d, ok := src.(prefetch.Describer); ok {
		return d.Describe()
	}
	return "prefetch: inline"
}
