package exportbundle

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/gomlx/gopjrt/dtypes/bfloat16"
	"github.com/nitro-go/nitro/tensorfile"
	"github.com/x448/float16"
)

// maxElements bounds a tensor's element count, so that no byte count computed from a hostile
// shape overflows.
const maxElements = 1 << 40

// numElements is the product of shape, or an error for a negative dimension or a product over
// maxElements.
func numElements(shape []int) (int64, error) {
	n := uint64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("dimension %d is negative (%d)", i, d)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > maxElements {
			return 0, fmt.Errorf("shape %v has more than %d elements", shape, int64(maxElements))
		}
		n = lo
	}
	return int64(n), nil
}

// Tensor is one array as plain host data: Data holds the elements row-major and little-endian
// (BOOL as one byte, 0 or 1), len(Data) == product(Shape) * DType.Size().
type Tensor struct {
	DType tensorfile.DType
	Shape []int
	Data  []byte
}

// check returns an error when t's dtype is unknown or its data does not fit its shape.
func (t Tensor) check() error {
	if !t.DType.Valid() {
		return fmt.Errorf("unknown dtype %q", t.DType)
	}
	n, err := numElements(t.Shape)
	if err != nil {
		return err
	}
	if want := n * int64(t.DType.Size()); int64(len(t.Data)) != want {
		return fmt.Errorf("%d bytes of data, %s%v needs %d", len(t.Data), t.DType, t.Shape, want)
	}
	return nil
}

// Element is a Go type with a bundle dtype (F16 and BF16 have none: use Tensor.Data).
type Element interface {
	bool | uint8 | int8 | int16 | uint16 | int32 | uint32 | int64 | uint64 | float32 | float64
}

func dtypeOf[T Element]() tensorfile.DType {
	var z T
	switch any(z).(type) {
	case bool:
		return tensorfile.BOOL
	case uint8:
		return tensorfile.U8
	case int8:
		return tensorfile.I8
	case int16:
		return tensorfile.I16
	case uint16:
		return tensorfile.U16
	case int32:
		return tensorfile.I32
	case uint32:
		return tensorfile.U32
	case int64:
		return tensorfile.I64
	case uint64:
		return tensorfile.U64
	case float32:
		return tensorfile.F32
	default:
		return tensorfile.F64
	}
}

// NewTensor builds a Tensor of T's dtype from row-major values; len(values) must equal the
// product of shape.
func NewTensor[T Element](shape []int, values []T) (Tensor, error) {
	n, err := numElements(shape)
	if err != nil {
		return Tensor{}, fmt.Errorf("exportbundle: NewTensor: %w", err)
	}
	if int64(len(values)) != n {
		return Tensor{}, fmt.Errorf("exportbundle: NewTensor: %d values for shape %v (%d elements)", len(values), shape, n)
	}
	data, err := binary.Append(make([]byte, 0, int(n)*dtypeOf[T]().Size()), binary.LittleEndian, values)
	if err != nil {
		return Tensor{}, fmt.Errorf("exportbundle: NewTensor: %w", err)
	}
	return Tensor{DType: dtypeOf[T](), Shape: append([]int{}, shape...), Data: data}, nil
}

// Values returns t's elements as []T, row-major; T must be t's dtype.
func Values[T Element](t Tensor) ([]T, error) {
	if want := dtypeOf[T](); t.DType != want {
		return nil, fmt.Errorf("exportbundle: Values: tensor is %s, not %s", t.DType, want)
	}
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("exportbundle: Values: %w", err)
	}
	out := make([]T, len(t.Data)/t.DType.Size())
	if _, err := binary.Decode(t.Data, binary.LittleEndian, out); err != nil {
		return nil, fmt.Errorf("exportbundle: Values: %w", err)
	}
	return out, nil
}

// float64At reads element i of a float or integer tensor as a float64 (for comparisons and JSON).
func float64At(d tensorfile.DType, data []byte, i int) float64 {
	le := binary.LittleEndian
	switch d {
	case tensorfile.BOOL, tensorfile.U8:
		return float64(data[i])
	case tensorfile.I8:
		return float64(int8(data[i]))
	case tensorfile.I16:
		return float64(int16(le.Uint16(data[2*i:])))
	case tensorfile.U16:
		return float64(le.Uint16(data[2*i:]))
	case tensorfile.F16:
		return float64(float16.Frombits(le.Uint16(data[2*i:])).Float32())
	case tensorfile.BF16:
		return float64(bfloat16.FromBits(le.Uint16(data[2*i:])).Float32())
	case tensorfile.I32:
		return float64(int32(le.Uint32(data[4*i:])))
	case tensorfile.U32:
		return float64(le.Uint32(data[4*i:]))
	case tensorfile.F32:
		return float64(math.Float32frombits(le.Uint32(data[4*i:])))
	case tensorfile.I64:
		return float64(int64(le.Uint64(data[8*i:])))
	case tensorfile.U64:
		return float64(le.Uint64(data[8*i:]))
	case tensorfile.F64:
		return math.Float64frombits(le.Uint64(data[8*i:]))
	}
	return math.NaN()
}
