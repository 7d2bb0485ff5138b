package gpt

import (
	"errors"
	"fmt"

	"github.com/nitro-go/nitro/cmd/examples/internal/fieldcheck"
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

// textConfig is the prefetch/text configuration of the experiment's fields: Corpus, else the
// Go source tree's .go files.
func (e *GPT) textConfig() (text.Config, error) {
	cfg := text.Config{Path: e.Corpus, Column: e.Column, Context: e.Context, BatchSize: e.BatchSize,
		BatchesPerEpoch: e.BatchesPerEpoch, ValBatches: e.ValBatches, Val: e.Val, Seed: uint64(e.Seed)}
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
func (e *GPT) BuildData() (prefetch.Data, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	cfg, err := e.textConfig()
	if err != nil {
		return nil, err
	}
	d, err := text.Split(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w (text.Config.Path is the field Corpus; its other fields are this experiment's of the same name)", err)
	}
	e.data = append(e.data, d)
	return d, nil
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
