package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// The data contract moved to prefetch; core's names are aliases, so values pass between the two
// without conversion. (The data tests themselves live in prefetch.)
func TestDataAliasesArePrefetchTypes(t *testing.T) {
	var b prefetch.Batch = prefetch.Batch{"x": tensors.FromFlatDataAndDimensions([]float32{1, 2}, 2)}
	var pb prefetch.Batch = b
	var a *prefetch.ArrayBatches
	a, err := prefetch.NewArrayBatches(pb, 1, prefetch.ArrayOptions{Shuffle: true, Seed: 3, DropPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	var (
		_ prefetch.ArrayOptions   = prefetch.ArrayOptions{}
		_ prefetch.EpochSource    = a
		_ prefetch.PartialDropper = a
		_ prefetch.Source         = prefetch.Source(a)
	)
	data := prefetch.Data{"train": a}
	var pd prefetch.Data = data
	if pd["train"].Len() != 2 {
		t.Errorf("train split Len = %d, want 2", pd["train"].Len())
	}
}
