package core

import (
	"maps"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// batchWidth returns a batch's leading-axis length, checking every field agrees.
func batchWidth(b prefetch.Batch) (int, error) { return prefetch.BatchWidth(b) }

// padRows returns t with its leading axis grown to width by repeating the last row.
func padRows(t *tensors.Tensor, width int) *tensors.Tensor { return prefetch.PadRows(t, width) }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
