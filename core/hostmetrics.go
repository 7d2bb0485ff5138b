package core

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/prefetch"
)

// Residency is where evaluation metrics run: MetricsOnDevice (the Metrics hook, traced into the
// eval program, which returns only its sums and counts) or MetricsOnHost (the HostMetrics hook,
// plain Go on the outputs the eval program returns: sorting, matching, AUC, mAP).
type Residency string

const (
	MetricsOnDevice Residency = "device" // Metrics, fused into the eval program
	MetricsOnHost   Residency = "host"   // HostMetrics, in Go on the eval program's outputs
)

// The default residency follows the hook the experiment defines, host first: HostMetrics runs on
// the host, and a Metrics hook is a graph function, which only a program can run, so an
// experiment with Metrics alone keeps its metrics fused into the eval program. With both hooks
// the host wins (an eval batch's transfer is noise against the epoch it follows); MetricsResidency
// or WithMetricsResidency chooses otherwise. TrainMetrics always runs on the device: it runs
// every step, where transferring the outputs would cost more than the metric.

// HostMetricser is the HostMetrics hook: one eval batch's metrics, computed on the host. out is
// Forward's outputs and batch the split's whole batch, both host tensors sliced to the batch's
// real rows (padding never reaches it); the hook may keep them. It is part of no program:
// editing it recompiles nothing.
type HostMetricser interface {
	HostMetrics(out Prediction, batch prefetch.Batch) (map[string]metrics.Metric, error)
}

// MetricsResider chooses the residency (WithMetricsResidency wins over it).
type MetricsResider interface {
	MetricsResidency() Residency
}

// WithMetricsResidency runs the evaluation metrics on the device (Metrics) or on the host
// (HostMetrics), whichever hooks the experiment defines; New refuses a residency whose hook is
// missing.
func WithMetricsResidency(r Residency) Option { return func(o *options) { o.residency = r } }

// evalMetrics is the residency New resolved and, under MetricsOnHost, the hook.
type evalMetrics struct {
	residency Residency
	from      string // what chose it, for errors
	host      HostMetricser
}

// resolveResidency picks the residency (the option, then MetricsResidency, then the default)
// and refuses one whose hook is missing, and a FinalizeMetrics of another signature (which would
// otherwise never be called).
func (bld *builder) resolveResidency() error {
	su := &bld.n.spec
	if m, ok := reflect.TypeOf(su.e).MethodByName("FinalizeMetrics"); ok && su.acc.finalizer == nil {
		return fmt.Errorf("experiment %s: FinalizeMetrics has type %v, or FinalizedMetricNames is missing: define func (e *%s) FinalizeMetrics(acc metrics.Result, split string) map[string]float64 (acc.Scalars holds the divided means and totals) and func (e *%s) FinalizedMetricNames() []string (the names it returns)",
			su.typeName, m.Type, su.typeName, su.typeName)
	}
	host, _ := su.e.(HostMetricser)
	em := evalMetrics{residency: MetricsOnDevice, from: "the default (no HostMetrics hook)", host: host}
	if host != nil {
		em.residency, em.from = MetricsOnHost, "the default (a HostMetrics hook)"
	}
	if r, ok := su.e.(MetricsResider); ok {
		em.residency, em.from = r.MetricsResidency(), "MetricsResidency()"
	}
	if su.opts.residency != "" {
		em.residency, em.from = su.opts.residency, "WithMetricsResidency"
	}
	switch {
	case em.residency != MetricsOnDevice && em.residency != MetricsOnHost:
		return fmt.Errorf("metrics residency %q (from %s): want %q or %q", em.residency, em.from, MetricsOnDevice, MetricsOnHost)
	case em.residency == MetricsOnHost && host == nil:
		return fmt.Errorf("metrics residency host (from %s): experiment %s has no HostMetrics hook; define func (e *%s) HostMetrics(out core.Prediction, batch prefetch.Batch) (map[string]metrics.Metric, error), or choose %q", em.from, su.typeName, su.typeName, MetricsOnDevice)
	case em.residency == MetricsOnDevice && su.metrics == nil && host != nil:
		return fmt.Errorf("metrics residency device (from %s): experiment %s has no Metrics hook, and HostMetrics runs only on the host; define Metrics, or choose %q", em.from, su.typeName, MetricsOnHost)
	}
	if em.residency == MetricsOnDevice {
		em.host = nil
	}
	su.evalm = em
	return nil
}

