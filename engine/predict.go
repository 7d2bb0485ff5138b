package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/prefetch"
)

// Predict runs Forward in eval mode on one host batch b, padded to width by repeating its last
// row, and returns Forward's outputs on the host sliced to its first real rows. fwd are the
// fields Forward reads; keys the fields the program takes: with shared, the full-width eval
// program over keys (so that Validate/Evaluate and Predict share one compiled forward; a field
// only Metrics or Loss reads gets zeros), else Forward alone over fwd.
func (e *Engine) Predict(b map[string]*tensors.Tensor, fwd, keys []string, shared bool, width, real int) (map[string]*tensors.Tensor, error) {
	var p *program
	var err error
	if shared {
		p, err = e.evalProgram(width, width, keys)
	} else {
		p, err = e.predictProgram(width, fwd)
	}
	if err != nil {
		return nil, err
	}
	padded := make(map[string]*tensors.Tensor, len(keys))
	for _, k := range keys {
		if slices.Contains(fwd, k) {
			padded[k] = prefetch.PadRows(b[k], width)
			continue
		}
		fs := e.fieldShapes[k]
		padded[k] = tensors.FromShape(shapes.Make(dtypeOf(fs.DType), append([]int{width}, fs.Row...)...))
	}
	outs, err := e.execute(p, e.modelArgs(padded, keys, false))
	if err = errors.Join(err, freeBatch(padded, keys)); err != nil {
		return nil, err
	}
	// Forward's outputs; an eval program's metrics before them are freed unread.
	r := e.results(p, outs)
	names, ts := r.prefixed(forwardOut)
	var rest []*tensors.Tensor
	for _, out := range p.outputs {
		if !strings.HasPrefix(out, forwardOut) {
			rest = append(rest, r.one(out))
		}
	}
	if err := errors.Join(r.done(), freeTensors(rest)); err != nil {
		return nil, errors.Join(err, freeTensors(ts))
	}
	res := map[string]*tensors.Tensor{}
	for i, name := range names {
		name = strings.TrimPrefix(name, forwardOut)
		if res[name], err = sliceRowsHost(ts[i], real); err != nil {
			return nil, fmt.Errorf("reading output %q back: %w", name, err)
		}
	}
	return res, nil
}

// predictProgram: Forward alone, at one width, returning every output ("forward/<name>").
func (e *Engine) predictProgram(width int, keys []string) (*program, error) {
	return e.memo(fmt.Sprintf("predict/%d/%v", width, keys), func() (*program, error) {
		sig := e.modelInputs(width, keys)
		key := e.key(compilecache.KindPredict, e.hookNames("Forward"), sig)
		return e.getProgram(key, func(g *graph.Graph, src any) outList {
			nodes, _ := e.modelNodes(g, sig)
			view := e.bindModel(g, nodes, src)
			e.ctx.SetTraining(g, false)
			return forwardOutputs(e.callForward(view, batchNodes(nodes, keys), width))
		})
	})
}

// sliceRowsHost brings t to the host and keeps its first rows.
func sliceRowsHost(t *tensors.Tensor, rows int) (*tensors.Tensor, error) {
	dims := t.Shape().Dimensions
	if dims[0] == rows {
		t.MaterializeLocal() // panics on a failed transfer: predictPadded recovers it into an error
		return t, nil
	}
	out := tensors.FromShape(shapes.Make(t.DType(), append([]int{rows}, dims[1:]...)...))
	var inner error
	err := t.ConstBytes(func(src []byte) {
		inner = out.MutableBytes(func(dst []byte) { copy(dst, src[:len(dst)]) })
	})
	return out, errors.Join(err, inner, t.FinalizeAll())
}
