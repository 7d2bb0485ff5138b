package core

import (
	"fmt"
	"strings"

	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

// takeData is setup's data phase: the splits WithData supplies, else what the BuildData hook
// (contract.go's DataBuilder, or dist.go's DistDataBuilder) returns, run on the real experiment; under WithInputSpecs, none.
func (bld *builder) takeData() (err error) {
	n := bld.n
	switch {
	case n.spec.specOnly():
		n.spec.data = prefetch.Data{}
		return nil
	case n.spec.opts.data != nil:
		if n.spec.data, err = bld.shardForCollective(n.spec.opts.data); err != nil { // collective.go
			return err
		}
	default:
		if n.spec.data, err = bld.buildData(); err != nil { // dist.go: either BuildData form
			return err
		}
	}
	if len(n.spec.data) == 0 {
		return fmt.Errorf("BuildData returned no splits: return at least a \"train\" or \"val\" split")
	}
	return nil
}

// checkSplits is setup's split-check phase: each split against the hooks' declared fields and
// the train rules (under WithInputSpecs, the specs against Forward's fields), then every split
// declared for prefetch.
func (bld *builder) checkSplits() error {
	su := &bld.n.spec
	check := bld.checkData
	if su.specOnly() {
		check = bld.checkInputSpecs
	}
	if err := check(); err != nil {
		return err
	}
	return bld.wrapData()
}

// sharedWidth is, for a split whose batches are this process's share of wider batches split over
// the processes (dist.ShardEval's), the widest rank's share, which every rank compiles its
// programs for, a narrower share padded and masked as a short final batch is; 0 for any other
// source. The types are named, not a method: a source of the user's with a Width method of
// another meaning must not change what is compiled.
func sharedWidth(src prefetch.Source) int {
	switch s := src.(type) {
	case *dist.EvalShard:
		return s.Width()
	case *dist.EpochEvalShard:
		return s.Width()
	}
	return 0
}

// checkData validates the splits against the hooks' declared fields and the train rules.
func (bld *builder) checkData() error {
	su := &bld.n.spec
	su.fieldShapes = map[string]fieldShape{}
	shapeFrom := map[string]string{} // field -> the split its shape was first read from
	su.splitAvail = map[string]map[string]bool{}
	su.splitWidth = map[string]int{}
	for _, split := range sortedKeys(su.data) {
		src := su.data[split]
		if src == nil || src.Len() == 0 {
			return fmt.Errorf("split %q is empty", split)
		}
		b, err := src.BatchAt(0)
		if err != nil {
			return fmt.Errorf("split %q, batch 0: %w", split, err)
		}
		w, err := batchWidth(b)
		if err != nil {
			return fmt.Errorf("split %q: %w", split, err)
		}
		if sw := sharedWidth(src); sw >= w {
			w = sw // every rank compiles the widest share: one program on all ranks
		}
		avail := map[string]bool{}
		su.splitAvail[split] = avail
		su.splitWidth[split] = w
		for k, t := range b {
			avail[k] = true
			fs := fieldShape{dtype: t.DType().String(), row: append([]int(nil), t.Shape().Dimensions[1:]...)}
			if old, ok := su.fieldShapes[k]; ok && (old.dtype != fs.dtype || fmt.Sprint(old.row) != fmt.Sprint(fs.row)) {
				return fmt.Errorf("batch field %q is %s%v per sample in split %q and %s%v in split %q: splits must agree", k, old.dtype, old.row, shapeFrom[k], fs.dtype, fs.row, split)
			}
			if _, ok := su.fieldShapes[k]; !ok {
				shapeFrom[k] = split
			}
			su.fieldShapes[k] = fs
		}
		if err := su.forward.checkAgainst(split, avail); err != nil {
			return err
		}
		if split == "train" {
			if err := su.loss.checkAgainst(split, avail); err != nil {
				return err
			}
			if su.trainMetrics != nil {
				if err := su.trainMetrics.checkAgainst(split, avail); err != nil {
					return err
				}
			}
			pd, ok := src.(prefetch.PartialDropper)
			if !ok || !pd.DropsPartial() {
				return fmt.Errorf("the train split must drop its partial final batch (a short batch would compile a second gradient program): build it with prefetch.ArrayOptions{DropPartial: true} or implement DropsPartial() bool")
			}
			if src.Len()%su.cfg.accum.value != 0 {
				return fmt.Errorf("the train split has %d batches, not divisible by Accum = %d (%s): the horizon max_epochs*(batches/accum) must be exact; choose a batch size or accum that divides it", src.Len(), su.cfg.accum.value, su.cfg.accum.source)
			}
			su.trainWidth = w
		} else if su.metrics != nil {
			if err := su.metrics.checkAgainst(split, avail); err != nil {
				return err
			}
		} else if err := su.loss.checkAgainst(split, avail); err != nil {
			return fmt.Errorf("%w (with no Metrics hook, validation reports val_loss through Loss)", err)
		}
		if split != "train" {
			bld.warnDroppedEval(split, src, w)
		}
	}
	carried := map[string]bool{}
	for k := range su.fieldShapes {
		carried[k] = true
	}
	bld.warnAbsentOptional(carried, "no split")
	return nil
}

// warnAbsentOptional warns, once at setup, about each optional batch field that no split (under
// WithInputSpecs, no spec) carries: the hook reads it nil in every program, as it would a
// misspelled key. A field absent from some splits only is what optional is for, and stays quiet.
func (bld *builder) warnAbsentOptional(carried map[string]bool, where string) {
	su := &bld.n.spec
	names := sortedKeys(carried)
	hooks := []*hook{su.forward, su.loss, su.metrics, su.trainMetrics, su.trainStep}
	if su.specOnly() {
		hooks = hooks[:1] // only Forward runs on a Nitro without data
	}
	for _, h := range hooks {
		if h == nil || h.whole {
			continue
		}
		for _, f := range h.fields {
			if !f.optional || carried[f.name] {
				continue
			}
			msg := fmt.Sprintf("hook %s's optional batch field %s reads key %q, which %s carries (they carry %s), so it is nil in every program",
				h.name, h.batchType.Field(f.index).Name, f.name, where, strings.Join(names, ", "))
			if c := markers.ClosestName(f.name, names); c != "" {
				msg += fmt.Sprintf(": did you mean %q? Fix the key in its batch tag", c)
			} else {
				msg += ": fix the key in its batch tag if it is misspelled, or drop the field"
			}
			su.warn(msg)
		}
	}
}

// warnDroppedEval warns, once at setup, about an evaluation split that drops its partial final
// batch: its metrics silently leave those samples out (padding would keep them).
func (bld *builder) warnDroppedEval(split string, src prefetch.Source, width int) {
	su := &bld.n.spec
	pd, ok := src.(prefetch.PartialDropper)
	if !ok || !pd.DropsPartial() {
		return
	}
	skipped := "some samples"
	if s, ok := src.(prefetch.Sized); ok {
		k := s.Samples() - src.Len()*width
		if k <= 0 {
			return
		}
		skipped = fmt.Sprintf("%d of its %d samples", k, s.Samples())
	}
	su.warn(fmt.Sprintf("split %q drops its partial final batch, so its metrics leave out %s: build it without DropPartial (an eval split pads its short final batch instead)", split, skipped))
}
