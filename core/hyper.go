package core

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/optimizers"
)

// Optional per-group optimizer accessors (Level 0). Group rates are ratios to LearningRate.
type (
	// GroupLearningRater gives a group's base learning rate.
	GroupLearningRater interface{ LearningRateGroup(group string) float64 }
	// GroupLambdaer gives a group's decay coefficient (default: Lambda, itself 0 by default).
	GroupLambdaer interface{ LambdaGroup(group string) float64 }
	// DecayAnchorer gives what a group decays toward (default: zero).
	DecayAnchorer interface {
		DecayAnchor(group string) optimizers.Anchor
	}
	// NoDecayer says whether a parameter leaf is excluded from decay (default: 1-D leaves).
	NoDecayer interface {
		NoDecay(keypath []string, shape shapes.Shape) bool
	}
)

// groupLR is a group's base learning rate and its ratio to the default group's.
func (n *Nitro) groupRatio(group string) float64 {
	if gl, ok := n.e.(GroupLearningRater); ok {
		return gl.LearningRateGroup(group) / n.cfg.lr.value
	}
	return 1
}

func (n *Nitro) groupLambda(group string) float64 {
	if gl, ok := n.e.(GroupLambdaer); ok {
		return gl.LambdaGroup(group)
	}
	return n.cfg.lambda.value
}

// buildOptimizer builds a group's chain at Level 0: RAdam, then Decay when the group's lambda is
// non-zero (so by default there is no Decay in the chain at all).
func (n *Nitro) buildOptimizer(g *paramGroup, flat *tensors.Tensor) (groupOptimizer, error) {
	if r := n.groupRatio(g.name); r <= 0 || r != r {
		return nil, fmt.Errorf("group %q: learning-rate ratio %v to LearningRate %v: group rates must be positive", g.name, r, n.cfg.lr.value)
	}
	radam := optimizers.NewRAdam()
	radam.Eta = n.cfg.lr.value
	t, err := radam.Build()
	if err != nil {
		return nil, err
	}
	ts := []optimizers.Transform{t}
	if n.groupLambda(g.name) != 0 {
		leaves := make([]optimizers.ParamLeaf, len(g.vars))
		for i, v := range g.vars {
			leaves[i] = optimizers.ParamLeaf{Keypath: g.keypaths[i], Shape: v.Shape()}
		}
		layout, err := optimizers.NewLayout(g.name, leaves)
		if err != nil {
			return nil, err
		}
		noDecay := optimizers.DefaultNoDecay
		if nd, ok := n.e.(NoDecayer); ok {
			noDecay = nd.NoDecay
		}
		anchor := optimizers.AnchorZero
		if da, ok := n.e.(DecayAnchorer); ok {
			anchor = da.DecayAnchor(g.name)
		}
		ts = append(ts, optimizers.Decay(anchor, layout.NoDecayMask(noDecay)))
	}
	return optimizers.NewChain(ts...)
}

// hyperValues are a group's schedulable values at an optimizer step (1-based).
func (n *Nitro) hyperValues(g *paramGroup, step int) (map[string]float64, error) {
	base := map[string]float64{optimizers.EtaField: n.cfg.lr.value}
	if l := n.groupLambda(g.name); l != 0 {
		base[optimizers.LambdaField] = l
	}
	return optimizers.EffectiveHyper(base, n.groupRatio(g.name))
}
