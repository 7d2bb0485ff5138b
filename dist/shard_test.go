package dist

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// indexSource's batch i holds the value i, so a shard's batches say which source batches they
// are; it counts BeginEpoch calls and answers DropsPartial as told.
type indexSource struct {
	n      int
	drops  bool
	epochs []int
}

func (s *indexSource) Len() int { return s.n }
func (s *indexSource) BatchAt(i int) (prefetch.Batch, error) {
	if i < 0 || i >= s.n {
		return nil, errors.New("out of range")
	}
	return prefetch.Batch{"i": tensors.FromValue([]int32{int32(i)})}, nil
}
func (s *indexSource) BeginEpoch(e int) error { s.epochs = append(s.epochs, e); return nil }
func (s *indexSource) DropsPartial() bool     { return s.drops }

// plainSource hides indexSource's BeginEpoch.
type plainSource struct{ s *indexSource }

func (p plainSource) Len() int                              { return p.s.Len() }
func (p plainSource) BatchAt(i int) (prefetch.Batch, error) { return p.s.BatchAt(i) }

// indices reads every batch of src back as the source index it holds.
func indices(t *testing.T, src prefetch.Source) []int {
	t.Helper()
	var out []int
	for i := range src.Len() {
		b, err := src.BatchAt(i)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		out = append(out, int(tensors.MustCopyFlatData[int32](b["i"])[0]))
	}
	return out
}

// Every rank gets N/W batches, strided; the ranks are disjoint and together all but the last
// N mod W batches.
func TestShardDisjointCover(t *testing.T) {
	for _, c := range []struct{ n, w int }{{8, 2}, {9, 2}, {10, 4}, {3, 3}} {
		src := &indexSource{n: c.n}
		seen := map[int]int{}
		for r := range c.w {
			s, err := Shard(src, Dist{Rank: r, WorldSize: c.w})
			if err != nil {
				t.Fatal(err)
			}
			got := indices(t, s)
			if len(got) != c.n/c.w {
				t.Errorf("n=%d w=%d rank %d: %d batches, want %d", c.n, c.w, r, len(got), c.n/c.w)
			}
			for k, i := range got {
				if i != k*c.w+r {
					t.Errorf("n=%d w=%d rank %d: batch %d is source batch %d, want %d", c.n, c.w, r, k, i, k*c.w+r)
				}
				seen[i]++
			}
		}
		full := c.n / c.w * c.w
		for i := range c.n {
			want := 0
			if i < full {
				want = 1
			}
			if seen[i] != want {
				t.Errorf("n=%d w=%d: source batch %d taken %d times, want %d (the remainder goes to no rank)", c.n, c.w, i, seen[i], want)
			}
		}
	}
}

func TestShardSingleIsIdentity(t *testing.T) {
	src := &indexSource{n: 5}
	s, err := Shard(src, Single())
	if err != nil || s != prefetch.Source(src) {
		t.Errorf("Single: got %v, %v; want the source itself", s, err)
	}
}

