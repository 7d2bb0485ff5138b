package precision

import (
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gopjrt/dtypes"
)

var wrappers sync.Map // backends.Backend -> *castBackend

// Backend returns the backend programs are built on under m: b itself when m is off, else b's
// bfloat16 twin, the same one for every call with b. GoMLX ties a tensor to the backend value it
// was placed with, so everything a run uploads and compiles must go through one backend value;
// the twin forwards all but Builder to b, and Finalize too (b belongs to its owner).
func (m Mode) Backend(b backends.Backend) backends.Backend {
	if !m.Enabled() || b == nil {
		return b
	}
	if w, ok := b.(*castBackend); ok {
		return w
	}
	w, _ := wrappers.LoadOrStore(b, &castBackend{Backend: b})
	return w.(*castBackend)
}

// castBackend hands out builders that compute float32 products in bfloat16.
type castBackend struct{ backends.Backend }

func (c *castBackend) Builder(name string) backends.Builder {
	return &castBuilder{Builder: c.Backend.Builder(name)}
}

// castBuilder converts the float32 operands of Dot, DotGeneral and ConvGeneral (every product
// op of the backend interface) to bfloat16 and the result back to float32; operands of any other
// dtype pass as they are.
type castBuilder struct{ backends.Builder }

func (b *castBuilder) Dot(lhs, rhs backends.Op) (backends.Op, error) {
	ops, ok, err := b.narrow(lhs, rhs)
	if err != nil {
		return nil, err
	}
	if !ok {
		return b.Builder.Dot(lhs, rhs)
	}
	out, err := b.Builder.Dot(ops[0], ops[1])
	if err != nil {
		return nil, err
	}
	return b.Builder.ConvertDType(out, dtypes.Float32)
}

func (b *castBuilder) DotGeneral(lhs backends.Op, lhsContracting, lhsBatch []int, rhs backends.Op, rhsContracting, rhsBatch []int) (backends.Op, error) {
	ops, ok, err := b.narrow(lhs, rhs)
	if err != nil {
		return nil, err
	}
	if !ok {
		return b.Builder.DotGeneral(lhs, lhsContracting, lhsBatch, rhs, rhsContracting, rhsBatch)
	}
	out, err := b.Builder.DotGeneral(ops[0], lhsContracting, lhsBatch, ops[1], rhsContracting, rhsBatch)
	if err != nil {
		return nil, err
	}
	return b.Builder.ConvertDType(out, dtypes.Float32)
}

func (b *castBuilder) ConvGeneral(input, kernel backends.Op, axes backends.ConvolveAxesConfig, strides []int, paddings [][2]int,
	inputDilations, kernelDilations []int, channelGroupCount, batchGroupCount int) (backends.Op, error) {
	ops, ok, err := b.narrow(input, kernel)
	if err != nil {
		return nil, err
	}
	if !ok {
		return b.Builder.ConvGeneral(input, kernel, axes, strides, paddings, inputDilations, kernelDilations, channelGroupCount, batchGroupCount)
	}
	out, err := b.Builder.ConvGeneral(ops[0], ops[1], axes, strides, paddings, inputDilations, kernelDilations, channelGroupCount, batchGroupCount)
	if err != nil {
		return nil, err
	}
	return b.Builder.ConvertDType(out, dtypes.Float32)
}

// narrow converts both operands to bfloat16 when both are float32 (ok); otherwise it leaves
// them to the wrapped builder.
func (b *castBuilder) narrow(x, y backends.Op) (ops [2]backends.Op, ok bool, err error) {
	for i, op := range []backends.Op{x, y} {
		s, err := b.OpShape(op)
		if err != nil {
			return ops, false, err
		}
		if s.DType != dtypes.Float32 {
			return ops, false, nil
		}
		ops[i] = op
	}
	for i := range ops {
		if ops[i], err = b.ConvertDType(ops[i], dtypes.BFloat16); err != nil {
			return ops, false, err
		}
	}
	return ops, true, nil
}
