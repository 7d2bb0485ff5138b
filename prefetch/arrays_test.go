package prefetch_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// indexed returns n samples whose "id" is the sample index (int32 [n]) and whose "x" row is
// [i, 10i] (float32 [n, 2]), so every batch row says which sample it came from.
func indexed(t testing.TB, n, batch int, opts prefetch.ArrayOptions) *prefetch.ArrayBatches {
	t.Helper()
	ids := make([]int32, n)
	xs := make([]float32, 2*n)
	for i := range n {
		ids[i] = int32(i)
		xs[2*i], xs[2*i+1] = float32(i), float32(10*i)
	}
	a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"id": tensors.FromFlatDataAndDimensions(ids, n),
		"x":  tensors.FromFlatDataAndDimensions(xs, n, 2),
	}, batch, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// batchIDs reads batch i of a and returns its sample ids, checking that each row's x matches its
// id. It reports through t.Errorf, so it may run on any goroutine.
func batchIDs(t testing.TB, a *prefetch.ArrayBatches, i int) []int32 {
	t.Helper()
	b, err := a.BatchAt(i)
	if err != nil {
		t.Errorf("batch %d: %v", i, err)
		return nil
	}
	id := b["id"].Value().([]int32)
	x := b["x"].Value().([][]float32)
	for r := range id {
		if x[r][0] != float32(id[r]) || x[r][1] != float32(10*id[r]) {
			t.Errorf("batch %d row %d: id %d but x %v: fields were permuted differently", i, r, id[r], x[r])
		}
	}
	return id
}

// order reads every batch of a and returns the sample ids in the order served.
func order(t testing.TB, a *prefetch.ArrayBatches) []int32 {
	t.Helper()
	var ids []int32
	for i := 0; i < a.Len(); i++ {
		ids = append(ids, batchIDs(t, a, i)...)
	}
	if t.Failed() {
		t.FailNow()
	}
	return ids
}

func TestArrayBatchesLen(t *testing.T) {
	for _, c := range []struct {
		n, batch int
		drop     bool
		want     int
	}{
		{70, 16, false, 5}, {70, 16, true, 4}, {64, 16, false, 4}, {64, 16, true, 4},
		{10, 16, false, 1}, {10, 16, true, 0}, {1, 1, true, 1},
	} {
		a := indexed(t, c.n, c.batch, prefetch.ArrayOptions{DropPartial: c.drop})
		if a.Len() != c.want || a.Samples() != c.n || a.DropsPartial() != c.drop {
			t.Errorf("n=%d batch=%d drop=%v: Len %d Samples %d DropsPartial %v; want Len %d",
				c.n, c.batch, c.drop, a.Len(), a.Samples(), a.DropsPartial(), c.want)
		}
	}
}

