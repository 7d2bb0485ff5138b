package core

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
)

func dtypeOf(name string) dtypes.DType { return dtypes.MapOfNames[name] }

// gradientProgram: parameters, layer state, Device fields and the routed batch fields (plus the
// running gradient sums when accum > 1) -> loss, the gradient of every parameter array, new layer
// state, train metrics. accum bakes in (as 1/accum), so it is in this program's key and no other's.
func (n *Nitro) gradientProgram(width int, keys []string) (*program, error) {
	return n.memo(fmt.Sprintf("gradient/%d/%v", width, keys), func() (*program, error) {
		sig := n.modelInputs(width, keys)
		accum := n.cfg.accum.value
		if accum > 1 {
			for _, g := range n.groups {
				for _, v := range g.vars {
					sig.add("acc/"+v.ScopeAndName(), v.DType().String(), v.Shape().Dimensions)
				}
			}
		}
		key := n.key(kindGradient, hookNames(n.forward, n.loss, n.trainMetrics), sig)
		key.Accum = accum
		return n.getProgram(key, func(g *graph.Graph, src any) ([]*graph.Node, *program) {
			nodes := sig.params(g, n.varInputs)
			loss, grads, extra, meta := n.traceTrain(g, nodes, src, width, keys)
			if accum > 1 {
				k := 0
				for _, grp := range n.groups {
					for _, v := range grp.vars {
						grads[k] = graph.Add(nodes["acc/"+v.ScopeAndName()], graph.MulScalar(grads[k], 1/float64(accum)))
						k++
					}
				}
			}
			outs := append([]*graph.Node{loss}, grads...)
			return append(outs, extra...), meta
		})
	})
}

// trainStepProgram is the fused step (WithFusedStep, accum 1): the gradient program's inputs plus
// every group's optimizer state and hyperparameters and the step -> loss, new parameters, new
// optimizer state, new layer state, train metrics. One program per step instead of two; its key
// holds the clip threshold (and accum, always 1), so a clip sweep recompiles the whole step.
func (n *Nitro) trainStepProgram(width int, keys []string) (*program, error) {
	return n.memo(fmt.Sprintf("train_step/%d/%v", width, keys), func() (*program, error) {
		sig := n.modelInputs(width, keys)
		for _, g := range n.groups {
			n.addStateInputs(&sig, g)
		}
		sig.add("step", "Float32", nil)
		key := n.key(kindTrainStep, hookNames(n.forward, n.loss, n.trainMetrics)+"+optimizer", sig)
		key.Accum, key.Clip = 1, n.cfg.clip.value
		for _, g := range n.groups {
			key.Extra = append(key.Extra, [2]string{"chain/" + g.name, g.opt.Describe()})
		}
		return n.getProgram(key, func(g *graph.Graph, src any) ([]*graph.Node, *program) {
			nodes := sig.params(g, n.varInputs)
			loss, grads, extra, meta := n.traceTrain(g, nodes, src, width, keys)
			in := make([]groupUpdate, len(n.groups))
			for i, grp := range n.groups {
				in[i] = n.groupInputs(grp, nodes)
				in[i].grads, grads = grads[:len(grp.vars)], grads[len(grp.vars):]
			}
			newParams, newState := n.emitUpdates(in, nodes["step"])
			// A non-finite loss keeps the old parameters and state, as the two-program step does by
			// stopping before its update: the run stops on that loss with nothing overwritten.
			finite := graph.IsFinite(loss)
			k := 0
			for i, grp := range n.groups {
				for j := range grp.vars {
					newParams[k] = graph.Where(finite, newParams[k], in[i].params[j])
					k++
				}
			}
			k = 0
			for i, grp := range n.groups {
				for s := range grp.optState {
					if grp.constLeaf(s) {
						continue
					}
					for j := range grp.vars {
						newState[k] = graph.Where(finite, newState[k], in[i].state[s][j])
						k++
					}
				}
			}
			outs := append([]*graph.Node{loss}, newParams...)
			outs = append(outs, newState...)
			return append(outs, extra...), meta
		})
	})
}

