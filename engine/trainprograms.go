package engine

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/nitro-go/nitro/compilecache"
)

// accFirst names the gradient program's Bool input that says a micro-batch is its optimizer
// step's first (accum > 1 only): its sums then start from zeros on the device.
const accFirst = "accum/first"

// gradientProgram: parameters (per group its segments and offsets, flat.go), layer state, Device
// fields and the routed batch fields (plus, when accum > 1, the running gradient sums, one per
// segment, and a Bool scalar "first") -> "loss", every group's "grads/<group>/<segment>" (when
// accum > 1: the sums plus this micro-batch's gradient / accum, each replacing its sum), the new
// layer state ("state/<variable>", replacing the old) and the train metrics ("metric/<name>"):
// outputs.go's names. accum bakes in (as 1/accum), so it is in this program's key and no other's.
//
// On the first micro-batch of an optimizer step "first" is true and the program adds to zeros of
// its own instead of the sums input, so the step starts its sums on the device: the caller passes
// any parameter-shaped device buffers there (the parameters themselves, not donated) and nothing
// parameter-sized is uploaded. One program serves every micro-batch, so the compile count does not
// change with accum, and a micro-batch reads no more than before (the select reads the sums input
// the add read). Adding the selected zero (rather than selecting the gradient) keeps the sums
// bitwise equal to adding uploaded zeros, signed zeros included.
func (e *Engine) gradientProgram(width int, keys []string) (*program, error) {
	return e.trainProgram("gradient", width, keys, func() (*program, error) {
		sig := e.modelInputs(width, keys)
		accum := e.accum
		if accum > 1 {
			for _, g := range e.groups {
				g.addSegmentInputs(&sig, accInput)
			}
			sig.add(accFirst, "Bool", nil)
		}
		key := e.key(compilecache.KindGradient, e.hookNames("Forward", "Loss", "TrainMetrics"), sig)
		key.Accum = accum
		return e.getProgram(key, func(g *graph.Graph, src any) outList {
			nodes, views := e.modelNodes(g, sig)
			loss, grads, after := e.traceTrain(g, nodes, views, src, width, keys)
			var outs outList
			outs.add(lossOut, loss)
			for _, grp := range e.groups {
				for s := range grp.segs {
					grad := grads[0]
					grads = grads[1:]
					if accum == 1 {
						outs.add(gradsInput(grp, s), grad)
						continue
					}
					sum := graph.Where(nodes[accFirst], graph.ScalarZero(g, dtypeOf(grp.dtype)), nodes[accInput(grp, s)])
					outs.replacing(gradsInput(grp, s), graph.Add(sum, graph.MulScalar(grad, 1/float64(accum))), accInput(grp, s))
				}
			}
			outs.then(after)
			return outs
		})
	})
}

// trainStepProgram is the fused step (WithFusedStep, accum 1): the gradient program's inputs plus
// every group's optimizer state and hyperparameters and the step -> "loss", the optimizer's
// updates (emitUpdates: "params/..." and "opt/..."), the new layer state and the train metrics,
// as the gradient program names them. One program per step instead of two; its key holds the
// clip threshold (and accum, always 1), so a clip sweep recompiles the whole step.
func (e *Engine) trainStepProgram(width int, keys []string) (*program, error) {
	return e.trainProgram("train_step", width, keys, func() (*program, error) {
		sig := e.modelInputs(width, keys)
		for i := range e.groups {
			e.addStateInputs(&sig, i)
		}
		sig.add("step", "Float32", nil)
		key := e.key(compilecache.KindTrainStep, e.hookNames("Forward", "Loss", "TrainMetrics")+"+optimizer", sig)
		key.Accum, key.Clip = 1, e.clip
		for _, g := range e.groups {
			key.Extra = append(key.Extra, [2]string{"chain/" + g.name, g.opt.Describe()})
		}
		return e.getProgram(key, func(g *graph.Graph, src any) outList {
			nodes, views := e.modelNodes(g, sig)
			loss, grads, after := e.traceTrain(g, nodes, views, src, width, keys)
			in := make([]groupUpdate, len(e.groups))
			for i, grp := range e.groups {
				in[i] = e.groupInputs(i, nodes)
				in[i].params = segmentNodes(grp, nodes, paramsInput)
				in[i].grads, grads = grads[:len(grp.segs)], grads[len(grp.segs):]
			}
			outs := outList{}
			outs.add(lossOut, loss)
			outs.then(keepIfFinite(loss, e.emitUpdates(in, nodes["step"]), nodes))
			outs.then(after)
			return outs
		})
	})
}

