package checkpoint

import (
	"bytes"
	"strings"
	"testing"
)

// Rebatch, as a resume under another world size uses it: a record of W processes with batch B
// each (global batch G = W x B) moves to W' x B' = G' samples per batch, exactly or not at all.
func TestRebatch(t *testing.T) {
	rec := func(w, b, batch, epochBatches int) Position {
		return Position{Epoch: 3, Batch: batch, GlobalBatch: w * b, EpochBatches: epochBatches}
	}
	for _, tc := range []struct {
		name                   string
		from                   Position
		global, batches, accum int
		want                   int    // the new Batch, when no refusal
		refused                string // a part of the refusal
	}{
		// 5000 samples: 2 x 128 = 256 a batch gives 19 batches; 1 x 256 the same 19.
		{"2x128 -> 1x256 (2 local devices)", rec(2, 128, 7, 19), 256, 19, 1, 7, ""},
		{"1x256 -> 2x128", rec(1, 256, 7, 19), 256, 19, 1, 7, ""},
		{"2x128 -> 4x64", rec(2, 128, 7, 19), 256, 19, 1, 7, ""},
		{"2x128 -> 1x128: twice the batches", rec(2, 128, 7, 19), 128, 39, 1, 14, ""},
		{"1x128 -> 2x128, even batch", rec(1, 128, 14, 39), 256, 19, 1, 7, ""},
		{"1x128 -> 2x128, odd batch", rec(1, 128, 15, 39), 256, 19, 1, 0, "sample 1920 of epoch 3, which is not a whole number"},
		{"2x128 -> 3x128", rec(2, 128, 7, 19), 384, 13, 1, 0, "resume with a global batch (processes x batch size) that divides 1792, such as the recorded 256"},
		{"2x128 -> 1x128, accum 4: 14 is no step boundary", rec(2, 128, 7, 19), 128, 39, 4, 0, "optimizer steps of 128 x 4 samples"},
		{"2x128 -> 1x128, accum 2", rec(2, 128, 8, 19), 128, 39, 2, 16, ""},
		{"nothing consumed", rec(2, 128, 0, 19), 384, 13, 1, 0, ""},
		{"a finished epoch stays finished", rec(2, 128, 19, 19), 384, 13, 1, 13, ""},
		{"past this run's epoch", rec(2, 128, 10, 19), 128, 15, 1, 0, "past this run's epoch of 15 batches"},
		{"shard batches (an older record)", Position{Epoch: 3, Batch: 7}, 256, 19, 1, 0, "counts one process's shard batches"},
		{"inconsistent", Position{Epoch: 3, Batch: 7, GlobalBatch: 256}, 256, 19, 1, 0, "both are set or neither"},
		{"a negative batch", Position{Epoch: 3, Batch: -2, GlobalBatch: 256, EpochBatches: 19}, 128, 39, 1, 0, "position.batch: -2 is negative"},
		{"a zero global batch asked", rec(2, 128, 7, 19), 0, 19, 1, 0, "each >= 1"},
	} {
		got, err := tc.from.Rebatch(tc.global, tc.batches, tc.accum)
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s: %+v, %v; want a refusal with %q", tc.name, got, err, tc.refused)
			}
			continue
		}
		want := Position{Epoch: 3, Batch: tc.want, GlobalBatch: tc.global, EpochBatches: tc.batches}
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, want)
			continue
		}
		if tc.from.Batch < tc.from.EpochBatches && got.Samples() != tc.from.Samples() {
			t.Errorf("%s: sample %d, was %d: a sample is trained twice or skipped", tc.name, got.Samples(), tc.from.Samples())
		}
	}
}

// A global position survives a write and a read; a shard-batch one is written as it was
// before global positions existed (no new keys).
func TestPositionRoundTrip(t *testing.T) {
	for _, p := range []Position{{Epoch: 2, Batch: 5, GlobalBatch: 256, EpochBatches: 19}, {Epoch: 2, Batch: 5}} {
		r := sampleRecord()
		r.Position = p
		var b bytes.Buffer
		if err := Encode(&b, r); err != nil {
			t.Fatal(err)
		}
		if has := bytes.Contains(b.Bytes(), []byte("global_batch")); has != p.Global() {
			t.Errorf("%+v: the header holds global_batch: %v", p, has)
		}
		got, err := decode("rt", bytes.NewReader(b.Bytes()), int64(b.Len()))
		if err != nil || got.Position != p {
			t.Errorf("%+v read back as %+v, %v", p, got.Position, err)
		}
	}
}
