package core

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/runstatus"
)

// Setup's part in checkpointing and the once-per-epoch decision: the checkpointer and the
// early-stopping rule resolved, the metrics they branch on checked before training and validated
// each epoch, and the reason to stop.

// setUpCheckpoints ends setup's part in checkpointing: resolve the checkpointer (option, then
// the experiment's, then TopK) and early stopping, check their metrics exist, then resume or load
// weights when asked. It runs after the parameters and optimizer state are on the device and
// before the logger's first record.
func (bld *builder) setUpCheckpoints() error {
	n := bld.n
	o := n.spec.opts
	c := o.ckpt
	if !o.ckptSet {
		if ch, ok := n.spec.e.(CheckpointerChooser); ok {
			c = ch.Checkpointer()
			if v := reflect.ValueOf(c); v.IsValid() && v.Kind() == reflect.Pointer && v.IsNil() {
				c = nil
			}
		} else {
			c = must1(checkpoint.NewTopK(3, ValLoss, "min", "", nil))
		}
	}
	if a, ok := c.(checkpoint.Adopter); ok {
		var name checkpoint.NameFunc
		if nm, ok := n.spec.e.(CheckpointNamer); ok {
			name = nm.CheckpointFilename
		}
		a.Adopt(n.RunDir(), name)
	}
	n.ck.c = bld.rankCheckpointer(c) // dist.go: rank 0 writes, the others only read
	if r, ok := c.(checkpoint.Ranker); ok {
		n.ck.metric = r.Metric()
	}
	es, err := bld.resolveEarlyStop()
	if err != nil {
		return err
	}
	n.ck.es = es
	if err := bld.checkControlMetrics(); err != nil {
		return err
	}
	switch {
	case o.resume != "" && o.weights != "":
		return fmt.Errorf("WithResume(%q) and WithCheckpoint(%q) both given: resume continues a run (state, counters), WithCheckpoint starts a new one from weights; pass one", o.resume, o.weights)
	case o.resume != "":
		return bld.resume(o.resume)
	case o.weights != "":
		return bld.loadWeights(o.weights)
	}
	return nil
}

func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// checkControlMetrics refuses, before training, a checkpoint or early-stopping metric the val
// split does not report, naming the ones it does. With no val split there is nothing to rank by
// (checkpoints are unscored; TopK keeps the newest) and nothing to stop on (refused). Under
// HostMetrics with no MetricsFinalizer the names are known only after the first validation,
// where they are checked.
func (bld *builder) checkControlMetrics() error {
	n := bld.n
	if n.ck.metric == "" && n.ck.es == nil {
		return nil
	}
	if _, ok := n.spec.data["val"]; !ok {
		if n.ck.es != nil {
			return n.ck.es.checkMetric(false, sortedKeys(n.spec.data), nil)
		}
		return nil
	}
	names, known, err := bld.valMetricNames()
	if err != nil || !known {
		return err
	}
	if m := n.ck.metric; m != "" && !slices.Contains(names, m) {
		from := ckptFromDefault
		if n.spec.opts.ckptSet {
			from = ckptFromOption
		} else if _, ok := n.spec.e.(CheckpointerChooser); ok {
			from = ckptFromHook
		}
		return checkpointMetricError(n.spec.typeName, m, from, names)
	}
	if es := n.ck.es; es != nil {
		return es.checkMetric(true, nil, names)
	}
	return nil
}

// valMetricNames lists the val split's metrics as the record names them (val_loss, val_accuracy):
// val_loss with no Metrics hook, else the keys the Metrics hook returns, learned by tracing
// Forward and Metrics once on the val split's first batch (nothing is compiled). known is false
// under HostMetrics without a finalizer, whose names are known only once it has run. With a
// MetricsFinalizer they are the names FinalizedMetricNames declares.
func (bld *builder) valMetricNames() (names []string, known bool, err error) {
	n := bld.n
	switch {
	case n.spec.acc.finalizer != nil:
		return n.spec.finalizedNames(), true, nil
	case n.spec.onHost():
		return nil, false, nil
	}
	if n.spec.metrics == nil {
		return []string{ValLoss}, true, nil
	}
	b, err := n.spec.data["val"].BatchAt(0)
	if err != nil {
		return nil, false, fmt.Errorf("split \"val\", batch 0: %w", err)
	}
	width, err := batchWidth(b)
	if err != nil {
		return nil, false, err
	}
	keys := routed(keySet(b), n.spec.forward, n.spec.metrics)
	metricNames, array, err := n.eng.MetricNames(width, keys)
	if err != nil {
		return nil, false, err
	}
	for _, name := range metricNames {
		names = append(names, withPrefixName("val_", name))
		if array[name] && err == nil { // a metric only a finalizer could report, and there is none
			err = n.spec.arrayWithoutFinalizer("val", name)
		}
	}
	return names, err == nil, err
}

// withPrefixName is one name as withPrefix names it.
func withPrefixName(prefix, name string) string {
	if strings.HasPrefix(name, prefix) {
		return name
	}
	return prefix + name
}

// isControl reports whether a val split metric (named as the Metrics hook names it) is one the
// run branches on: the checkpoint ranking metric or the early-stopping metric. Those are read
// back through the validated readback.
func (c *runCkpt) isControl(split, name string) bool {
	if split != "val" {
		return false
	}
	full := withPrefixName("val_", name)
	return (c.metric != "" && full == c.metric) || (c.es != nil && c.es.reads(full))
}

// controlValue is the validated value of a metric the run branches on: present among the
// epoch's validation metrics and finite, else an error naming it (a non-finite value would
// rank a checkpoint or decide a stop on garbage, so the run stops instead).
func controlValue(val map[string]float64, metric, what string) (float64, error) {
	m := withPrefix("val_", val)
	v, ok := m[metric]
	if !ok {
		return 0, fmt.Errorf("%s %q is not among the validation metrics (%s)", what, metric, strings.Join(sortedKeys(m), ", "))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s %q is %v: a non-finite value cannot rank a checkpoint or decide a stop; stopping (resume from the last checkpoint, e.g. with a lower learning rate)", what, metric, v)
	}
	return v, nil
}

// stopDecision is the once-per-epoch decision after validation: the control metrics are
// validated, early stopping observes the epoch, and the reason to stop is returned ("" to go
// on): requested (RequestStop, Interrupt) before early_stop.
func (n *Nitro) stopDecision(res EpochResult) (runstatus.Status, error) {
	if res.Val != nil && n.ck.metric != "" && n.ck.c != nil {
		if _, err := controlValue(res.Val, n.ck.metric, "checkpoint metric"); err != nil {
			return "", err
		}
	}
	early, err := n.observeEarlyStop(res)
	if err != nil {
		return "", err
	}
	requested, err := n.agreeStop(n.tracker.StopRequested()) // collective.go: any rank's request
	if err != nil {
		return "", err
	}
	switch {
	case requested:
		return StopRequested, nil
	case early:
		return StopEarly, nil
	}
	return "", nil
}