// onHost reports whether the evaluation metrics run on the host.
func (su *runSpec) onHost() bool { return su.evalm.host != nil }

// evalMetricHook is the traced hook the eval program calls for its metrics: Metrics, Loss (for
// val_loss) without it, and none on the host.
func (su *runSpec) evalMetricHook() *hook {
	switch {
	case su.onHost():
		return nil
	case su.metrics != nil:
		return su.metrics
	}
	return su.loss
}

// noEvalProgram is a run with no eval program: no metric hook on the device and none on the host
// (manual mode, where Loss and Metrics are both optional).
func (su *runSpec) noEvalProgram() bool { return !su.onHost() && su.evalMetricHook() == nil }

// evalKeys is the batch fields an eval program takes, of those a split has: Forward's and its
// metric hook's. On the host that is Forward's alone: labels stay on the host.
func (su *runSpec) evalKeys(avail map[string]bool) []string {
	return routed(avail, su.forward, su.evalMetricHook())
}

// evalStream is the split's batch stream: padded to the compiled width, and keeping each host
// batch for HostMetrics on the host.
func (n *Nitro) evalStream(src prefetch.Source, epoch int, keys []string, width int) (*prefetch.Stream[prefetch.Batch], error) {
	cfg := n.streamConfig(keys, width, 0, 0)
	cfg.KeepHost = n.spec.onHost()
	return prefetch.Start(context.Background(), src, epoch, cfg)
}

// batchMetrics is one batch's metrics from its eval result: the program's sums and counts
// (device), or HostMetrics on Forward's outputs and the host batch (host).
func (su *runSpec) batchMetrics(res engine.EvalBatch, host prefetch.Batch) (map[string]metrics.Metric, error) {
	if !su.onHost() {
		return res.Metrics, nil
	}
	ms, err := su.evalm.host.HostMetrics(Prediction(res.Forward), host)
	if err != nil {
		return nil, fmt.Errorf("HostMetrics: %w", err)
	}
	return ms, nil
}

// finalizeSplit turns a split's accumulation into its metrics: FinalizeMetrics' result, checked
// against the names FinalizedMetricNames declared, or the scalars when there is no finalizer
// (an array or a collection then has nothing to report it, and is refused by name).
func (su *runSpec) finalizeSplit(acc *metrics.Accumulator, split string) (map[string]float64, error) {
	r := acc.Result()
	f := su.acc.finalizer
	if f == nil {
		for _, name := range r.Names() {
			if _, ok := r.Scalars[name]; !ok {
				return nil, su.arrayWithoutFinalizer(split, name)
			}
		}
		return r.Scalars, nil
	}
	if acc.Batches() == 0 { // a finalizer is shown at least one batch: with none there is nothing to finalize
		return r.Scalars, nil
	}
	res := f.FinalizeMetrics(r, split)
	got, want := sortedKeys(res), slices.Sorted(slices.Values(f.FinalizedMetricNames()))
	if !slices.Equal(got, slices.Compact(want)) {
		return res, fmt.Errorf("split %q: FinalizeMetrics returned %v, FinalizedMetricNames declares %v: declare exactly the names it returns (setup checks the checkpoint and early-stopping metrics against them)", split, got, want)
	}
	return res, nil
}

// arrayWithoutFinalizer is the error for an array or collected metric with no finalizer: New's
// when the trace of Metrics finds it, else the first evaluation's.
func (su *runSpec) arrayWithoutFinalizer(split, name string) error {
	return fmt.Errorf("split %q: metric %q is an array or a collection, which only a finalizer can turn into reported values: define FinalizeMetrics(acc metrics.Result, split string) map[string]float64 and FinalizedMetricNames() []string on %s", split, name, su.typeName)
}

// finalizedNames is the val split's metrics as the record names them, from FinalizedMetricNames.
func (su *runSpec) finalizedNames() []string {
	var names []string
	for _, name := range su.acc.finalizer.FinalizedMetricNames() {
		names = append(names, withPrefixName("val_", name))
	}
	return names
}
