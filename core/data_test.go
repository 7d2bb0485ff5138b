package core_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/core"
)

// indexed returns n samples whose "id" is the sample index (int32 [n]) and whose "x" row is
// [i, 10i] (float32 [n, 2]), so every batch row says which sample it came from.
func indexed(t testing.TB, n, batch int, opts core.ArrayOptions) *core.ArrayBatches {
	t.Helper()
	ids := make([]int32, n)
	xs := make([]float32, 2*n)
	for i := range n {
		ids[i] = int32(i)
		xs[2*i], xs[2*i+1] = float32(i), float32(10*i)
	}
	a, err := core.NewArrayBatches(map[string]*tensors.Tensor{
		"id": tensors.FromFlatDataAndDimensions(ids, n),
		"x":  tensors.FromFlatDataAndDimensions(xs, n, 2),
	}, batch, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// order reads every batch of a and returns the sample ids in the order served, checking that
// each row's x matches its id.
func order(t testing.TB, a *core.ArrayBatches) []int32 {
	t.Helper()
	var ids []int32
	for i := 0; i < a.Len(); i++ {
		b, err := a.BatchAt(i)
		if err != nil {
			t.Fatal(err)
		}
		id := b["id"].Value().([]int32)
		x := b["x"].Value().([][]float32)
		for r := range id {
			if x[r][0] != float32(id[r]) || x[r][1] != float32(10*id[r]) {
				t.Fatalf("batch %d row %d: id %d but x %v: fields were permuted differently", i, r, id[r], x[r])
			}
		}
		ids = append(ids, id...)
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
		a := indexed(t, c.n, c.batch, core.ArrayOptions{DropPartial: c.drop})
		if a.Len() != c.want || a.Samples() != c.n || a.DropsPartial() != c.drop {
			t.Errorf("n=%d batch=%d drop=%v: Len %d Samples %d DropsPartial %v; want Len %d",
				c.n, c.batch, c.drop, a.Len(), a.Samples(), a.DropsPartial(), c.want)
		}
	}
}

func TestArrayBatchesBatchAt(t *testing.T) {
	a := indexed(t, 70, 16, core.ArrayOptions{})
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

func TestArrayBatchesShuffleIsDeterministicPerSeedAndEpoch(t *testing.T) {
	opts := core.ArrayOptions{Shuffle: true, Seed: 5}
	a, b := indexed(t, 70, 16, opts), indexed(t, 70, 16, opts)
	epoch := func(s *core.ArrayBatches, e int) []int32 {
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
	other := indexed(t, 70, 16, core.ArrayOptions{Shuffle: true, Seed: 6})
	if slices.Equal(epoch(other, 1), a1) {
		t.Errorf("seeds 5 and 6 served the same order")
	}

	// With DropPartial, a shuffled epoch serves 64 distinct samples (which ones changes per epoch).
	d := indexed(t, 70, 16, core.ArrayOptions{Shuffle: true, Seed: 5, DropPartial: true})
	got := epoch(d, 1)
	if len(got) != 64 || len(distinct(got)) != 64 {
		t.Errorf("dropping, shuffled: %d ids, %d distinct; want 64 and 64", len(got), len(distinct(got)))
	}
}

func TestArrayBatchesErrors(t *testing.T) {
	a := indexed(t, 70, 16, core.ArrayOptions{})
	for _, i := range []int{-1, 5, 100} {
		_, err := a.BatchAt(i)
		wantErr(t, err, fmt.Sprintf("batch index %d out of range [0, 5)", i))
	}
	d := indexed(t, 70, 16, core.ArrayOptions{DropPartial: true})
	_, err := d.BatchAt(4)
	wantErr(t, err, "batch index 4 out of range [0, 4)")

	x := tensors.FromFlatDataAndDimensions(make([]float32, 20), 10, 2)
	y := tensors.FromFlatDataAndDimensions(make([]float32, 9), 9)
	_, err = core.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, 4, core.ArrayOptions{})
	wantErr(t, err, "samples on its leading axis", "all fields must agree")
	if err != nil && !(contains(err.Error(), `field "y" has 9`) && contains(err.Error(), "others have 10") ||
		contains(err.Error(), `field "x" has 10`) && contains(err.Error(), "others have 9")) {
		t.Errorf("mismatch error does not name the field and both lengths: %v", err)
	}

	_, err = core.NewArrayBatches(map[string]*tensors.Tensor{"x": x}, 0, core.ArrayOptions{})
	wantErr(t, err, "batch size 0", "must be positive")
	_, err = core.NewArrayBatches(nil, 4, core.ArrayOptions{})
	wantErr(t, err, "no fields")
	_, err = core.NewArrayBatches(map[string]*tensors.Tensor{"s": tensors.FromValue(float32(1))}, 4, core.ArrayOptions{})
	wantErr(t, err, `field "s" is a scalar`)
	_, err = core.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromFlatDataAndDimensions([]float32{}, 0, 2)}, 4, core.ArrayOptions{})
	wantErr(t, err, "no samples")
}

func seq(lo, hi int) []int32 {
	var s []int32
	for i := lo; i < hi; i++ {
		s = append(s, int32(i))
	}
	return s
}

func distinct(s []int32) map[int32]bool {
	m := map[int32]bool{}
	for _, v := range s {
		m[v] = true
	}
	return m
}
