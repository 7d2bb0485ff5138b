package core

import (
	"maps"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// The data contract lives in package prefetch; these aliases keep code written against core
// compiling unchanged. See prefetch for the documentation of each, including the goroutine-safety
// a Source must give.
type (
	// Batch is one batch of host arrays by field name, the batch on the leading axis of each.
	Batch = prefetch.Batch
	// Source is an index-addressable batch source: batch i of Len() is BatchAt(i).
	Source = prefetch.Source
	// Data is what BuildData returns: splits by name ("train", "val", "test", ...).
	Data = prefetch.Data
	// ArrayOptions configures NewArrayBatches.
	ArrayOptions = prefetch.ArrayOptions
	// ArrayBatches is an in-memory Source over whole-dataset arrays sharing a leading axis.
	ArrayBatches = prefetch.ArrayBatches
)

// NewArrayBatches cuts whole-dataset arrays (one per field, same leading length) into batches.
// It is prefetch.NewArrayBatches.
func NewArrayBatches(fields map[string]*tensors.Tensor, batchSize int, opts ArrayOptions) (*ArrayBatches, error) {
	return prefetch.NewArrayBatches(fields, batchSize, opts)
}

// batchWidth returns a batch's leading-axis length, checking every field agrees.
func batchWidth(b Batch) (int, error) { return prefetch.BatchWidth(b) }

// padRows returns t with its leading axis grown to width by repeating the last row.
func padRows(t *tensors.Tensor, width int) *tensors.Tensor { return prefetch.PadRows(t, width) }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// NoPrefetch declares src to be fed inline, on the training goroutine, with no read-ahead
// (prefetch.NoPrefetch): for a source whose BatchAt must run in step with the loop.
func NoPrefetch(src Source) Source { return prefetch.NoPrefetch(src) }