func TestArrayBatchesBatchAt(t *testing.T) {
	a := indexed(t, 70, 16, prefetch.ArrayOptions{})
	b, err := a.BatchAt(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := b["id"].Value().([]int32); !slices.Equal(got, seq(16, 32)) {
		t.Errorf("batch 1 ids = %v, want 16..31", got)
	}
	if dims := b["x"].Shape().Dimensions; !slices.Equal(dims, []int{16, 2}) {
		t.Errorf("batch 1 x shape %v, want [16 2]", dims)
	}
	last, err := a.BatchAt(4)
	if err != nil {
		t.Fatal(err)
	}
	if got := last["id"].Value().([]int32); !slices.Equal(got, seq(64, 70)) {
		t.Errorf("short final batch ids = %v, want 64..69", got)
	}
	if got := last["x"].Value().([][]float32); fmt.Sprint(got[5]) != "[69 690]" {
		t.Errorf("short final batch's last x row = %v, want [69 690]", got[5])
	}
	// Fresh tensors: writing a batch does not reach the source.
	b["id"].MutableFlatData(func(flat any) { flat.([]int32)[0] = -1 })
	again, _ := a.BatchAt(1)
	if again["id"].Value().([]int32)[0] != 16 {
		t.Errorf("writing a served batch changed the source")
	}
	// Unshuffled, BeginEpoch changes nothing.
	if err := a.BeginEpoch(3); err != nil {
		t.Fatal(err)
	}
	if got := order(t, a); !slices.Equal(got, seq(0, 70)) {
		t.Errorf("unshuffled order = %v", got)
	}
}

// The source keeps its own copy of the field map: changing the caller's map afterwards does not
// change what it serves.
func TestArrayBatchesCopiesFieldMap(t *testing.T) {
	fields := map[string]*tensors.Tensor{"id": tensors.FromFlatDataAndDimensions([]int32{0, 1, 2, 3}, 4)}
	a, err := prefetch.NewArrayBatches(fields, 2, prefetch.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fields["id"] = tensors.FromFlatDataAndDimensions([]int32{9, 9, 9, 9}, 4)
	fields["extra"] = tensors.FromFlatDataAndDimensions([]int32{9, 9, 9, 9}, 4)
	b, err := a.BatchAt(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1 || !slices.Equal(b["id"].Value().([]int32), []int32{2, 3}) {
		t.Errorf("after editing the caller's map, batch 1 = %v; want only id [2 3]", b)
	}
}

func TestArrayBatchesShuffleIsDeterministicPerSeedAndEpoch(t *testing.T) {
	opts := prefetch.ArrayOptions{Shuffle: true, Seed: 5}
	a, b := indexed(t, 70, 16, opts), indexed(t, 70, 16, opts)
	epoch := func(s *prefetch.ArrayBatches, e int) []int32 {
		t.Helper()
		if err := s.BeginEpoch(e); err != nil {
			t.Fatal(err)
		}
		return order(t, s)
	}
	a1, b1 := epoch(a, 1), epoch(b, 1)
	if !slices.Equal(a1, b1) {
		t.Errorf("same seed and epoch, different orders:\n%v\n%v", a1, b1)
	}
	sorted := slices.Clone(a1)
	slices.Sort(sorted)
	if !slices.Equal(sorted, seq(0, 70)) {
		t.Errorf("epoch 1 is not a permutation of the samples: %v", a1)
	}
	if slices.Equal(a1, seq(0, 70)) {
		t.Errorf("shuffled epoch 1 is the identity order")
	}
	a2 := epoch(a, 2)
	if slices.Equal(a1, a2) {
		t.Errorf("epochs 1 and 2 served the same order")
	}
	if again := epoch(a, 1); !slices.Equal(again, a1) {
		t.Errorf("epoch 1 replayed differently:\n%v\n%v", a1, again)
	}
	other := indexed(t, 70, 16, prefetch.ArrayOptions{Shuffle: true, Seed: 6})
	if slices.Equal(epoch(other, 1), a1) {
		t.Errorf("seeds 5 and 6 served the same order")
	}

	// With DropPartial, a shuffled epoch serves 64 distinct samples (which ones changes per epoch).
	d := indexed(t, 70, 16, prefetch.ArrayOptions{Shuffle: true, Seed: 5, DropPartial: true})
	got := epoch(d, 1)
	if len(got) != 64 || len(distinct(got)) != 64 {
		t.Errorf("dropping, shuffled: %d ids, %d distinct; want 64 and 64", len(got), len(distinct(got)))
	}
}

// The permutation is rand.NewPCG(seed, epoch).Perm(n): pinned here so that a change to how it is
// drawn, which would silently change every resumed run's order, fails a test.
func TestArrayBatchesShuffleOrderIsPinned(t *testing.T) {
	a := indexed(t, 10, 4, prefetch.ArrayOptions{Shuffle: true, Seed: 5})
	if err := a.BeginEpoch(1); err != nil {
		t.Fatal(err)
	}
	got := order(t, a)
	want := pcgPerm(5, 1, 10)
	if !slices.Equal(got, want) {
		t.Errorf("seed 5 epoch 1 order = %v, want rand.NewPCG(5, 1).Perm(10) = %v", got, want)
	}
}

// Four goroutines share each epoch's batch indices; across three shuffled epochs (BeginEpoch
// between them, never during reads) every sample must be served exactly once per epoch, and each
// epoch's order must be the one a lone reader sees. Run with -race.
func TestArrayBatchesConcurrentBatchAt(t *testing.T) {
	const n, size, workers, epochs = 203, 8, 4, 3
	a := indexed(t, n, size, prefetch.ArrayOptions{Shuffle: true, Seed: 11})
	lone := indexed(t, n, size, prefetch.ArrayOptions{Shuffle: true, Seed: 11})
	for e := range epochs {
		if err := a.BeginEpoch(e); err != nil {
			t.Fatal(err)
		}
		batches := make([][]int32, a.Len())
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Interleaved indices, so the workers overlap for the whole epoch.
				for i := w; i < a.Len(); i += workers {
					batches[i] = batchIDs(t, a, i)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		seen := make([]int, n)
		var served []int32
		for _, ids := range batches {
			served = append(served, ids...)
			for _, id := range ids {
				seen[id]++
			}
		}
		for id, c := range seen {
			if c != 1 {
				t.Errorf("epoch %d: sample %d served %d times, want exactly once", e, id, c)
			}
		}
		if err := lone.BeginEpoch(e); err != nil {
			t.Fatal(err)
		}
		if want := order(t, lone); !slices.Equal(served, want) {
			t.Errorf("epoch %d: concurrent reads served %v\n  a lone reader serves %v", e, served, want)
		}
	}
}

func TestArrayBatchesErrors(t *testing.T) {
	a := indexed(t, 70, 16, prefetch.ArrayOptions{})
	for _, i := range []int{-1, 5, 100} {
		_, err := a.BatchAt(i)
		wantErr(t, err, fmt.Sprintf("batch index %d out of range [0, 5)", i))
	}
	d := indexed(t, 70, 16, prefetch.ArrayOptions{DropPartial: true})
	_, err := d.BatchAt(4)
	wantErr(t, err, "batch index 4 out of range [0, 4)")

	x := tensors.FromFlatDataAndDimensions(make([]float32, 20), 10, 2)
	y := tensors.FromFlatDataAndDimensions(make([]float32, 9), 9)
	_, err = prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, 4, prefetch.ArrayOptions{})
	wantErr(t, err, "samples on its leading axis", "all fields must agree")
	if err != nil && !(contains(err.Error(), `field "y" has 9`) && contains(err.Error(), "others have 10") ||
		contains(err.Error(), `field "x" has 10`) && contains(err.Error(), "others have 9")) {
		t.Errorf("mismatch error does not name the field and both lengths: %v", err)
	}

	_, err = prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x}, 0, prefetch.ArrayOptions{})
	wantErr(t, err, "batch size 0", "must be positive")
	_, err = prefetch.NewArrayBatches(nil, 4, prefetch.ArrayOptions{})
	wantErr(t, err, "no fields")
	_, err = prefetch.NewArrayBatches(map[string]*tensors.Tensor{"s": tensors.FromValue(float32(1))}, 4, prefetch.ArrayOptions{})
	wantErr(t, err, `field "s" is a scalar`)
	_, err = prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromFlatDataAndDimensions([]float32{}, 0, 2)}, 4, prefetch.ArrayOptions{})
	wantErr(t, err, "no samples")
}