func TestShardForwards(t *testing.T) {
	src := &indexSource{n: 4, drops: true}
	s, err := Shard(src, Dist{Rank: 1, WorldSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.(prefetch.EpochSource).BeginEpoch(3); err != nil || !slices.Equal(src.epochs, []int{3}) {
		t.Errorf("BeginEpoch reached the source as %v (%v), want [3]", src.epochs, err)
	}
	plain, err := Shard(plainSource{src}, Dist{Rank: 1, WorldSize: 2})
	if _, epochs := plain.(prefetch.EpochSource); err != nil || epochs {
		t.Errorf("a shard of a source without BeginEpoch has one (%v): prefetch would fan it out", err)
	}
	if !s.(prefetch.PartialDropper).DropsPartial() {
		t.Error("DropsPartial: the source drops, the shard says it does not")
	}
	src.drops = false
	if s.(prefetch.PartialDropper).DropsPartial() {
		t.Error("DropsPartial: the source keeps its partial batch, the shard says it drops it")
	}
	if _, err := s.BatchAt(2); err == nil || !strings.Contains(err.Error(), "batch 2 of a 2-batch shard (rank 1 of 2)") {
		t.Errorf("BatchAt past the shard: %v", err)
	}
}

func TestShardRefuses(t *testing.T) {
	src := &indexSource{n: 3}
	for _, c := range []struct {
		src  prefetch.Source
		d    Dist
		want string
	}{
		{src, Dist{Rank: 2, WorldSize: 2}, "the rank must be in [0, 2)"},
		{src, Dist{Rank: 0, WorldSize: 4}, "a source of 3 batches cannot give each of 4 ranks a batch"},
		{prefetch.NoPrefetch(src), Dist{Rank: 0, WorldSize: 2}, "already declared for prefetch"},
		{nil, Dist{Rank: 0, WorldSize: 2}, "nil source"},
	} {
		_, err := Shard(c.src, c.d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.d, err, c.want)
		}
	}
	_, err := ShardData(prefetch.Data{"val": src}, Dist{Rank: 0, WorldSize: 4})
	if err == nil || !strings.Contains(err.Error(), `split "val"`) {
		t.Errorf("ShardData: %v, want the split named", err)
	}
}

// ShardEval hands every sample to exactly one rank, a share of every batch to each: 23 samples
// in batches of 5 (the final batch 3) over 2 to 5 ranks.
func TestShardEvalCoversEverySample(t *testing.T) {
	vals := make([]float32, 23)
	for i := range vals {
		vals[i] = float32(i)
	}
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromFlatDataAndDimensions(vals, 23)}, 5, prefetch.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for world := 2; world <= 5; world++ {
		seen := map[float32]int{}
		for r := range world {
			s, err := ShardEval(src, Dist{Rank: r, WorldSize: world})
			if err != nil {
				t.Fatal(err)
			}
			if s.Len() < 4 || s.Len() > 5 {
				t.Errorf("%d ranks, rank %d: Len %d, want the 4 full batches and maybe the final one", world, r, s.Len())
			}
			if w := s.(*EpochEvalShard).Width(); w != (5+world-1)/world {
				t.Errorf("%d ranks: Width %d, want %d", world, w, (5+world-1)/world)
			}
			for i := range s.Len() {
				b, err := s.BatchAt(i)
				if err != nil {
					t.Fatal(err)
				}
				rows := b["x"].Value().([]float32)
				if len(rows) == 0 || len(rows) > s.(*EpochEvalShard).Width() {
					t.Errorf("%d ranks, rank %d, batch %d: %d rows", world, r, i, len(rows))
				}
				for _, v := range rows {
					seen[v]++
				}
			}
		}
		for _, v := range vals {
			if seen[v] != 1 {
				t.Errorf("%d ranks: sample %v evaluated %d times, want once", world, v, seen[v])
			}
		}
	}
	if _, err := ShardEval(src, Dist{Rank: 0, WorldSize: 6}); err == nil || !strings.Contains(err.Error(), "batches of 5 rows cannot give each of 6 ranks a sample") {
		t.Errorf("6 ranks over batches of 5: %v, want a refusal naming both", err)
	}
	if s, _ := ShardEval(src, Single()); s != src {
		t.Errorf("one process: want the source itself")
	}
}

// A shard keeps its source's answer to SampleOrdered: the ranks' shards together serve the
// source's batches.
func TestShardKeepsSampleOrder(t *testing.T) {
	d := Dist{Rank: 1, WorldSize: 2}
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromFlatDataAndDimensions(make([]float32, 16), 16)}, 4, prefetch.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src  prefetch.Source
		want bool
	}{{src, true}, {struct{ prefetch.Source }{src}, false}} {
		sh, err := Shard(c.src, d)
		if err != nil {
			t.Fatal(err)
		}
		if got := prefetch.OrdersSamples(sh); got != c.want {
			t.Errorf("a shard of %T orders samples: %v, want %v", c.src, got, c.want)
		}
	}
}
