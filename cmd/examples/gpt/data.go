package gpt

import (
	"errors"
	"fmt"

	"github.com/nitro-go/nitro/cmd/examples/internal/fieldcheck"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/prefetch/text"
)

// check refuses every out-of-range field by name, before any data is read.
func (e *GPT) check() error {
	var c fieldcheck.Checker
	for _, f := range []struct {
		name   string
		v, min int
	}{
		{"Layers", e.Layers, 1}, {"Heads", e.Heads, 1}, {"Dim", e.Dim, 1}, {"Context", e.Context, 1},
		{"BatchSize", e.BatchSize, 1}, {"BatchesPerEpoch", e.BatchesPerEpoch, 1}, {"ValBatches", e.ValBatches, 1},
		{"MaxSteps", e.MaxSteps, 0}, {"ValEvery", e.ValEvery, 0}, {"Seed", e.Seed, 0},
	} {
		c.AtLeast(f.name, f.v, f.min)
	}
	if e.Heads >= 1 && e.Dim%e.Heads != 0 {
		c.Add("Dim = %d does not divide by Heads = %d: want a multiple of Heads", e.Dim, e.Heads)
	}
	c.Float("Dropout", e.Dropout, e.Dropout >= 0 && e.Dropout < 1, "in [0, 1)")
	c.Float("Val", e.Val, e.Val > 0 && e.Val < 1, "in (0, 1)")
	c.Float("LearningRate", e.LearningRate, e.LearningRate > 0, "> 0 (finite)")
	c.Float("WarmupFrac", e.WarmupFrac, e.WarmupFrac >= 0 && e.WarmupFrac < 1, "in [0, 1)")
	c.Float("Beta2", e.Beta2, e.Beta2 >= 0 && e.Beta2 < 1, "in [0, 1)")
	c.Float("Lambda", e.Lambda, e.Lambda >= 0, ">= 0 (finite)")
	if e.Column != "" && e.Corpus == "" {
		c.Add("Column = %q needs Corpus: the Parquet file or folder holding it", e.Column)
	}
	return c.Err()
}

// textConfig is the prefetch/text configuration of the experiment's fields for a run of
// ranks processes: Corpus, else the Go source tree's .go files. BatchesPerEpoch and ValBatches
// count global batches, so each process's source holds ranks times as many batches of its
// BatchSize, which dist.Shard deals out one per rank in turn.
func (e *GPT) textConfig(ranks int) (text.Config, error) {
	cfg := text.Config{Path: e.Corpus, Column: e.Column, Context: e.Context, BatchSize: e.BatchSize,
		BatchesPerEpoch: e.BatchesPerEpoch * ranks, ValBatches: e.ValBatches * ranks, Val: e.Val, Seed: uint64(e.Seed)}
	if cfg.Path == "" {
		p, err := text.DefaultCorpus()
		if err != nil {
			return cfg, err
		}
		cfg.Path, cfg.Extensions = p, text.GoSource()
	}
	return cfg, nil
}

// BuildData opens the corpus as "train" (BatchesPerEpoch batches re-drawn each epoch) and "val"
// (ValBatches batches held out by file, the same every epoch), and keeps them for Close.
//
// Under W processes BatchSize is each process's and the global batch is W times it, while
// BatchesPerEpoch and ValBatches stay the steps of an epoch and the batches of a validation.
// Window j of an epoch does not depend on the batch size, so global batch i is windows
// i·W·B … (i+1)·W·B-1 (B = BatchSize), and rank r reads only its B of them, source batch
// i·W+r: the windows one process with BatchSize W·B reads at step i, and for val the rows its
// device r would take on W devices. So `mpirun -np 2` at BatchSize B trains and validates what
// one process at BatchSize 2B on 2 devices does, with the same BatchesPerEpoch and ValBatches.
func (e *GPT) BuildData(d dist.Dist) (prefetch.Data, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	cfg, err := e.textConfig(d.WorldSize)
	if err != nil {
		return nil, err
	}
	all, err := text.Split(cfg)
	if err != nil {
		why := "text.Config.Path is the field Corpus; its other fields are this experiment's of the same name"
		if d.WorldSize > 1 {
			why += fmt.Sprintf(", BatchesPerEpoch and ValBatches times the %d processes", d.WorldSize)
		}
		return nil, fmt.Errorf("%w (%s)", err, why)
	}
	// Shard deals val out by whole batches too: every rank gets ValBatches of them, so every
	// window is evaluated once and the ranks' sums cover the split without padding.
	mine, err := dist.ShardData(all, d)
	if err != nil {
		_ = text.CloseAll(all)
		return nil, err
	}
	e.data = append(e.data, all) // Close needs the sources themselves: a shard hides their Close
	return mine, nil
}

// Close releases the files of every split BuildData opened. The experiment may build its data
// again afterwards.
func (e *GPT) Close() error {
	var errs []error
	for _, d := range e.data {
		errs = append(errs, text.CloseAll(d))
	}
	e.data = nil
	return errors.Join(errs...)
}