func seq(lo, hi int) []int32 {
	var s []int32
	for i := lo; i < hi; i++ {
		s = append(s, int32(i))
	}
	return s
}

// pcgPerm is the documented permutation, rand.NewPCG(seed, epoch).Perm(n), as sample ids.
func pcgPerm(seed, epoch uint64, n int) []int32 {
	var ids []int32
	for _, v := range rand.New(rand.NewPCG(seed, epoch)).Perm(n) {
		ids = append(ids, int32(v))
	}
	return ids
}

func distinct(s []int32) map[int32]bool {
	m := map[int32]bool{}
	for _, v := range s {
		m[v] = true
	}
	return m
}

// wantErr fails unless err is non-nil and contains every want.
func wantErr(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error; want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\n  does not contain %q", err, w)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// SampleOrdered's promise: the epoch's order of samples does not depend on the batch size, so
// batch i of 8 is batches 2i and 2i+1 of 4, shuffled or not; declarations pass the answer through.
func TestArrayBatchesOrderSamplesWhateverTheBatchSize(t *testing.T) {
	for _, opts := range []prefetch.ArrayOptions{{}, {Shuffle: true, Seed: 5, DropPartial: true}} {
		four, eight := indexed(t, 70, 4, opts), indexed(t, 70, 8, opts)
		for _, a := range []*prefetch.ArrayBatches{four, eight} {
			if err := a.BeginEpoch(3); err != nil {
				t.Fatal(err)
			}
		}
		byFour, byEight := order(t, four), order(t, eight)
		n := min(len(byFour), len(byEight))
		if n < 64 || !slices.Equal(byFour[:n], byEight[:n]) {
			t.Errorf("%+v: batches of 4 serve %v, of 8 %v", opts, byFour, byEight)
		}
		it, err := prefetch.Prefetch(eight, prefetch.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		if !prefetch.OrdersSamples(eight) || !prefetch.OrdersSamples(it) || !prefetch.OrdersSamples(prefetch.NoPrefetch(eight)) {
			t.Errorf("ArrayBatches or a declaration of it does not say it orders samples")
		}
	}
	if prefetch.OrdersSamples(prefetch.NoPrefetch(struct{ prefetch.Source }{indexed(t, 8, 4, prefetch.ArrayOptions{})})) {
		t.Error("a source that does not say is taken to order samples")
	}
}
