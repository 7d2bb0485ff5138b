package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/metrics"
)

// ValLoss is the metric reported when the experiment has no Metrics hook: Loss, through its own
// batch routing, taken as the mean over a batch's real rows and so weighed by them: the split's
// val_loss is the mean over its samples, a short final batch counting for the rows it holds.
const ValLoss = "val_loss"

// EvalMetricHook is the traced hook the eval program calls for its metrics: "Metrics", "Loss"
// (for val_loss) without it, and "" on the host or when neither is defined.
func (e *Engine) EvalMetricHook() string {
	switch {
	case e.onHost:
		return ""
	case e.hooks.Metrics != nil:
		return "Metrics"
	case e.hooks.Loss != nil:
		return "Loss"
	}
	return ""
}

// EvalBatch is one placed eval batch's result: on the device, its metrics; with the metrics on
// the host, Forward's outputs read back and sliced to the batch's real rows.
type EvalBatch struct {
	Metrics map[string]metrics.Metric
	Forward map[string]*tensors.Tensor
}

// Eval runs the eval program on one placed batch b (padded to width, real rows of it real)
// and frees the batch's device copies. isControl says which metrics the caller branches on:
// they go through the validated readback.
func (e *Engine) Eval(b map[string]*tensors.Tensor, keys []string, width, real int, isControl func(name string) bool) (EvalBatch, error) {
	rows := real
	if e.onHost { // the host slices the outputs after the readback: a short batch costs no second program
		rows = width
	}
	p, err := e.evalProgram(width, rows, keys)
	if err != nil {
		return EvalBatch{}, errors.Join(err, freeBatch(b, keys))
	}
	outs, err := e.execute(p, e.modelArgs(b, keys, false))
	if err = errors.Join(err, freeBatch(b, keys)); err != nil {
		return EvalBatch{}, err
	}
	r := e.results(p, outs)
	var res EvalBatch
	if e.onHost {
		names, fwd := r.prefixed(forwardOut)
		if err := r.done(); err != nil {
			return EvalBatch{}, errors.Join(err, freeTensors(outs))
		}
		res.Forward = map[string]*tensors.Tensor{}
		for i, name := range names {
			name = strings.TrimPrefix(name, forwardOut)
			t, err := hostRows(fwd[i], real)
			if err != nil {
				return EvalBatch{}, errors.Join(fmt.Errorf("reading output %q back: %w", name, err), freeTensors(outs))
			}
			res.Forward[name] = t
			fwd[i] = nil // the host owns it now
		}
	} else {
		res.Metrics, err = e.deviceMetrics(&r, real, isControl)
	}
	// free device buffers now, not at the next GC
	return res, errors.Join(err, freeTensors(outs))
}

// evalProgram: parameters, layer state, Device fields and routed batch fields at the compiled
// width -> per metric, its sum ("metric/<name>", "metric/val_loss" without Metrics) and (unless
// nil) its count ("count/<name>"). In Go a metric hook is a graph function, so device metrics are
// fused into this one program instead of one program per hook. For a short final batch (real <
// width) the inputs arrive padded to the width and the program slices outputs and batch fields
// back to real rows before Metrics/Loss see them; that is the one extra program a split whose
// length is not a multiple of the batch size costs.
//
// At full width (real == width) the program also returns Forward's outputs ("forward/<name>"),
// after the metrics: that is the program Predict runs, so moving between Validate/Evaluate and
// Predict compiles nothing. Validation only frees those outputs, a cost of one output buffer per batch. With the
// metrics on the host (HostMetrics) the program is Forward's outputs alone, always at full
// width: the host slices a short batch's outputs after the readback.
func (e *Engine) evalProgram(width, real int, keys []string) (*program, error) {
	return e.memo(fmt.Sprintf("eval/%d/%d/%v", width, real, keys), func() (*program, error) {
		metricHook := e.EvalMetricHook()
		sig := e.modelInputs(width, keys)
		key := e.key(compilecache.KindEval, e.hookNames("Forward", metricHook), sig)
		key.Extra = append(key.Extra, [2]string{"rows", fmt.Sprint(real)})
		return e.getProgram(key, func(g *graph.Graph, src any) outList {
			nodes, _ := e.modelNodes(g, sig)
			view := e.bindModel(g, nodes, src)
			e.ctx.SetTraining(g, false)
			out := e.callForward(view, batchNodes(nodes, e.route("Forward", keys)), width)
			mb := batchNodes(nodes, e.route(metricHook, keys))
			if real < width {
				out = sliceOutputs(out, real)
				for _, k := range sortedKeys(mb) { // in a fixed order: the program must not depend on map order
					mb[k] = graph.Slice(mb[k], graph.AxisRange(0, real))
				}
			}
			var outs outList
			switch {
			case e.onHost: // the metrics run on the host, on Forward's outputs
			case e.hooks.Metrics == nil:
				outs.add(metricOut+ValLoss, e.hooks.Loss(view, out, mb))
			default:
				outs = e.metricOutputs(view, out, mb)
			}
			if real == width {
				outs.then(forwardOutputs(out))
			}
			return outs
		})
	})
}

