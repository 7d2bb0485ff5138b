package dist

import (
	"fmt"

	"github.com/nitro-go/nitro/prefetch"
)

// Shard is rank d.Rank's share of src: batches Rank, Rank+W, Rank+2W, … (W = d.WorldSize), the
// same count, Len()/W, on every rank. Strided rather than contiguous, so that step i of a W-rank
// run reads source batches iW … iW+W-1, the ones W consecutive steps of one process read. The
// remainder, the last Len() mod W batches, goes to no rank: every rank must take the same number
// of steps, since a collective step waits for all of them. With an EpochSource, every rank must
// build its source with the same seed, so that the ranks shard one permutation and stay disjoint.
//
// With one process (W = 1) src comes back unchanged. Shard refuses an invalid d, a source with
// fewer batches than ranks, and a source already declared for prefetch (prefetch.Prefetch,
// NoPrefetch): shard first, then declare the shard.
func Shard(src prefetch.Source, d Dist) (prefetch.Source, error) { return shard(src, d) }

// shard is Shard: a rank's batches, strided.
func shard(src prefetch.Source, d Dist) (prefetch.Source, error) {
	if err := checkShard(src, d); err != nil || d.WorldSize == 1 {
		return src, err
	}
	if n := src.Len(); n < d.WorldSize {
		return nil, fmt.Errorf("dist: a source of %d batches cannot give each of %d ranks a batch: use a smaller batch or fewer processes", n, d.WorldSize)
	}
	sh := &Sharded{src: src, d: d}
	if _, ok := src.(prefetch.EpochSource); ok {
		return &EpochSharded{sh}, nil
	}
	return sh, nil
}

// checkShard is what Shard and ShardEval refuse alike: an invalid d, a nil source, and a source
// already declared for prefetch.
func checkShard(src prefetch.Source, d Dist) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if src == nil {
		return fmt.Errorf("dist: Shard of a nil source")
	}
	if _, declared := src.(prefetch.Describer); declared && d.WorldSize > 1 {
		return fmt.Errorf("dist: Shard of a source already declared for prefetch (%T): shard the plain source, then declare the shard, e.g. prefetch.Prefetch(shard, opts)", src)
	}
	return nil
}

// ShardData shards every split of data (Shard); a split's error names it.
func ShardData(data prefetch.Data, d Dist) (prefetch.Data, error) {
	out := make(prefetch.Data, len(data))
	for name, src := range data {
		s, err := Shard(src, d)
		if err != nil {
			return nil, fmt.Errorf("split %q: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// Sharded is a Shard of more than one rank over a source that is no EpochSource. It is a
// PartialDropper whatever it wraps (DropsPartial answers for the wrapped source, false when it
// has no answer), so the train split's partial-batch rule sees through the shard.
type Sharded struct {
	src prefetch.Source
	d   Dist
}

// EpochSharded is a Shard over an EpochSource: BeginEpoch begins the wrapped source's epoch.
// It is a type of its own because having BeginEpoch is itself a promise (prefetch fans out
// only a source that re-plans there), which a shard of a source without one must not make.
type EpochSharded struct{ *Sharded }

var (
	_ prefetch.PartialDropper = (*Sharded)(nil)
	_ prefetch.SampleOrderer  = (*Sharded)(nil)
	_ prefetch.EpochSource    = (*EpochSharded)(nil)
)

// Len is the wrapped source's batch count divided by the world size, rounded down.
func (s *Sharded) Len() int { return s.src.Len() / s.d.WorldSize }

// BatchAt is the wrapped source's batch i*WorldSize+Rank.
func (s *Sharded) BatchAt(i int) (prefetch.Batch, error) {
	if i < 0 || i >= s.Len() {
		return nil, fmt.Errorf("dist: batch %d of a %d-batch shard (%s)", i, s.Len(), s.d)
	}
	return s.src.BatchAt(s.Index(i))
}

// Index is the wrapped source's index of shard batch i.
func (s *Sharded) Index(i int) int { return i*s.d.WorldSize + s.d.Rank }

// BeginEpoch begins the epoch on the wrapped source.
func (s *EpochSharded) BeginEpoch(epoch int) error {
	return s.src.(prefetch.EpochSource).BeginEpoch(epoch)
}

// DropsPartial is the wrapped source's answer (false when it gives none). A kept partial batch
// is the source's last, so it lands on rank W-1's last batch, or, as part of the remainder, on
// no rank.
func (s *Sharded) DropsPartial() bool {
	pd, ok := s.src.(prefetch.PartialDropper)
	return ok && pd.DropsPartial()
}

// SampleOrdered is the wrapped source's answer (false when it gives none): the shards of all
// ranks together serve the wrapped source's batches, so they keep its order of samples.
func (s *Sharded) SampleOrdered() bool { return prefetch.OrdersSamples(s.src) }

// Dist is the rank and world size the shard was cut for.
func (s *Sharded) Dist() Dist { return s.d }