// traceTrain traces Forward, Loss and TrainMetrics on a training program's inputs and returns the
// loss, the gradient of every parameter array (in group order), and the outputs that follow the
// update in every training program: the new layer state, then the train metrics (named in meta).
func (n *Nitro) traceTrain(g *graph.Graph, nodes map[string]*graph.Node, src any, width int, keys []string) (loss *graph.Node, grads, extra []*graph.Node, meta *program) {
	view := n.bindModel(g, nodes, src)
	n.ctx.SetTraining(g, true)
	out := n.callForward(view, batchNodes(nodes, routed(setOf(keys), n.forward)), width)
	loss = n.loss.call(view, valueOfOutputs(out), batchNodes(nodes, routed(setOf(keys), n.loss))).Interface().(*graph.Node)
	if loss == nil || loss.Rank() != 0 {
		panic(fmt.Errorf("Loss must return a scalar node, got %v", shapeOf(loss)))
	}
	var leaves []*graph.Node
	for _, grp := range n.groups {
		for _, v := range grp.vars {
			leaves = append(leaves, nodes["param/"+v.ScopeAndName()])
		}
	}
	// Gradients stay per array, as the optimizer reads them: packing them into one buffer per
	// group would cost a copy here and slices there.
	grads = graph.Gradient(loss, leaves...)
	for _, v := range n.stateVars {
		extra = append(extra, v.ValueGraph(g))
	}
	meta = &program{}
	if n.trainMetrics != nil {
		tm := n.trainMetrics.call(view, valueOfOutputs(out), batchNodes(nodes, routed(setOf(keys), n.trainMetrics))).Interface().(map[string]*graph.Node)
		for _, name := range sortedKeys(tm) {
			if tm[name] == nil || tm[name].Rank() != 0 {
				panic(fmt.Errorf("TrainMetrics %q must be a scalar node (a per-step diagnostic), got %v", name, shapeOf(tm[name])))
			}
			meta.outNames = append(meta.outNames, name)
			extra = append(extra, tm[name])
		}
	}
	return loss, grads, extra, meta
}

func shapeOf(n *graph.Node) string {
	if n == nil {
		return "nil"
	}
	return n.Shape().String()
}

