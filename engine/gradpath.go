package engine

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// gradientReach is the set of nodes a gradient of loss can flow back to: loss itself and,
// transitively, the inputs of every node in the set that is not a stop-gradient (graph.StopGradient,
// and the ops GoMLX marks so, such as Sign). graph.Gradient back-propagates along these edges only
// and answers a leaf it never reaches with a zeros constant, so a parameter outside the set has a
// zero gradient whatever the batch: that is decided by the graph, not by values. The set is an
// over-approximation (an op whose derivative is zero by definition, a comparison or a mask's
// condition, still links its inputs), so a parameter inside it may yet get zeros; and one that is
// live but zero for a batch (a ReLU below zero, a mask of zeros) is inside it and never refused.
func gradientReach(loss *graph.Node) map[graph.NodeId]bool {
	seen := map[graph.NodeId]bool{loss.Id(): true}
	stack := []*graph.Node{loss}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.StopGradient() {
			continue
		}
		for _, in := range n.Inputs() {
			if in != nil && !seen[in.Id()] {
				seen[in.Id()] = true
				stack = append(stack, in)
			}
		}
	}
	return seen
}

// deadGroups checks which of groups (leaves: their parameters' nodes, in group order) loss
// reaches. It returns a description of each group none of whose parameters it reaches, for the
// caller's refusal; a group loss reaches in part is common (a bias a model never adds), so it is
// kept, and the parameters left out are reported once per hook and group through warn.
func (e *Engine) deadGroups(hook string, loss *graph.Node, groups []*paramGroup, leaves []*graph.Node) []string {
	reach := gradientReach(loss)
	var dead []string
	k := 0
	for _, grp := range groups {
		var missing []string
		for j := range grp.vars {
			if !reach[leaves[k].Id()] {
				missing = append(missing, strings.Join(grp.keypaths[j], "/"))
			}
			k++
		}
		switch {
		case len(missing) == 0:
		case len(missing) == len(grp.vars):
			dead = append(dead, fmt.Sprintf("parameter group %q (%s)", grp.name, fewNames(missing)))
		default:
			key := hook + "\x00" + grp.name
			if !e.zeroWarned[key] {
				if e.zeroWarned == nil {
					e.zeroWarned = map[string]bool{}
				}
				e.zeroWarned[key] = true
				e.warn(fmt.Sprintf("%s: %d of parameter group %q's %d parameters get no gradient, so training leaves them at their initial values: %s; "+
					"if they belong to the model, make the loss depend on them, else create them non-trainable or drop them",
					hook, len(missing), grp.name, len(grp.vars), fewNames(missing)))
			}
		}
	}
	return dead
}

// fewNames lists the first few names and counts the rest, so an error about a large group stays
// one readable line.
func fewNames(names []string) string {
	const few = 3
	if len(names) <= few {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:few], ", "), len(names)-few)
}
