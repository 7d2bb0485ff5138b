package tensorfile

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/gomlx/gopjrt/dtypes"
)

// DType names a tensor's element type with the safetensors spelling.
type DType string

// The element types a tensor file may hold.
const (
	BOOL DType = "BOOL"
	U8   DType = "U8"
	I8   DType = "I8"
	I16  DType = "I16"
	U16  DType = "U16"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I32  DType = "I32"
	U32  DType = "U32"
	F32  DType = "F32"
	F64  DType = "F64"
	I64  DType = "I64"
	U64  DType = "U64"
)

// dtypeInfo is the one table of element types: the byte width and the GoMLX/PJRT dtype (GoMLX
// uses gopjrt's dtypes, so one mapping serves both).
var dtypeInfo = map[DType]struct {
	size int
	pjrt dtypes.DType
}{
	BOOL: {1, dtypes.Bool}, U8: {1, dtypes.Uint8}, I8: {1, dtypes.Int8},
	I16: {2, dtypes.Int16}, U16: {2, dtypes.Uint16}, F16: {2, dtypes.Float16}, BF16: {2, dtypes.BFloat16},
	I32: {4, dtypes.Int32}, U32: {4, dtypes.Uint32}, F32: {4, dtypes.Float32},
	F64: {8, dtypes.Float64}, I64: {8, dtypes.Int64}, U64: {8, dtypes.Uint64},
}

// Size is the byte width of one element, 0 for an unknown dtype.
func (d DType) Size() int { return dtypeInfo[d].size }

// Valid reports whether d is one of the dtypes above.
func (d DType) Valid() bool { return d.Size() > 0 }

// PJRT is the GoMLX/PJRT dtype of d, dtypes.InvalidDType for an unknown one.
func (d DType) PJRT() dtypes.DType {
	if info, ok := dtypeInfo[d]; ok {
		return info.pjrt
	}
	return dtypes.InvalidDType
}

// DTypeOf is the tensor-file dtype of a GoMLX/PJRT dtype, "" when a file cannot hold it
// (complex, 4- and 8-bit floats, 2- and 4-bit integers).
func DTypeOf(p dtypes.DType) DType {
	for d, info := range dtypeInfo {
		if info.pjrt == p {
			return d
		}
	}
	return ""
}

// Tensor is one named array as plain data: Data holds the elements little-endian, row-major
// (BOOL as one byte, 0 or 1), len(Data) == product(Shape) * DType.Size().
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// ByteSize is product(shape)*dt.Size(), or an error for an unknown dtype, a negative dim or a
// count past math.MaxInt64: a hostile shape never overflows into a small, plausible size.
func ByteSize(dt DType, shape []int) (uint64, error) {
	size := dt.Size()
	if size == 0 {
		return 0, fmt.Errorf("unknown dtype %q", dt)
	}
	n := uint64(size)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("dim %d is negative (%d)", i, d)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v overflows the byte count", shape)
		}
		n = lo
	}
	return n, nil
}
