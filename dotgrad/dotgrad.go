package dotgrad

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

var (
	installOnce sync.Once
	installed   atomic.Bool

	// The gradients GoMLX had registered when Install ran; used as fallbacks.
	originals = map[graph.NodeType]graph.VJP{}

	// fallbacks counts the calls handed to the original gradients; tests read it.
	fallbacks atomic.Int64
)

// Install replaces GoMLX's registered gradients of Dot and DotGeneral nodes with ones computed as
// matrix products. Only the first call does anything; later calls return at once.
//
// It writes graph.VJPRegistration, a process-wide map GoMLX reads without a lock while it builds
// gradients: call Install before any graph is built (at the start of main, or in TestMain), never
// concurrently with graph building. Any GoMLX program may call it; it needs nothing else from nitro.
func Install() {
	installOnce.Do(func() {
		originals[graph.NodeTypeDot] = graph.VJPRegistration[graph.NodeTypeDot]
		originals[graph.NodeTypeDotGeneral] = graph.VJPRegistration[graph.NodeTypeDotGeneral]
		graph.VJPRegistration[graph.NodeTypeDot] = dotVJP
		graph.VJPRegistration[graph.NodeTypeDotGeneral] = dotGeneralVJP
		installed.Store(true)
	})
}

// Installed reports whether Install has run.
func Installed() bool { return installed.Load() }

// Original returns the gradient GoMLX had registered for t before Install replaced it, or, for a
// node type Install does not replace (or before Install ran), the one registered now. It is nil if
// none is registered. Useful to compare the two gradients.
func Original(t graph.NodeType) graph.VJP {
	if installed.Load() {
		if vjp, ok := originals[t]; ok {
			return vjp
		}
	}
	return graph.VJPRegistration[t]
}

// fallback calls the original gradient of node's type.
func fallback(node *graph.Node, vjps []*graph.Node, outputShape shapes.Shape) []*graph.Node {
	fallbacks.Add(1)
	vjp := originals[node.Type()]
	if vjp == nil {
		panic(fmt.Sprintf("dotgrad: no original gradient registered for %s nodes to fall back to (node %s)", node.Type(), node))
	}
	return vjp(node, vjps, outputShape)
}

// dims describes a dot product: the contracting and batch axes of each operand.
type dims struct {
	lhsContracting, lhsBatch []int
	rhsContracting, rhsBatch []int
}

// dotVJP is the gradient of a Dot node: lhs rank 1 or 2 contracted on its last axis with the
// first axis of rhs (rank 1 or 2).
func dotVJP(node *graph.Node, vjps []*graph.Node, outputShape shapes.Shape) []*graph.Node {
	if in := node.Inputs(); len(in) == 2 && in[0].Rank() >= 1 && in[0].Rank() <= 2 && in[1].Rank() >= 1 && in[1].Rank() <= 2 {
		d := dims{lhsContracting: []int{in[0].Rank() - 1}, rhsContracting: []int{0}}
		if grads := gradients(node, vjps, d); grads != nil {
			return grads
		}
	}
	return fallback(node, vjps, outputShape)
}

// dotGeneralVJP is the gradient of a DotGeneral node.
func dotGeneralVJP(node *graph.Node, vjps []*graph.Node, outputShape shapes.Shape) []*graph.Node {
	if d, ok := dotGeneralDims(node); ok {
		if grads := gradients(node, vjps, d); grads != nil {
			return grads
		}
	}
	return fallback(node, vjps, outputShape)
}

// dotGeneralRE matches what GoMLX v0.25.0 prints for a DotGeneral node's inputs (nodeInputsDotGeneral.String).
var dotGeneralRE = regexp.MustCompile(`^` + regexp.QuoteMeta(graph.NodeTypeDotGeneral.String()) +
	`\(lhs=\[#(\d+)\], lhsContractingAxes=\[([0-9 ]*)\], lhsBatchAxes=\[([0-9 ]*)\], ` +
	`rhs=\[#(\d+)\], rhsContractingAxes=\[([0-9 ]*)\], rhsBatchAxes=\[([0-9 ]*)\]\)`)

// dotGeneralDims reads the axes of a DotGeneral node from its String(), the only exported view of
// them. ok is false if the text does not parse, names other inputs, or does not agree with the shapes.
func dotGeneralDims(node *graph.Node) (d dims, ok bool) {
	in := node.Inputs()
	if node.Type() != graph.NodeTypeDotGeneral || len(in) != 2 {
		return d, false
	}
	s := node.String()
	if alias := node.GetAlias(); alias != "" {
		prefix := fmt.Sprintf("[%q] ", alias)
		if !strings.HasPrefix(s, prefix) {
			return d, false
		}
		s = s[len(prefix):]
	}
	m := dotGeneralRE.FindStringSubmatch(s)
	if m == nil || m[1] != strconv.Itoa(int(in[0].Id())) || m[4] != strconv.Itoa(int(in[1].Id())) {
		return d, false
	}
	lists := make([][]int, 4)
	for i, text := range []string{m[2], m[3], m[5], m[6]} {
		for _, f := range strings.Fields(text) {
			axis, err := strconv.Atoi(f)
			if err != nil {
				return d, false
			}
			lists[i] = append(lists[i], axis)
		}
	}
	d = dims{lhsContracting: lists[0], lhsBatch: lists[1], rhsContracting: lists[2], rhsBatch: lists[3]}
	return d, true
}

