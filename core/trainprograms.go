package core

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/compilecache"
)

func dtypeOf(name string) dtypes.DType { return dtypes.MapOfNames[name] }

// accFirst names the gradient program's Bool input that says a micro-batch is its optimizer
// step's first (accum > 1 only): its sums then start from zeros on the device.
const accFirst = "accum/first"

// gradientProgram: parameters, layer state, Device fields and the routed batch fields (plus, when
// accum > 1, the running gradient sums and a Bool scalar "first") -> loss, the gradient of every
// parameter array (when accum > 1: the sums plus this micro-batch's gradient / accum), new layer
// state, train metrics. accum bakes in (as 1/accum), so it is in this program's key and no other's.
//
// On the first micro-batch of an optimizer step "first" is true and the program adds to zeros of
// its own instead of the sums input, so the step starts its sums on the device: the caller passes
// any parameter-shaped device buffers there (the parameters themselves, not donated) and nothing
// parameter-sized is uploaded. One program serves every micro-batch, so the compile count does not
// change with accum, and a micro-batch reads no more than before (the select reads the sums input
// the add read). Adding the selected zero (rather than selecting the gradient) keeps the sums
// bitwise equal to adding uploaded zeros, signed zeros included.
func (n *Nitro) gradientProgram(width int, keys []string) (*program, error) {
	return n.trainProgram("gradient", width, keys, func() (*program, error) {
		sig := n.modelInputs(width, keys)
		accum := n.cfg.accum.value
		if accum > 1 {
			for _, g := range n.groups {
				for _, v := range g.vars {
					sig.add("acc/"+v.ScopeAndName(), v.DType().String(), v.Shape().Dimensions)
				}
			}
			sig.add(accFirst, "Bool", nil)
		}
		key := n.key(compilecache.KindGradient, hookNames(n.forward, n.loss, n.trainMetrics), sig)
		key.Accum = accum
		return n.getProgram(key, func(g *graph.Graph, src any) ([]*graph.Node, *program) {
			nodes := sig.params(g, n.varInputs)
			loss, grads, extra, meta := n.traceTrain(g, nodes, src, width, keys)
			if accum > 1 {
				first := nodes[accFirst]
				k := 0
				for _, grp := range n.groups {
					for _, v := range grp.vars {
						sum := graph.Where(first, graph.ScalarZero(g, v.DType()), nodes["acc/"+v.ScopeAndName()])
						grads[k] = graph.Add(sum, graph.MulScalar(grads[k], 1/float64(accum)))
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
	return n.trainProgram("train_step", width, keys, func() (*program, error) {
		sig := n.modelInputs(width, keys)
		for i := range n.groups {
			n.addStateInputs(&sig, i)
		}
		sig.add("step", "Float32", nil)
		key := n.key(compilecache.KindTrainStep, hookNames(n.forward, n.loss, n.trainMetrics)+"+optimizer", sig)
		key.Accum, key.Clip = 1, n.cfg.clip.value
		for _, g := range n.groups {
			key.Extra = append(key.Extra, [2]string{"chain/" + g.name, g.opt.Describe()})
		}
		return n.getProgram(key, func(g *graph.Graph, src any) ([]*graph.Node, *program) {
			nodes := sig.params(g, n.varInputs)
			loss, grads, extra, meta := n.traceTrain(g, nodes, src, width, keys)
			in := make([]groupUpdate, len(n.groups))
			for i, grp := range n.groups {
				in[i] = n.groupInputs(i, nodes)
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
				for s := range n.st.groups[i].opt {
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
	loss = addTerms(loss, collectedLosses(n.ctx, g))
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

// collectedLosses is the sum of the terms GoMLX layers collected on g with train.AddLoss (a
// regularizer's L2, for one), nil when none: GoMLX's trainer optimizes and reports Loss plus
// them, so the training programs do too. Evaluation leaves them out (GoMLX's eval "loss" does).
func collectedLosses(ctx *context.Context, g *graph.Graph) *graph.Node {
	v, _ := ctx.InAbsPath(train.TrainerAbsoluteScope).GetGraphParam(g, train.TrainerLossGraphParamKey)
	node, _ := v.(*graph.Node)
	return node
}

// addTerms is loss plus the collected terms, these in the loss's dtype (a mixed-precision layer
// may collect them in a narrower one).
func addTerms(loss, terms *graph.Node) *graph.Node {
	if terms == nil {
		return loss
	}
	if terms.DType() != loss.DType() {
		terms = graph.ConvertDType(terms, loss.DType())
	}
	return graph.Add(loss, terms)
}

func shapeOf(n *graph.Node) string {
	if n == nil {
		return "nil"
	}
	return n.Shape().String()
}