// Train runs the loop for the resolved number of epochs: per optimizer step, accum runs of the
// gradient program then one run of the optimizer program; validation after each epoch when a
// "val" split exists. It returns an error for a non-finite loss, naming the step and epoch.
func (n *Nitro) Train() error {
	n.printReport()
	train, ok := n.data["train"]
	if !ok {
		return fmt.Errorf("Train needs a \"train\" split; BuildData returned %v", sortedKeys(n.data))
	}
	if n.opts.handleSignals {
		stop := n.watchInterrupt()
		defer stop()
	}
	// A RequestStop made before Train is kept: the run trains one epoch, validates and stops.
	n.interrupted.Store(false)
	defer n.stop.Store(false)
	n.stopReason = ""
	keys := routed(n.splitAvail["train"], n.forward, n.loss, n.trainMetrics)
	accum := n.cfg.accum.value
	batches := train.Len()
	for ep := n.epoch + 1; ep <= n.cfg.maxEpochs.value; ep++ {
		if es, ok := train.(EpochSource); ok {
			if err := es.BeginEpoch(ep); err != nil {
				return fmt.Errorf("epoch %d: BeginEpoch: %w", ep, err)
			}
		}
		start := time.Now()
		n.trainSums, n.trainCount = map[string]float64{}, 0
		var lossSum float64
		micro, steps := 0, 0
		for i := 0; i+accum <= batches; i += accum {
			var acc []*tensors.Tensor
			if accum > 1 {
				for _, g := range n.groups {
					for _, v := range g.vars {
						acc = append(acc, tensors.FromShape(v.Shape()))
					}
				}
			}
			if err := n.applyDeviceSchedules(n.step + 1); err != nil {
				return fmt.Errorf("epoch %d, step %d: %w", ep, n.step+1, err)
			}
			if n.opts.fused {
				b, err := train.BatchAt(i)
				if err != nil {
					return fmt.Errorf("epoch %d, train batch %d: %w", ep, i, err)
				}
				loss, err := n.fusedStep(b, keys)
				if err != nil {
					return fmt.Errorf("epoch %d, step %d: %w", ep, n.step+1, err)
				}
				lossSum += loss
				micro++
				n.step++
				steps++
				if math.IsNaN(loss) || math.IsInf(loss, 0) {
					return fmt.Errorf("non-finite loss %v at epoch %d, step %d: stopping; resume from the last checkpoint with a lower learning rate", loss, ep, n.step)
				}
				if n.interrupted.Load() {
					break
				}
				continue
			}
			var grads []*tensors.Tensor
			for k := 0; k < accum; k++ {
				b, err := train.BatchAt(i + k)
				if err != nil {
					return fmt.Errorf("epoch %d, train batch %d: %w", ep, i+k, err)
				}
				loss, g, err := n.gradientStep(b, keys, acc)
				if err != nil {
					return fmt.Errorf("epoch %d, step %d: %w", ep, n.step+1, err)
				}
				if math.IsNaN(loss) || math.IsInf(loss, 0) {
					return fmt.Errorf("non-finite loss %v at epoch %d, step %d (micro-batch %d): stopping; resume from the last checkpoint with a lower learning rate", loss, ep, n.step+1, k+1)
				}
				lossSum += loss
				micro++
				grads, acc = g, g
			}
			if err := n.optimizerStep(grads); err != nil {
				return fmt.Errorf("epoch %d, step %d: %w", ep, n.step+1, err)
			}
			n.step++
			steps++
			if n.interrupted.Load() {
				break // SIGINT: stop at this step boundary, then validate as usual
			}
		}
		res := EpochResult{Epoch: ep, TrainLoss: lossSum / float64(max(micro, 1)), Steps: steps}
		if len(n.trainSums) > 0 {
			res.Train = map[string]float64{}
			for k, v := range n.trainSums {
				res.Train[k] = v / float64(max(n.trainCount, 1))
			}
		}
		if _, ok := n.data["val"]; ok {
			m, err := n.Validate()
			if err != nil {
				return fmt.Errorf("epoch %d: %w", ep, err)
			}
			res.Val = m
		}
		res.Seconds = time.Since(start).Seconds()
		n.epoch = ep
		n.history = append(n.history, res)
		logged := map[string]float64{"train_loss": res.TrainLoss, "epoch_seconds": res.Seconds}
		for k, v := range res.Train {
			logged["train_"+k] = v
		}
		for k, v := range res.Val {
			if !strings.HasPrefix(k, "val_") {
				k = "val_" + k
			}
			logged[k] = v
		}
		n.logMetrics(logged)
		fmt.Fprintf(n.out, "epoch %d/%d  train_loss %.4f%s%s  (%.1fs, %.1f steps/s)\n", ep, n.cfg.maxEpochs.value, res.TrainLoss, formatMetrics("train_", res.Train), formatMetrics("", res.Val), res.Seconds, float64(steps)/res.Seconds)
		if n.stop.Load() || n.interrupted.Load() {
			n.stopReason = StopRequested
			return nil
		}
	}
	n.stopReason = StopCompleted
	return nil
}

// gradientStep runs the gradient program on one micro-batch and returns the validated loss and
// the (accumulated) gradients of every parameter array, still on the device.
func (n *Nitro) gradientStep(b Batch, keys []string, acc []*tensors.Tensor) (float64, []*tensors.Tensor, error) {
	w, err := n.trainBatchWidth(b)
	if err != nil {
		return 0, nil, err
	}
	p, err := n.gradientProgram(w, keys)
	if err != nil {
		return 0, nil, err
	}
	args := n.modelArgs(b, keys, true)
	for _, a := range acc {
		args = append(args, arg{t: a, donate: true, counter: &n.uploads.Batch})
	}
	outs, err := n.run(p, args)
	freeBatch(b, keys)
	if err != nil {
		return 0, nil, err
	}
	G, S := n.paramArrays(), len(n.stateVars)
	loss, err := readControlScalar(outs[0], "loss")
	if err != nil {
		return 0, nil, err
	}
	n.state = outs[1+G : 1+G+S]
	// Train metrics are logged, never branched on, so they skip the validated readback.
	for i, name := range p.outNames {
		n.trainSums[name] += scalarValue(outs[1+G+S+i])
	}
	n.trainCount++
	freeTensors(outs[0:1], outs[1+G+S:])
	return loss, outs[1 : 1+G], nil
}

