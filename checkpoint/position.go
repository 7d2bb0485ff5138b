package checkpoint

import "fmt"

// Position is where the train data stands: the epoch being trained and the next batch within it.
//
// With GlobalBatch set, Batch counts the whole run's batches: batch i is every process's batch
// i at once, GlobalBatch samples in all (the world size times each process's batch), so
// Batch*GlobalBatch samples of the epoch's order are consumed whatever the world size was, and
// Rebatch turns that into another run's batch. EpochBatches is how many such batches the epoch
// held, which tells a finished epoch from one stopped part-way under any batch size.
//
// Without them (a record written before they existed, or a run whose processes shard their data
// themselves) Batch counts one process's own shard batches, which mean those samples only under
// the same world size and batch size.
type Position struct {
	Epoch        int `json:"epoch"`
	Batch        int `json:"batch"`
	GlobalBatch  int `json:"global_batch,omitempty"`
	EpochBatches int `json:"epoch_batches,omitempty"`
}

// Global reports whether Batch counts the whole run's batches (GlobalBatch is set).
func (p Position) Global() bool { return p.GlobalBatch > 0 }

// Samples is how many samples of the epoch's order the run consumed: Batch*GlobalBatch (0 for a
// position that is not Global).
func (p Position) Samples() int { return p.Batch * p.GlobalBatch }

// inconsistent names the position field that disagrees with the others, and says why; "" when
// none does. The bounds of each field alone are outOfBounds's.
func (p Position) inconsistent() (field, msg string) {
	switch {
	case (p.GlobalBatch == 0) != (p.EpochBatches == 0):
		return "position", fmt.Sprintf("global_batch %d and epoch_batches %d: both are set or neither", p.GlobalBatch, p.EpochBatches)
	case p.Global() && p.Batch > p.EpochBatches:
		return "position.batch", fmt.Sprintf("%d is past the epoch's %d batches (epoch_batches)", p.Batch, p.EpochBatches)
	case p.Global() && p.Batch > MaxStep/p.GlobalBatch:
		return "position.batch", fmt.Sprintf("%d batches of %d samples is past the bound %d samples", p.Batch, p.GlobalBatch, MaxStep)
	}
	return "", ""
}

// Rebatch is p in the batches of a run whose global batch holds globalBatch samples, whose epoch
// holds epochBatches of them, and whose optimizer steps take accum batches each. A finished epoch
// stays finished (Batch becomes epochBatches). A partial one moves to the batch that starts at
// the same sample, Samples()/globalBatch, when that is a whole number of optimizer steps; when it
// is not, Rebatch refuses rather than round: rounding down would train samples twice, up would
// skip some. It refuses a position that is not Global, whose samples name no batch of this run.
func (p Position) Rebatch(globalBatch, epochBatches, accum int) (Position, error) {
	if globalBatch < 1 || epochBatches < 1 || accum < 1 {
		return Position{}, fmt.Errorf("checkpoint: Rebatch(%d, %d, %d): the global batch, the epoch's batches and accum are each >= 1", globalBatch, epochBatches, accum)
	}
	if !p.Global() {
		return Position{}, fmt.Errorf("position.batch %d counts one process's shard batches (the record has no position.global_batch): it names the same samples only under the world size and batch size that wrote it", p.Batch)
	}
	if f, msg := outOfBounds(0, 0, p); f != "" {
		return Position{}, fmt.Errorf("%s: %s", f, msg)
	}
	q := Position{Epoch: p.Epoch, GlobalBatch: globalBatch, EpochBatches: epochBatches}
	if p.Batch == p.EpochBatches {
		q.Batch = epochBatches
		return q, nil
	}
	s := p.Samples()
	if s%(globalBatch*accum) != 0 {
		return Position{}, fmt.Errorf("position.batch %d of %d samples (position.global_batch) is sample %d of epoch %d, which is not a whole number of this run's optimizer steps of %d x %d samples (the global batch x accum): resuming would train some samples twice or skip some; resume with a global batch (processes x batch size) that divides %d, such as the recorded %d",
			p.Batch, p.GlobalBatch, s, p.Epoch, globalBatch, accum, s, p.GlobalBatch)
	}
	q.Batch = s / globalBatch
	if q.Batch > epochBatches {
		return Position{}, fmt.Errorf("position.batch %d of %d samples (position.global_batch) is sample %d of epoch %d, past this run's epoch of %d batches of %d samples: the train split holds fewer samples than the run that wrote the record; resume with that split", p.Batch, p.GlobalBatch, s, p.Epoch, epochBatches, globalBatch)
	}
	return q, nil
}