// free lists, ascending, the axes of a rank-r operand that are neither contracting nor batch; ok is
// false if an axis is out of range or repeated.
func free(rank int, contracting, batch []int) (axes []int, ok bool) {
	used := make([]bool, rank)
	for _, a := range slices.Concat(contracting, batch) {
		if a < 0 || a >= rank || used[a] {
			return nil, false
		}
		used[a] = true
	}
	for a, u := range used {
		if !u {
			axes = append(axes, a)
		}
	}
	return axes, true
}

// gradients returns the gradients of node (lhs·rhs contracted and batched as d says) with respect to
// its two operands, or nil if this case is left to the original gradient: d does not agree with the
// shapes, the adjoint is not shaped like the output (a Jacobian), or the dtypes are not one float.
func gradients(node *graph.Node, vjps []*graph.Node, d dims) []*graph.Node {
	if len(vjps) != 1 || vjps[0] == nil || node.NumOutputs() != 1 {
		return nil
	}
	v := vjps[0]
	lhs, rhs := node.Inputs()[0], node.Inputs()[1]
	dtype := node.DType()
	if !dtype.IsFloat() || lhs.DType() != dtype || rhs.DType() != dtype || !v.Shape().Equal(node.Shape()) {
		return nil
	}
	if len(d.lhsContracting) != len(d.rhsContracting) || len(d.lhsBatch) != len(d.rhsBatch) {
		return nil
	}
	lhsFree, ok := free(lhs.Rank(), d.lhsContracting, d.lhsBatch)
	if !ok {
		return nil
	}
	rhsFree, ok := free(rhs.Rank(), d.rhsContracting, d.rhsBatch)
	if !ok {
		return nil
	}
	ld, rd := lhs.Shape().Dimensions, rhs.Shape().Dimensions
	for i := range d.lhsContracting {
		if ld[d.lhsContracting[i]] != rd[d.rhsContracting[i]] {
			return nil
		}
	}
	want := make([]int, 0, node.Rank())
	for i := range d.lhsBatch {
		if ld[d.lhsBatch[i]] != rd[d.rhsBatch[i]] {
			return nil
		}
		want = append(want, ld[d.lhsBatch[i]])
	}
	for _, a := range lhsFree {
		want = append(want, ld[a])
	}
	for _, a := range rhsFree {
		want = append(want, rd[a])
	}
	if !slices.Equal(want, node.Shape().Dimensions) {
		return nil
	}
	nb := len(d.lhsBatch)
	vBatch := axisRange(0, nb)
	vLhsFree := axisRange(nb, len(lhsFree))
	vRhsFree := axisRange(nb+len(lhsFree), len(rhsFree))
	return []*graph.Node{
		operandGradient(v, vRhsFree, vBatch, rhs, rhsFree, d.rhsBatch, d.lhsContracting, d.lhsBatch, lhsFree, d.rhsContracting),
		operandGradient(v, vLhsFree, vBatch, lhs, lhsFree, d.lhsBatch, d.rhsContracting, d.rhsBatch, rhsFree, d.lhsContracting),
	}
}

// operandGradient returns the gradient with respect to one operand ("this") of a dot product, given
// the adjoint v and the other operand. vContract are the axes of v that came from other's free axes
// (otherFree), vBatch the batch axes of v, matching otherBatch. The product of v and other,
// contracting those and batching these, has axes [batch..., this free..., other contracting axes in
// other's axis order]; it is then transposed to this operand's axis order: thisBatch[i] takes axis
// i, thisFree[j] axis nb+j, and thisContracting[k] the position of otherContracting[k] among other's
// contracting axes sorted.
func operandGradient(v *graph.Node, vContract, vBatch []int, other *graph.Node, otherFree, otherBatch []int,
	thisContracting, thisBatch, thisFree, otherContracting []int) *graph.Node {
	var product *graph.Node
	if v.Rank() == 0 {
		// A full contraction (e.g. vector·vector): the product is other scaled by the scalar v.
		product = graph.Mul(v, other)
	} else {
		product = graph.DotGeneral(v, vContract, vBatch, other, otherFree, otherBatch)
	}
	nb, nf := len(thisBatch), len(thisFree)
	sortedContracting := slices.Sorted(slices.Values(otherContracting))
	perm := make([]int, nb+nf+len(thisContracting))
	for i, a := range thisBatch {
		perm[a] = i
	}
	for j, a := range thisFree {
		perm[a] = nb + j
	}
	for k, a := range thisContracting {
		perm[a] = nb + nf + slices.Index(sortedContracting, otherContracting[k])
	}
	if isIdentity(perm) {
		return product
	}
	return graph.TransposeAllAxes(product, perm...)
}

func axisRange(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

func isIdentity(perm []int) bool {
	for i, p := range perm {
		if i != p {
			return false
		}
	}
	return true
}