// fusedStep runs the fused train step on one batch: parameters, optimizer state and layer state
// are replaced (donated) in place of the two-program step's gradient and optimizer runs. The
// program keeps the old parameters and state when the loss is non-finite, and the caller stops
// the run on that loss, as the two-program step does before its update.
func (n *Nitro) fusedStep(b Batch, keys []string) (float64, error) {
	w, err := n.trainBatchWidth(b)
	if err != nil {
		return 0, err
	}
	p, err := n.trainStepProgram(w, keys)
	if err != nil {
		return 0, err
	}
	step := n.step + 1
	args := n.modelArgs(b, keys, true)
	for i := range args[:n.paramArrays()] {
		args[i].donate = true // replaced by the update
	}
	for _, g := range n.groups {
		more, err := n.stateArgs(g, step)
		if err != nil {
			return 0, err
		}
		args = append(args, more...)
	}
	args = append(args, arg{t: tensors.FromScalar(float32(step)), counter: &n.uploads.Hyper})
	outs, err := n.run(p, args)
	freeBatch(b, keys)
	if err != nil {
		return 0, err
	}
	loss, err := readControlScalar(outs[0], "loss")
	if err != nil {
		return 0, err
	}
	rest := n.takeOptimizerOutputs(outs[1:])
	S := len(n.stateVars)
	n.state = rest[:S]
	for i, name := range p.outNames {
		n.trainSums[name] += scalarValue(rest[S+i])
	}
	n.trainCount++
	freeTensors(outs[0:1], rest[S:])
	return loss, nil
}

// trainBatchWidth is a train batch's row count, which must be the train split's.
func (n *Nitro) trainBatchWidth(b Batch) (int, error) {
	w, err := batchWidth(b)
	if err == nil && w != n.trainWidth {
		err = fmt.Errorf("train batch has %d rows, the train split's batches have %d: a train source must yield equal batches", w, n.trainWidth)
	}
	return w, err
}

// freeBatch releases the device copies of a batch's transferred fields as soon as the step that
// used them is done: the host GC cannot see device memory, so leaving them to finalizers can run
// the device out of memory while the host looks idle. Host data stays (the source may reuse it).
func freeBatch(b Batch, keys []string) {
	for _, k := range keys {
		if t := b[k]; t != nil && t.IsOnAnyDevice() {
			_ = t.InvalidateOnDevice()
		}
	}
}

// freeTensors finalizes program outputs already read back.
func freeTensors(groups ...[]*tensors.Tensor) {
	for _, ts := range groups {
		for _, t := range ts {
			if t != nil {
				_ = t.FinalizeAll()
			}
		}
	}
}

// modelArgs lists parameters, layer state (donated when it is replaced), Device fields and batch fields.
func (n *Nitro) modelArgs(b Batch, keys []string, donateState bool) []arg {
	var args []arg
	for _, g := range n.groups {
		for _, t := range g.leaves {
			args = append(args, arg{t: t, counter: &n.uploads.Params})
		}
	}
	for _, s := range n.state {
		args = append(args, arg{t: s, donate: donateState, counter: &n.uploads.LayerState})
	}
	for _, name := range n.devNames {
		args = append(args, arg{t: n.devVals[name], counter: &n.uploads.Device})
	}
	for _, k := range keys {
		args = append(args, arg{t: b[k], counter: &n.uploads.Batch})
	}
	return args
}

// readControlScalar is the one validated readback for scalars the driver branches on. A readback
// that returns garbage without raising is a documented failure on PJRT stacks, so the value's
// shape is checked and a failed transfer is an error, never a silent zero.
func readControlScalar(t *tensors.Tensor, what string) (v float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading %s back from the device: %v", what, r)
		}
	}()
	if t == nil || !t.Ok() {
		return 0, fmt.Errorf("reading %s back from the device: the buffer is invalid", what)
	}
	if !t.Shape().IsScalar() {
		return 0, fmt.Errorf("reading %s back: expected a scalar, got %s", what, t.Shape())
	}
	switch x := t.Value().(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	default:
		return 0, fmt.Errorf("reading %s back: expected a float scalar, got %T", what, x)
	}
}

// watchInterrupt turns SIGINT into RequestStop until the returned teardown runs.
func (n *Nitro) watchInterrupt() func() {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(ch, os.Interrupt)
	go func() {
		select {
		case <-ch:
			fmt.Fprintln(n.out, "interrupt: stopping after this step, then validating (interrupt again to kill)")
			n.interrupted.Store(true)
			signal.Stop(ch)
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

func formatMetrics(prefix string, m map[string]float64) string {
	s := ""
	for _, k := range sortedKeys(m) {
		s += fmt.Sprintf("  %s%s %.4f", prefix, k, m[k])
	}
	return s
}
