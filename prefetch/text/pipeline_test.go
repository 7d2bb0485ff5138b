package text

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/nitro-go/nitro/prefetch"
)

// TestPrefetchFanout feeds a train split through prefetch's fan-out (four workers calling
// BatchAt at once, a few files mapped at a time): the epoch arrives in order, exactly the batches
// BatchAt serves for that epoch.
func TestPrefetchFanout(t *testing.T) {
	dir, _ := randomTree(t, 40)
	data := mustSplit(t, Config{Path: dir, Context: 32, BatchSize: 8, BatchesPerEpoch: 40, Seed: 8, Val: 0.2, MaxMapped: 4})
	train := data["train"].(*Source)
	it, err := prefetch.Prefetch(train, prefetch.Options{Workers: 4, DeviceBatches: 2, HostBatches: 8})
	if err != nil {
		t.Fatal(err)
	}
	if it.Path() != prefetch.PathFanout {
		t.Fatalf("prefetch path %v, want the fan-out", it.Path())
	}
	for _, epoch := range []int{0, 1} {
		st, err := prefetch.Start(context.Background(), it, epoch, prefetch.StreamConfig[prefetch.Batch]{
			Transfer: func(b prefetch.Batch) (prefetch.Batch, error) { return b, nil },
			Free:     func(prefetch.Batch) error { return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for {
			item, ok, err := st.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, rows(t, item.Device)...)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		// Start called BeginEpoch(epoch): BatchAt now serves the same epoch.
		if want := allRows(t, train); !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("epoch %d: the fan-out delivered %d windows, not BatchAt's %d in order", epoch, len(got), len(want))
		}
	}
	// CloseAll looks through the declaration.
	if err := CloseAll(prefetch.Data{"train": it}); err != nil {
		t.Fatal(err)
	}
	if _, err := train.BatchAt(0); err == nil {
		t.Fatal("BatchAt after CloseAll of its declaration did not fail")
	}
}
