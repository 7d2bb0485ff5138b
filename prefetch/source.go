package prefetch

import "github.com/gomlx/gomlx/pkg/core/tensors"

// Batch is one batch of host arrays by field name, the batch on the leading axis of each.
// (GoMLX is row-major, so the batch axis leads: one batch axis, asserted before any slicing.)
type Batch map[string]*tensors.Tensor

// Source is an index-addressable batch source: batch i of Len() is BatchAt(i). Index addressing
// is what lets a run resume mid-epoch and lets prefetch fan out without reordering bugs.
//
// The guarantee a source must give, since a fan-out reader relies on it:
//   - BatchAt(i) may be called concurrently from several goroutines within an epoch, for the same
//     or different indices, and must then return what a lone call would;
//   - BatchAt is never called concurrently with BeginEpoch (see EpochSource): the caller finishes
//     an epoch's reads before it starts the next epoch;
//   - BatchAt returns fresh tensors the caller owns: it may write, donate or free them, and
//     nothing it does to them reaches the source or another call's batch.
//
// Len must not change while the source is in use.
type Source interface {
	Len() int
	BatchAt(i int) (Batch, error)
}

// EpochSource is a Source that reshuffles (or otherwise re-plans) at each epoch's start. The
// caller calls BeginEpoch before the epoch's first BatchAt, and never while a BatchAt is running.
type EpochSource interface {
	Source
	BeginEpoch(epoch int) error
}

// PartialDropper says whether a source drops its partial final batch. The train split must: a
// short training batch would compile a second gradient program and weigh its samples differently.
type PartialDropper interface {
	DropsPartial() bool
}

// SampleOrderer says whether a source's epoch is one order of samples whatever its batch size:
// batch i of width B holds samples iB to iB+B-1 of that order (for a shuffled source, the epoch's
// permutation of the samples, drawn without the batch size). Two such sources over the same data
// at different batch sizes then serve the same samples in the same order, which is what lets a
// resume under another batch size, or another number of processes, continue at the same sample.
type SampleOrderer interface {
	SampleOrdered() bool
}

// OrdersSamples is src's SampleOrdered, or false when it does not say.
func OrdersSamples(src Source) bool {
	so, ok := src.(SampleOrderer)
	return ok && so.SampleOrdered()
}

// Data is what a model's BuildData returns: splits by name ("train", "val", "test", ...).
type Data map[string]Source