// keepIfFinite makes each update (named as the input it updates) keep that input when the loss is
// non-finite, as the two-program step does by stopping before its update: the run stops on that
// loss with nothing overwritten.
//
// The fused and manual step programs alias no update to its input (only the layer state): in one
// program the backward pass reads the old parameters, and XLA may schedule that read after the
// update: an aliased parameter segment is then copied whole into a temporary first (the CNN's
// f32[802816] dense segment, the MLP's f32[262144], every step), and the CNN's fused step took
// about 20% more XLA time than without aliasing. The optimizer state was copied likewise. The
// two-program optimizer program reads each input only in its update and aliases them all with no
// copy.
func keepIfFinite(loss *graph.Node, updates outList, nodes map[string]*graph.Node) outList {
	finite := graph.IsFinite(loss)
	var outs outList
	for k, name := range updates.names {
		outs.add(name, graph.Where(finite, updates.nodes[k], nodes[name]))
	}
	return outs
}

// traceTrain traces Forward, Loss and TrainMetrics on a training program's inputs (views: each
// group's variables bound to their views of its flat parameters) and returns the loss, every
// segment's gradient (in group order), and the outputs that follow the update in every
// training program: the new layer state (replacing the old), then the train metrics. A parameter
// group the loss cannot reach in the graph is refused here (see deadGroups).
func (e *Engine) traceTrain(g *graph.Graph, nodes map[string]*graph.Node, views [][]*graph.Node, src any, width int, keys []string) (loss *graph.Node, grads []*graph.Node, after outList) {
	view := e.bindModel(g, nodes, src)
	e.ctx.SetTraining(g, true)
	out := e.callForward(view, batchNodes(nodes, e.route("Forward", keys)), width)
	loss = e.hooks.Loss(view, out, batchNodes(nodes, e.route("Loss", keys)))
	if loss == nil || loss.Rank() != 0 {
		panic(fmt.Errorf("Loss must return a scalar node, got %v", shapeOf(loss)))
	}
	loss = addTerms(loss, collectedLosses(e.ctx, g))
	var leaves []*graph.Node
	for _, vs := range views {
		leaves = append(leaves, vs...)
	}
	// Every training program (two-program, fused, on a mesh) traces here, so this refusal covers
	// them all: a group the loss cannot reach would train without an error and never change.
	if dead := e.deadGroups("Loss", loss, e.groups, leaves); len(dead) > 0 {
		panic(fmt.Errorf("Loss: %s gets no gradient: the training loss (Loss plus the train.AddLoss terms) depends on "+
			"none of its parameters, so every step would leave them unchanged. Loss must compute from Forward's outputs, and "+
			"Forward must read the group's variables through the context it is given (a value passed through "+
			"graph.StopGradient carries no gradient); a group meant to stay fixed should be created non-trainable "+
			"(context.Variable.SetTrainable(false)) or removed from the model", strings.Join(dead, " and ")))
	}
	// Differentiated with respect to the views, each array's gradient in its own shape, then
	// packed into the group's segments: the one copy that lets the optimizer program take one
	// buffer per group.
	arrays := graph.Gradient(loss, leaves...)
	for i, vs := range views {
		grads = append(grads, e.groups[i].pack(arrays[:len(vs)])...)
		arrays = arrays[len(vs):]
	}
	after = e.layerOutputs(g)
	if e.hooks.TrainMetrics != nil {
		tm := e.hooks.TrainMetrics(view, out, batchNodes(nodes, e.route("TrainMetrics", keys)))
		for _, name := range sortedKeys(tm) {
			if tm[name] == nil || tm[name].Rank() != 0 {
				panic(fmt.Errorf("TrainMetrics %q must be a scalar node (a per-step diagnostic), got %v", name, shapeOf(tm[name])))
			}
			after.add(metricOut+name, tm[name])
		}
	}
	return loss, grads, after
}

// layerOutputs is the new layer state, each variable replacing its input.
func (e *Engine) layerOutputs(g *graph.Graph) outList {
	var outs outList
	for _, v := range e.stateVars {
		name := layerInput(v.ScopeAndName())
		outs.replacing(name, v.ValueGraph(g), name)
	}
	return outs
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

func shapeOf(node *graph.Node) string {
	if node == nil {
		return "nil"
	}
	return node.Shape().String()
}
