package dist

import (
	"fmt"

	"github.com/nitro-go/nitro/prefetch"
)

// ShardEval is rank d.Rank's share of an evaluation source, by samples: of every batch, the rows
// [⌊r·w/W⌋, ⌊(r+1)·w/W⌋) (r = Rank, W = WorldSize, w = batch 0's rows, the split's width), which
// are the rows devices r·D … r·D+D-1 take when one process runs the batch on W·D local devices.
// The final batch may be shorter than w: a rank whose rows lie past its end has one batch fewer.
// Every rank gets a share of every full batch, so each has at least one batch, and summing the
// ranks' (sum, count) accumulators covers the whole split, every sample once, whatever the
// number of batches; evaluation takes no collective per batch, so ranks may differ by one batch.
// A rank's batches are narrower than the split's and may differ by a row between ranks: the
// caller compiles for the widest, ⌈w/W⌉ (Width), and masks the padding as for a short batch.
//
// It reads batch 0 and the final batch at once, for their widths. It refuses what Shard
// refuses, and a split whose batches have fewer rows than there are ranks (each needs a row).
// With one process src comes back unchanged.
func ShardEval(src prefetch.Source, d Dist) (prefetch.Source, error) {
	if err := checkShard(src, d); err != nil || d.WorldSize == 1 {
		return src, err
	}
	n := src.Len()
	if n == 0 {
		return nil, fmt.Errorf("dist: ShardEval of an empty source (%T)", src)
	}
	width, err := rowsOf(src, 0)
	if err != nil {
		return nil, err
	}
	if width < d.WorldSize {
		return nil, fmt.Errorf("dist: batches of %d rows cannot give each of %d ranks a sample: each rank evaluates its share of every batch; use an evaluation batch of at least %d rows", width, d.WorldSize, d.WorldSize)
	}
	last := width
	if n > 1 {
		if last, err = rowsOf(src, n-1); err != nil {
			return nil, err
		}
	}
	es := &EvalShard{src: src, d: d, n: n, width: width, last: last}
	es.lo, es.hi = width*d.Rank/d.WorldSize, width*(d.Rank+1)/d.WorldSize
	if _, ok := src.(prefetch.EpochSource); ok {
		return &EpochEvalShard{es}, nil
	}
	return es, nil
}

// rowsOf is batch i's row count.
func rowsOf(src prefetch.Source, i int) (int, error) {
	b, err := src.BatchAt(i)
	if err != nil {
		return 0, fmt.Errorf("dist: reading batch %d for its width: %w", i, err)
	}
	w, err := prefetch.BatchWidth(b)
	if err != nil {
		return 0, fmt.Errorf("dist: batch %d: %w", i, err)
	}
	return w, nil
}

// EvalShard is a ShardEval of more than one rank over a source that is no EpochSource.
type EvalShard struct {
	src         prefetch.Source
	d           Dist
	n           int // the wrapped source's batches
	width, last int // batch 0's rows and the final batch's
	lo, hi      int // this rank's rows of a full batch
}

// EpochEvalShard is a ShardEval over an EpochSource: BeginEpoch begins the wrapped source's epoch.
type EpochEvalShard struct{ *EvalShard }

var _ prefetch.EpochSource = (*EpochEvalShard)(nil)

// Len is the wrapped source's batch count, less the final batch when it holds none of this
// rank's rows.
func (s *EvalShard) Len() int {
	if s.n > 1 && s.lo >= s.last {
		return s.n - 1
	}
	return s.n
}

// BatchAt is this rank's rows of the wrapped source's batch i.
func (s *EvalShard) BatchAt(i int) (prefetch.Batch, error) {
	if i < 0 || i >= s.Len() {
		return nil, fmt.Errorf("dist: batch %d of a %d-batch evaluation shard (%s)", i, s.Len(), s.d)
	}
	b, err := s.src.BatchAt(i)
	if err != nil {
		return nil, err
	}
	rows, err := prefetch.BatchWidth(b)
	if err != nil {
		return nil, fmt.Errorf("dist: batch %d: %w", i, err)
	}
	if rows > s.width || (rows < s.width && i < s.n-1) {
		return nil, fmt.Errorf("dist: batch %d has %d rows, batch 0 %d: only the final batch may differ, and only by being shorter", i, rows, s.width)
	}
	hi := min(s.hi, rows)
	out := make(prefetch.Batch, len(b))
	for k, t := range b {
		out[k] = prefetch.SliceRows(t, s.lo, hi)
	}
	return out, nil
}

// Width is the widest rank's share of a full batch, ⌈w/W⌉: the width every rank compiles its
// evaluation programs for, so that a narrower share is padded and masked.
func (s *EvalShard) Width() int { return (s.width + s.d.WorldSize - 1) / s.d.WorldSize }

// Rows is this rank's rows [lo, hi) of a full batch, and the batch width they are cut from.
func (s *EvalShard) Rows() (lo, hi, width int) { return s.lo, s.hi, s.width }

// Dist is the rank and world size the shard was cut for.
func (s *EvalShard) Dist() Dist { return s.d }

// BeginEpoch begins the epoch on the wrapped source.
func (s *EpochEvalShard) BeginEpoch(epoch int) error {
	return s.src.(prefetch.EpochSource).BeginEpoch(epoch)
}
