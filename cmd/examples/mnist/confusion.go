package mnist

import (
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/monitors"
)

// Digits names the ten classes in label order: the confusion matrix's labels.
var Digits = []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// confusionMetric is one batch's confusion matrix [10, 10] (row: true digit, column: predicted),
// a sum with no count: the framework adds it up over the split and hands it to FinalizeMetrics.
func confusionMetric(pred, labels *graph.Node) hooks.Metric {
	oh := func(c *graph.Node) *graph.Node { return graph.OneHot(c, len(Digits), dtypes.Float32) }
	return hooks.Metric{Sum: graph.Einsum("bi,bj->ij", oh(labels), oh(pred))}
}

// confusions is what FinalizeMetrics keeps of each split's matrix: the last one per split, and
// which split was finalized last (what Observe logs, on the transition that follows it), with
// the epoch the evaluation started in (the transition out of it may come with the next epoch's
// progress).
type confusions struct {
	mu        sync.Mutex
	bySplit   map[string][][]int
	last      string
	pending   bool
	evalEpoch int
}

// confs is e's confusions, made on first use. The hooks and monitors that call it run on the
// run's own goroutine, one at a time.
func (e *MLP) confs() *confusions {
	if e.conf == nil {
		e.conf = &confusions{bySplit: map[string][][]int{}}
	}
	return e.conf
}

// FinalizeMetrics reports accuracy and loss as accumulated, plus each digit's accuracy (its
// recall: the diagonal over its row) as accuracy_<d>, from the split's confusion matrix, which it
// keeps for Confusion and Observe.
func (e *MLP) FinalizeMetrics(acc metrics.Result, split string) map[string]float64 {
	res := map[string]float64{"accuracy": acc.Scalars["accuracy"], "loss": acc.Scalars["loss"]}
	m, err := metrics.Confusion(acc.Arrays["confusion"])
	if err != nil { // a 10x10 sum of one-hot products is always whole counts
		panic(fmt.Errorf("mnist: the confusion matrix: %w", err))
	}
	for d, a := range metrics.PerClassAccuracy(m) {
		res["accuracy_"+strconv.Itoa(d)] = a
	}
	c := e.confs()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bySplit[split], c.last, c.pending = m, split, true
	return res
}

// FinalizedMetricNames is what FinalizeMetrics returns, so that a checkpoint or early-stopping
// metric is checked at setup.
func (e *MLP) FinalizedMetricNames() []string {
	names := []string{"accuracy", "loss"}
	for d := range Digits {
		names = append(names, "accuracy_"+strconv.Itoa(d))
	}
	return names
}

// Confusion is the last confusion matrix of split and the digit labels; ok is false before the
// split was evaluated.
func (e *MLP) Confusion(split string) (matrix [][]int, labels []string, ok bool) {
	if e.conf == nil {
		return nil, Digits, false
	}
	e.conf.mu.Lock()
	defer e.conf.mu.Unlock()
	m, ok := e.conf.bySplit[split]
	return slices.Clone(m), Digits, ok
}

// Observe makes the experiment a phase monitor (core.WithMonitor(e); the nitro CLI registers
// it): on the transition out of an evaluation of the val split, the one time a fresh matrix
// exists, it logs the matrix to the run's logger when that logger takes confusion matrices.
func (e *MLP) Observe(phase monitors.Phase, at monitors.Progress, info monitors.Info) error {
	c := e.confs()
	c.mu.Lock()
	if _, ok := phase.(monitors.EvalStepping); ok {
		c.evalEpoch = at.Epoch
	}
	if info.Metrics == nil || !c.pending {
		c.mu.Unlock()
		return nil
	}
	m, split, epoch := c.bySplit[c.last], c.last, c.evalEpoch
	c.pending = false
	c.mu.Unlock()
	if cl, ok := info.Logger.(logjson.ConfusionLogger); ok && split == "val" {
		return cl.LogConfusion(m, Digits, epoch)
	}
	return nil
}