// forwardOutputs lists Forward's outputs by name.
func forwardOutputs(out map[string]*graph.Node) outList {
	var outs outList
	for _, name := range sortedKeys(out) {
		outs.add(forwardOut+name, out[name])
	}
	return outs
}

// metricOutputs calls Metrics and lists each metric's sum and (unless nil) count as float64. A
// sum with a count is a scalar; one without may be an array (summed over the split, for
// FinalizeMetrics).
func (e *Engine) metricOutputs(view any, out map[string]*graph.Node, mb map[string]*graph.Node) outList {
	var outs outList
	ms := e.hooks.Metrics(view, out, mb)
	if len(ms) == 0 {
		panic(fmt.Errorf("Metrics returned no metrics, so the eval program would compute nothing: return at least one hooks.Metric{Sum, Count}, or drop the hook (without it, evaluation reports val_loss from Loss)"))
	}
	for _, name := range sortedKeys(ms) {
		m := ms[name]
		if m.Sum == nil || (m.Sum.Rank() != 0 && m.Count != nil) {
			panic(fmt.Errorf("metric %q: Sum must be a scalar node, or an array with a nil Count (summed, not divided), got %v", name, shapeOf(m.Sum)))
		}
		outs.add(metricOut+name, graph.ConvertDType(m.Sum, dtypeOf("Float64")))
		if m.Count != nil {
			if m.Count.Rank() != 0 {
				panic(fmt.Errorf("metric %q: Count must be a scalar node or nil, got %v", name, shapeOf(m.Count)))
			}
			outs.add(countOut+name, graph.ConvertDType(m.Count, dtypeOf("Float64")))
		}
	}
	return outs
}

func sliceOutputs(out map[string]*graph.Node, rows int) map[string]*graph.Node {
	s := make(map[string]*graph.Node, len(out))
	for _, k := range sortedKeys(out) {
		s[k] = graph.Slice(out[k], graph.AxisRange(0, rows))
	}
	return s
}

// deviceMetrics reads an eval program's metric outputs (and frees Forward's, when it has them
// after its metrics, unread): per metric its sum, then its count when it has one. val_loss
// without Metrics is Loss, a mean over the batch's real rows, weighed by those rows: a short
// final batch counts for what it holds, and the split's val_loss is the mean over its samples. A
// sum with no count that is not a scalar is a summed array (a confusion matrix), read whole.
func (e *Engine) deviceMetrics(r *results, rows int, isControl func(string) bool) (map[string]metrics.Metric, error) {
	value := func(name string, t *tensors.Tensor) (float64, error) {
		// A metric the run branches on goes through the validated readback; the others are only
		// reported, and a failed readback of them is not worth a stop.
		if isControl != nil && isControl(name) {
			return readControlScalar(t, "metric "+name)
		}
		return scalarValue(t), nil
	}
	ms := map[string]metrics.Metric{}
	for _, out := range r.p.outputs {
		name, ok := strings.CutPrefix(out, metricOut)
		if !ok {
			continue
		}
		t := r.one(out)
		if r.err != nil {
			return nil, r.err
		}
		if !t.Shape().IsScalar() {
			a, err := arrayValue(t)
			if err != nil {
				return nil, fmt.Errorf("metric %q: reading its array back: %w", name, err)
			}
			ms[name] = metrics.Summed(a)
			continue
		}
		v, err := value(name, t)
		if err != nil {
			return nil, err
		}
		_, counted := r.p.at[countOut+name]
		switch {
		case counted:
			c, err := value(name, r.one(countOut+name))
			if err != nil {
				return nil, err
			}
			ms[name] = metrics.Mean(v, c)
		case e.hooks.Metrics == nil: // val_loss: Loss weighted by the batch's real rows
			ms[name] = metrics.Mean(v*float64(rows), float64(rows))
		default:
			ms[name] = metrics.Total(v)
		}
	}
	r.prefixed(forwardOut) // a full-width program's: Eval frees them unread
	if err := r.done(); err != nil {
		return nil, err
	}
	return ms, nil
}

func arrayValue(t *tensors.Tensor) (_ metrics.Array, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return metrics.NewArray(tensors.MustCopyFlatData[float64](t), t.Shape().Dimensions...)
}

// hostRows is sliceRowsHost with a failed transfer as an error.
func hostRows(t *tensors.Tensor, rows int) (_ *tensors.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	h, err := sliceRowsHost(t, rows)
	if err == nil && h == t {
		err = t.InvalidateOnDevice() // keep the host copy, free the device buffer now
	}
	return h, err
}

// scalarValue reads a float scalar back, 0 for any other value.
func scalarValue(t *tensors.Tensor) float64 {
	switch x := t.Value().(type) {
	case float64:
		return x
	case float32:
		return float64(x)
	}
	return 0
}
