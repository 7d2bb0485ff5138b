package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/nitro-go/nitro/prefetch"
)

// The batch stream: every split is a prefetch declaration (wrapped at the defaults at setup
// unless it already is one, or NoPrefetch), and the train and eval loops consume one
// prefetch.Stream per epoch. Core gives it the transfer (place) and the free; prefetch owns the
// goroutines, ordering, credits and teardown.

// batchStream starts split's stream for one epoch over batches [from, to) (to 0: all), placing
// the routed fields and padding short batches to pad rows when pad > 0 (eval).
func (n *Nitro) batchStream(src Source, epoch int, keys []string, pad, from, to int) (*prefetch.Stream[Batch], error) {
	return prefetch.Start(context.Background(), src, epoch, n.streamConfig(keys, pad, from, to))
}

// streamConfig is batchStream's configuration.
func (n *Nitro) streamConfig(keys []string, pad, from, to int) prefetch.StreamConfig[Batch] {
	return prefetch.StreamConfig[Batch]{
		Transfer: func(b Batch) (Batch, error) { return n.place(b, keys) },
		Free:     func(b Batch) error { return freeBatch(b, keys) },
		Pad:      pad, From: from, To: to, Warn: n.warn,
	}
}

// place uploads a host batch's routed fields to the device. It runs on the stream's transfer
// goroutine (or inline), so it touches no Nitro state: the consumer counts the uploads. On error
// it frees what it placed, as the stream requires.
func (n *Nitro) place(b Batch, keys []string) (placed Batch, err error) {
	placed = make(Batch, len(keys))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("placing the batch on the device: %v", r)
		}
		if err != nil {
			err = errors.Join(err, freeBatch(placed, keys))
			placed = nil
		}
	}()
	for _, k := range keys {
		t := b[k]
		if t == nil {
			return placed, fmt.Errorf("batch field %q is missing", k)
		}
		if m := n.devs.mesh; m != nil {
			// Over a mesh the field goes to the devices as shards, one per device, never whole.
			if err := m.Stage(t); err != nil {
				return placed, fmt.Errorf("batch field %q to the devices: %w", k, err)
			}
		} else if !t.IsOnDevice(0) {
			if err := t.MaterializeOnDevice(n.backend.Backend, false, 0); err != nil {
				return placed, fmt.Errorf("batch field %q to the device: %w", k, err)
			}
		}
		placed[k] = t
	}
	return placed, nil
}

// next takes the stream's next placed batch, counting its uploads; running out early is an
// internal error (the stream was bounded to whole optimizer steps). A failed batch is reported
// as what (e.g. "train") batch i and its own error.
func (n *Nitro) next(s *prefetch.Stream[Batch], keys []string, what string) (prefetch.Item[Batch], error) {
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
	n.uploads.Batch += len(keys)
	return it, nil
}

// wrapData declares every split for prefetch at the run's defaults (WithPrefetch), leaving
// sources that already are declarations (prefetch.Prefetch, prefetch.NoPrefetch) as they are.
func (n *Nitro) wrapData() error {
	defaults := prefetch.Defaults()
	if n.opts.prefetch != nil {
		defaults = *n.opts.prefetch
	}
	source := "default (prefetch.Defaults)"
	if n.opts.prefetch != nil {
		source = "run option WithPrefetch"
	}
	d, err := prefetch.WrapData(n.data, defaults)
	if err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	n.prefetchFrom = map[string]string{}
	for name, src := range n.data {
		n.prefetchFrom[name] = source
		if d[name] == src {
			n.prefetchFrom[name] = "declared by BuildData"
		}
	}
	n.data = d
	return nil
}

// describePrefetch is a split's prefetch declaration in one line, for the binding report.
func describePrefetch(src Source) string {
	if d, ok := src.(prefetch.Describer); ok {
		return d.Describe()
	}
	return "prefetch: inline"
}
